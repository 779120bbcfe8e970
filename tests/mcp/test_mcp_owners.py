"""Round 7 §2.3: a run belongs to the API key that started it: another key cannot read it as an MCP resource (nor
list it), a run the studio made is the machine owner's only; and share mode's per-visitor run limit holds per key
on MCP (40 concurrent calls of one key were all admitted before)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from app.mcp.server import build_mcp_server
from app.serve.access import Caller
from app.serve.config import studio_config
from app.service.studio import StudioService
from tests.fresh_loop import run_fresh
from tests.mcp.conftest import copy_workflows, resource_json
from tests.studio_fixtures import studio_service


def _service(tmp_path: Path, delay_s: float = 0.0) -> StudioService:
    def reply(prompt: str, i: int) -> str:
        time.sleep(delay_s)  # a run that is still going while the others arrive
        return "Answer: 7"

    service = studio_service(tmp_path, reply=reply)
    copy_workflows(service.workflows_dir)
    return service


def _as(service: StudioService, caller: Caller, fn: Callable[[Client], Awaitable[Any]], config: Any = None) -> Any:
    server = build_mcp_server(service, config or studio_config(service), lambda request: caller)

    async def main() -> Any:
        async with Client(server, mode="auto") as client:
            return await fn(client)

    return run_fresh(main)


def test_another_key_cannot_read_or_list_a_run(tmp_path: Path) -> None:
    service = _service(tmp_path)
    config = studio_config(service)
    alice = Caller(remote=True, policy=config.remote_policy, key="alice")
    bob = Caller(remote=True, policy=config.remote_policy, key="bob")
    owner = Caller(remote=False, policy=service.policy, key="")

    async def call(client: Client) -> str:
        result = await client.call_tool("echo", {"text": "secret input"})
        return str(result.structured_content["run_id"])

    run_id = _as(service, alice, call, config)
    uri = f"metagen://runs/{run_id}"
    summary = _as(service, alice, lambda c: c.read_resource(uri), config)
    assert resource_json(summary)["run"]["inputs"]["text"] == "secret input"

    async def read_denied(client: Client) -> MCPError:
        with pytest.raises(MCPError) as info:
            await client.read_resource(uri)
        return info.value

    denied = _as(service, bob, read_denied, config)
    assert denied.code == types.INVALID_PARAMS and "no run" in denied.message  # as for an id that does not exist
    assert _as(service, owner, read_denied, config).code == types.INVALID_PARAMS  # alice's run is alice's
    service.close()


def test_the_owners_own_runs_are_listed_to_the_owner_only(tmp_path: Path) -> None:
    service = _service(tmp_path)
    config = studio_config(service)
    owner = Caller(remote=False, policy=service.policy, key="")

    async def call_and_list(client: Client) -> tuple[str, list[str]]:
        result = await client.call_tool("echo", {"text": "hi"})
        listed = await client.list_resources()
        return str(result.structured_content["run_id"]), [str(r.uri) for r in listed.resources]

    run_id, listed = _as(service, owner, call_and_list, config)
    assert f"metagen://runs/{run_id}" in listed
    other = Caller(remote=False, policy=service.policy, key="someone")
    assert f"metagen://runs/{run_id}" not in [str(r.uri) for r in
                                               _as(service, other, lambda c: c.list_resources(), config).resources]
    service.close()


def test_one_key_gets_its_run_limit_and_another_key_still_runs(tmp_path: Path) -> None:
    service = _service(tmp_path, delay_s=1.5)
    config = studio_config(service)
    limit = config.remote_policy.max_runs_per_visitor
    assert limit is not None and limit < 6
    alice = Caller(remote=True, policy=config.remote_policy, key="alice")
    bob = Caller(remote=True, policy=config.remote_policy, key="bob")

    async def many(client: Client) -> list[types.CallToolResult]:
        results: list[types.CallToolResult] = []

        async def one() -> None:
            results.append(await client.call_tool("self_consistency", {"question": "What is 3 + 4?"}))

        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(one)
        return results

    results = _as(service, alice, many, config)
    refused = [r for r in results if r.is_error and "per key" in "".join(getattr(p, "text", "") for p in r.content)]
    assert len(refused) == 6 - limit, [r.content for r in results]
    assert config.key_runs.unfinished("alice") == 0  # every hold released
    done = _as(service, bob, lambda c: c.call_tool("echo", {"text": "y"}), config)
    assert not done.is_error
    service.close()
