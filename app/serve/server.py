"""The server of `metagen serve`: the /v1 routes plus a small index at /, run by uvicorn."""

from __future__ import annotations

import logging

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.serve.config import ServeConfig
from app.serve.errors import route_error
from app.serve.routes import API_PREFIX, api_routes
from app.service.studio import StudioService

log = logging.getLogger(__name__)


def build_server(service: StudioService, config: ServeConfig) -> Starlette:
    async def index(request: Request) -> Response:
        return JSONResponse({"name": "Metagen Studio", "api": API_PREFIX, "openai_compatible": True,
                             "routes": ["GET /v1/models", "POST /v1/chat/completions", "POST /v1/completions",
                                        "POST /v1/rerank"]})

    return Starlette(routes=[Route("/", index), *api_routes(service, config)],
                     exception_handlers={HTTPException: route_error, Exception: route_error})


def make_server(app: Starlette, host: str, port: int) -> uvicorn.Server:
    """A uvicorn server for `app` (call `.run()`; it stops on Ctrl+C / SIGTERM)."""
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=5, lifespan="off")
    return uvicorn.Server(config)
