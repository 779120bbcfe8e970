"""The MCP server in process, on a scripted fake model: one tool per workflow with schemas from its inputs and
outputs, results with outputs, run id and stats, progress node by node, coded tool errors, share-mode refusals,
a cancelled call stopping its run, and runs as resources."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from app.mcp.schemas import input_schema
from app.mcp.server import build_mcp_server
from app.serve.access import Caller
from app.serve.config import studio_config
from app.service.studio import StudioService
from app.workflow.spec import load_workflow_text
from tests.fresh_loop import run_fresh
from tests.mcp.conftest import ROOT, copy_workflows, resource_json, text_of
from tests.studio_fixtures import studio_service

ClientFn = Callable[[Client], Awaitable[Any]]


def _service(tmp_path: Path, **kwargs: Any) -> StudioService:
    service = studio_service(tmp_path, reply=lambda prompt, i: "Answer: 7", **kwargs)
    copy_workflows(service.workflows_dir)
    return service


def _with_client(service: StudioService, fn: ClientFn, *, share: bool = False, mode: str = "auto",
                 auto: str | None = None) -> Any:
    config = dataclasses.replace(studio_config(service), auto=auto)
    caller = Caller(remote=share, policy=config.remote_policy if share else service.policy)
    server = build_mcp_server(service, config, lambda request: caller)

    async def main() -> Any:
        async with Client(server, mode=mode) as client:
            return await fn(client)

    return run_fresh(main)


@pytest.fixture()
def service(tmp_path: Path) -> Any:
    service = _service(tmp_path)
    yield service
    service.close()


def test_the_input_schema_comes_from_the_declared_inputs() -> None:
    wf = load_workflow_text((ROOT / "workflows" / "rejection_sampling.yaml").read_text())
    schema = input_schema(wf)
    assert schema["properties"]["a"] == {"type": "number", "description": "First addend", "default": 3}
    assert "required" not in schema and schema["additionalProperties"] is False
    echo = input_schema(load_workflow_text((ROOT / "tests/mcp/workflows/echo.yaml").read_text()))
    assert echo["required"] == ["text"] and echo["properties"]["text"] == {"type": "string",
                                                                            "description": "Any text"}


def test_one_tool_per_workflow(service: StudioService) -> None:
    tools = _with_client(service, lambda c: c.list_tools()).tools
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {"self_consistency", "long_count", "fails", "echo"}
    sc = by_name["self_consistency"]
    assert sc.description.startswith("Self-consistency, kept small") and sc.title == "self-consistency"
    assert sc.input_schema["properties"]["question"]["default"] == "What is 3 + 4?"
    assert sc.output_schema["required"] == ["outputs", "run_id", "stats"]
    assert set(sc.output_schema["properties"]["outputs"]["properties"]) == {"answer", "votes"}


def test_a_call_answers_with_outputs_run_id_stats_and_text(service: StudioService) -> None:
    result = _with_client(service, lambda c: c.call_tool("self_consistency", {"question": "What is 3 + 4?"}))
    assert not result.is_error, text_of(result)
    data = result.structured_content
    assert data["outputs"]["answer"] == "7" and text_of(result) == "7"
    assert data["stats"]["lm_calls"] == 3 and data["stats"]["tokens"] > 0 and data["stats"]["seconds"] >= 0
    assert service.trace_store is not None
    service.trace_store.flush()
    assert service.trace_store.get_run(data["run_id"])["run"]["status"] == "succeeded"


def test_progress_counts_nodes_done_with_their_names(service: StudioService) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    result = _with_client(service, lambda c: c.call_tool("self_consistency", {}, progress_callback=progress))
    run_id = result.structured_content["run_id"]
    assert [(v, t) for v, t, _ in seen] == [(0, 2), (1, 2), (2, 2)]
    assert run_id in (seen[0][2] or "") and "think" in (seen[1][2] or "") and "vote" in (seen[2][2] or "")


@pytest.mark.parametrize(("arguments", "code"), [
    ({"question": "hi", "colour": "red"}, "unknown_input"),
    ({"question": ["not", "text"]}, "invalid_value"),
])
def test_a_bad_input_is_a_tool_error_with_its_code(service: StudioService, arguments: dict[str, Any],
                                                   code: str) -> None:
    result = _with_client(service, lambda c: c.call_tool("self_consistency", arguments))
    assert result.is_error and text_of(result).startswith(f"[{code}] ")
    assert result.structured_content["error"]["code"] == code


def test_missing_unknown_and_failing_calls_are_tool_errors(service: StudioService) -> None:
    async def calls(client: Client) -> list[types.CallToolResult]:
        return [await client.call_tool("echo", {}), await client.call_tool("nope", {}),
                await client.call_tool("fails", {"question": "q"})]

    missing, unknown, failed = _with_client(service, calls)
    assert missing.is_error and text_of(missing).startswith("[missing_inputs] ") and "text" in text_of(missing)
    assert unknown.is_error and text_of(unknown).startswith("[model_not_found] ")
    assert failed.is_error and text_of(failed).startswith("[run_failed] ")
    assert failed.structured_content["error"]["node"] == "broken"


def test_share_mode_refuses_what_v1_refuses(tmp_path: Path) -> None:
    service = _service(tmp_path)
    try:
        (service.workflows_dir / "py.yaml").write_text(
            "version: 1\nname: py\ninputs:\n  question: {type: text}\nnodes:\n- id: sample\n  kind: sampler\n"
            "  params: {prompt: '{question}', n: 2, max_tokens: 8}\n  inputs: {question: inputs.question}\n"
            "- id: check\n  kind: verifier\n  params: {method: python, code: '0.777'}\n"
            "  inputs: {candidates: sample.candidates}\n- id: vote\n  kind: voter\n  params: {method: best_of_n}\n"
            "  inputs: {candidates: check.candidates}\noutputs: {best: vote.best}\n")
        local = _with_client(service, lambda c: c.call_tool("py", {"question": "q"}))
        shared = _with_client(service, lambda c: c.call_tool("py", {"question": "q"}), share=True)
    finally:
        service.close()
    assert not local.is_error, text_of(local)
    assert shared.is_error and text_of(shared).startswith("[refused_by_share_mode] ")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_cancelled_call_stops_its_run(tmp_path: Path, mode: str) -> None:
    """auto: the 2026-07-28 protocol in process (the call's scope cancelled); legacy: the initialize handshake over
    JSON-RPC streams, where the client sends notifications/cancelled."""
    service = studio_service(tmp_path, reply=lambda prompt, i: "slow")
    copy_workflows(service.workflows_dir)
    service.scheduler.provider = _slow(service.scheduler.provider)
    started: list[str] = []

    async def cancel_mid_run(client: Client) -> float:
        async def progress(value: float, total: float | None, message: str | None) -> None:
            started.append(str(message))

        with anyio.move_on_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: client.call_tool("long_count", {"question": "1, 2,"},
                                                       progress_callback=progress))
                while not started:
                    await anyio.sleep(0.02)
                await anyio.sleep(0.2)
                tg.cancel_scope.cancel()
        return time.time()

    try:
        cancelled_at = _with_client(service, cancel_mid_run, mode=mode)
        run_id = started[0].split()[1]
        run = _ended_run(service, run_id)
    finally:
        service.close()
    assert run["status"] == "cancelled" and "MCP client cancelled" in run["error"]
    assert run["ended_at"] - cancelled_at < 1.0, run["ended_at"] - cancelled_at


def _slow(provider: Any) -> Any:
    from backends.fake import FakeBackend

    slow = FakeBackend(reply_fn=lambda prompt, i: "slow", latency_s=60)
    return lambda spec: slow


def _ended_run(service: StudioService, run_id: str, wait_s: float = 10) -> dict[str, Any]:
    assert service.trace_store is not None
    deadline = time.monotonic() + wait_s
    while True:
        service.trace_store.flush()
        run = service.trace_store.get_run(run_id)["run"]
        if run["status"] != "running" or time.monotonic() > deadline:
            return run  # type: ignore[no-any-return]
        time.sleep(0.05)


def test_runs_are_resources(service: StudioService) -> None:
    async def read(client: Client) -> tuple[Any, ...]:
        result = await client.call_tool("echo", {"text": "hello"})
        run_id = result.structured_content["run_id"]
        templates = await client.list_resource_templates()
        listed = await client.list_resources()
        summary = resource_json(await client.read_resource(f"metagen://runs/{run_id}"))
        with pytest.raises(MCPError) as missing:
            await client.read_resource(f"metagen://runs/{run_id[:4]}")
        return run_id, templates, listed, summary, missing.value

    run_id, templates, listed, summary, missing = _with_client(service, read)
    assert [t.uri_template for t in templates.resource_templates] == ["metagen://runs/{run_id}"]
    assert f"metagen://runs/{run_id}" in [r.uri for r in listed.resources]
    assert summary["run"]["id"] == run_id and summary["run"]["status"] == "succeeded"
    assert summary["run"]["outputs"]["answer"] == "You said: hello" and summary["nodes"][0]["node_id"] == "say"
    assert missing.code == types.INVALID_PARAMS and "no run" in missing.message


def test_share_mode_lists_no_runs(service: StudioService) -> None:
    listed = _with_client(service, lambda c: c.list_resources(), share=True)
    assert listed.resources == []


def test_auto_is_a_tool_answering_with_what_the_server_names(service: StudioService) -> None:
    """Review 3.4: `metagen serve --auto NAME` was ignored by MCP (a call of `auto` took the newest tuned workflow,
    and no `auto` tool was listed)."""
    assert "auto" not in {t.name for t in _with_client(service, lambda c: c.list_tools()).tools}  # no target yet

    async def both(c: Client) -> Any:
        return await c.list_tools(), await c.call_tool("auto", {"text": "hello"})

    tools, result = _with_client(service, both, auto="echo")
    auto = {t.name: t for t in tools.tools}["auto"]
    assert "echo" in auto.description and auto.input_schema["required"] == ["text"]
    assert not result.is_error, text_of(result)
    assert result.structured_content["outputs"] == _with_client(
        service, lambda c: c.call_tool("echo", {"text": "hello"})).structured_content["outputs"]
