"""The MCP server (the `mcp` SDK's low-level Server): workflows as tools, runs as resources; the same for stdio
and streamable HTTP, which differ only in how a call's caller is found."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from app.mcp.call import call_workflow
from app.mcp.resources import TEMPLATE, list_runs, read_run
from app.mcp.tools import ToolCatalog, auto_tool
from app.serve.access import Caller
from app.serve.config import ServeConfig
from app.serve.errors import ApiError
from app.service.studio import StudioService

log = logging.getLogger(__name__)

SERVER_NAME = "metagen"
INSTRUCTIONS = ("Each tool runs one Metagen Studio workflow (sampling, voting, verifiers, search) on local models "
                "and returns its outputs, its run_id and its stats; read metagen://runs/{run_id} to see what "
                "the run did. Send a progress token to follow the run node by node.")
CallerFor = Callable[[Any], Caller]
"""The caller of a message, from its HTTP request (None over stdio); raises ApiError when it may not call."""


def _caller(caller_for: CallerFor, ctx: ServerRequestContext[Any]) -> Caller:
    try:
        return caller_for(ctx.request)
    except ApiError as exc:
        raise MCPError(types.INVALID_REQUEST, f"[{exc.code}] {exc.message}") from None


def build_mcp_server(service: StudioService, config: ServeConfig, caller_for: CallerFor) -> Server[Any]:
    catalog = ToolCatalog(service)

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        caller = _caller(caller_for, ctx)
        entries = await anyio.to_thread.run_sync(catalog.tools, caller.policy)
        auto = await anyio.to_thread.run_sync(auto_tool, service, caller.policy, config.auto)
        if auto is not None and all(e.name != auto.name for e in entries):
            entries = [*entries, auto]
        return types.ListToolsResult(tools=[e.tool for e in entries])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        caller = _caller(caller_for, ctx)

        async def report(progress: float, total: float, message: str) -> None:
            try:
                await ctx.session.report_progress(progress, total, message)
            except Exception as exc:  # a closed stream: the run's cancel follows
                log.debug("progress not delivered: %s", exc)

        return await call_workflow(service, config, caller, catalog, params.name, params.arguments, report)

    async def list_resources(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
                             ) -> types.ListResourcesResult:
        caller = _caller(caller_for, ctx)
        runs = await anyio.to_thread.run_sync(list_runs, service, caller)
        return types.ListResourcesResult(resources=runs)

    async def list_templates(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
                             ) -> types.ListResourceTemplatesResult:
        _caller(caller_for, ctx)
        return types.ListResourceTemplatesResult(resource_templates=[TEMPLATE])

    async def read_resource(ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult:
        caller = _caller(caller_for, ctx)
        return await anyio.to_thread.run_sync(read_run, service, caller, str(params.uri))

    return Server(SERVER_NAME, version=_version(), title="Metagen Studio", instructions=INSTRUCTIONS,
                  get_tool_input_schema=lambda name: None,  # no argument is mirrored into Mcp-Param headers
                  on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                  on_list_resource_templates=list_templates, on_read_resource=read_resource)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("metagen-studio")
    except PackageNotFoundError:
        return "0"
