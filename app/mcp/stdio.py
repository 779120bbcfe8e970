"""`metagen mcp`: the MCP server over stdin / stdout for a desktop agent that starts it (every call comes from
this machine: the studio's own policy, or the share-mode rules when asked)."""

from __future__ import annotations

import anyio
from mcp.server.stdio import stdio_server

from app.mcp.server import build_mcp_server
from app.serve.access import Caller
from app.serve.config import ServeConfig
from app.service.studio import StudioService


def serve_stdio(service: StudioService, config: ServeConfig) -> None:
    """Serve until the client closes stdin."""
    policy = config.remote_policy if config.share_rules_everywhere else service.policy
    caller = Caller(remote=False, policy=policy)
    server = build_mcp_server(service, config, lambda request: caller)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
