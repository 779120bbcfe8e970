"""`metagen serve --mcp`: the MCP server on streamable HTTP at /mcp beside /v1, behind the same API keys and
share-mode rules (a request from another machine needs a key and follows the share policy)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from app.mcp.server import build_mcp_server
from app.serve.access import Caller, check_access
from app.serve.config import ServeConfig
from app.serve.errors import ApiError
from app.service.studio import StudioService
from app.share.policy import is_loopback_host

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
LOCAL_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
LOCAL_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


def _security(host: str) -> TransportSecuritySettings | None:
    """On a loopback address, requests must name this machine (a web page cannot reach the server through a
    rebound DNS name); on any other address an API key guards it."""
    if not is_loopback_host(host):
        return None
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=LOCAL_HOSTS,
                                     allowed_origins=LOCAL_ORIGINS)


class McpHttp:
    """The /mcp endpoint: the API-key gate of /v1 in front of the SDK's streamable-HTTP session manager. Enter
    `lifespan()` for as long as the server runs."""

    def __init__(self, service: StudioService, config: ServeConfig, host: str = "127.0.0.1") -> None:
        self.service = service
        self.config = config
        server = build_mcp_server(service, config, self.caller)
        self.manager = StreamableHTTPSessionManager(app=server, security_settings=_security(host))

    def caller(self, request: Any) -> Caller:
        if not isinstance(request, Request):
            raise ApiError(401, "an MCP request over HTTP carries no HTTP request to check", code="missing_api_key")
        return check_access(request, self.config, self.service.policy)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            try:
                self.caller(Request(scope, receive))
            except ApiError as exc:
                await exc.response()(scope, receive, send)
                return
        await self.manager.handle_request(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any = None) -> AsyncIterator[None]:
        async with self.manager.run():
            yield

    def routes(self) -> list[BaseRoute]:
        return [Route(MCP_PATH, self, methods=["GET", "POST", "DELETE"])]
