"""`metagen mcp`: the MCP server over stdin / stdout for a desktop agent that starts it (every call comes from
this machine: the studio's own policy, or the share-mode rules when asked)."""

from __future__ import annotations

import logging
import time

import anyio
from mcp.server.stdio import stdio_server

from app.mcp.server import build_mcp_server
from app.serve.access import Caller
from app.serve.config import ServeConfig
from app.service.studio import StudioService

log = logging.getLogger(__name__)

STOP_WAIT_S = 5.0
"""How long the server waits, once the client has gone, for the runs its calls left (cancelled as the calls were)
to end, so their traces say cancelled rather than interrupted."""


def serve_stdio(service: StudioService, config: ServeConfig) -> None:
    """Serve until the client closes stdin."""
    policy = config.remote_policy if config.share_rules_everywhere else service.policy
    caller = Caller(remote=False, policy=policy)
    server = build_mcp_server(service, config, lambda request: caller)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
    deadline = time.monotonic() + STOP_WAIT_S
    while config.gate.running and time.monotonic() < deadline:
        time.sleep(0.05)
    if config.gate.running:
        log.warning("%d run(s) still going as the MCP server stops", config.gate.running)
