"""The server of `metagen serve`: the /v1 routes plus a small index at /, run by uvicorn."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from app.platform.shutdown import arm_forced_exit
from app.serve.config import ServeConfig
from app.serve.errors import route_error
from app.serve.origin_guard import OriginGuard
from app.serve.routes import API_PREFIX, api_routes
from app.service.studio import StudioService

log = logging.getLogger(__name__)


def build_server(service: StudioService, config: ServeConfig, *, extra_routes: Sequence[BaseRoute] = (),
                 lifespan: Callable[[Any], AbstractAsyncContextManager[None]] | None = None) -> Starlette:
    """The /v1 routes, /health and the index; `extra_routes` beside them (the MCP endpoint), with the
    `lifespan` they need running while the server serves; every request meets `config.origins` first."""

    routes = [*api_routes(service, config), *extra_routes]
    listed = route_list(routes)

    async def index(request: Request) -> Response:
        return JSONResponse({"name": "Metagen Studio", "api": API_PREFIX, "openai_compatible": True,
                             "routes": listed})

    return Starlette(routes=[Route("/", index), *routes],
                     middleware=[Middleware(OriginGuard, rules=config.origins)],
                     exception_handlers={HTTPException: route_error, Exception: route_error}, lifespan=lifespan)


def route_list(routes: Sequence[BaseRoute]) -> list[str]:
    """"METHOD /path" for every route served, mounted apps' routes under their prefix (the index's list, read
    from the routes themselves so it names every door there is)."""
    listed: list[str] = []
    for route in routes:
        path = re.sub(r":\w+}", "}", getattr(route, "path", ""))  # {model_id:path} shown as {model_id}
        inner = getattr(route, "routes", None)
        if isinstance(route, Mount) and inner:
            listed += [f"{entry.split(' ', 1)[0]} {path}{entry.split(' ', 1)[1]}" for entry in route_list(inner)]
            continue
        methods = sorted(m for m in (getattr(route, "methods", None) or ()) if m != "HEAD") or ["POST"]
        listed += [f"{method} {path}" for method in methods]
    return listed


GRACEFUL_SHUTDOWN_S = 2
"""Seconds open requests get to finish after a stopping signal (the forced exit follows at FORCED_EXIT_AFTER_S)."""


class _Server(uvicorn.Server):
    """uvicorn's server whose stopping signal also arms the forced exit: uvicorn holds SIGINT / SIGTERM while it
    runs, and after it the app's shutdown (runs joined, the trace store closed) may wait on a stuck run."""

    def handle_exit(self, sig: int, frame: Any) -> None:
        arm_forced_exit(sig)
        super().handle_exit(sig, frame)


def make_server(app: Starlette, host: str, port: int, *, lifespan: bool = False) -> uvicorn.Server:
    """A uvicorn server for `app` (call `.run()`; it stops on Ctrl+C / SIGTERM, the process within 5 s);
    `lifespan`: run the app's lifespan (build_server's, for the MCP endpoint)."""
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S, lifespan="on" if lifespan else "off")
    return _Server(config)
