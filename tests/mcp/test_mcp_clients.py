"""The MCP doors with the `mcp` SDK's own client on the bundled model: `metagen mcp` over stdio (spawned as
`python -m app.cli.main mcp`) and `metagen serve --mcp` over streamable HTTP behind an API key. Each lists the
tools, calls self_consistency receiving progress, cancels a long run mid-way (the trace store says cancelled, long
before the run's 2048 tokens) and answers a bad input with a coded tool error."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from app.traces.store import TraceStore
from tests.fresh_loop import run_fresh
from tests.mcp.conftest import ROOT, copy_workflows, resource_json, text_of
from tests.serve.conftest import API_KEY, ServeProcess, start_serve, stop_serve

pytestmark = pytest.mark.model

COUNT = {"question": "1, 2, 3, 4, 5, 6, 7, 8,"}
STOP_BOUND_S = 10.0
CLEAN_ENV = ("METAGEN_WORKFLOWS", "METAGEN_TRACE_DB", "METAGEN_MODELS", "METAGEN_SHARE_MODE", "METAGEN_API_KEY")


@pytest.fixture(scope="module")
def stdio_server(tmp_path_factory: pytest.TempPathFactory) -> tuple[StdioServerParameters, Path]:
    home = tmp_path_factory.mktemp("mcp-stdio")
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    env.update({"METAGEN_HOME": str(home), "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"})
    db = home / "traces.db"
    params = StdioServerParameters(command=sys.executable, cwd=ROOT, env=env, args=[
        "-m", "app.cli.main", "mcp", "--workflows", str(copy_workflows(home / "wf")), "--db", str(db)])
    return params, db


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    home = tmp_path_factory.mktemp("mcp-http")
    server = start_serve(home, ["--mcp", "--workflows", str(copy_workflows(home / "mcp-wf"))], api_key=API_KEY)
    yield server
    stop_serve(server)


def _http_client(server: ServeProcess, key: str = API_KEY) -> Client:
    url = server.base_url.removesuffix("/v1") + "/mcp"
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    return Client(streamable_http_client(url, http_client=http))


async def _session(client: Client) -> dict[str, Any]:
    """Everything the tests check, on one connection: tools, a call with progress, a bad input, a cancel."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    out: dict[str, Any] = {}
    async with client:
        out["tools"] = {t.name: t for t in (await client.list_tools()).tools}
        out["answer"] = await client.call_tool("self_consistency", {"question": "What is 2 + 2?"},
                                               progress_callback=progress)
        out["progress"] = list(seen)
        out["bad"] = await client.call_tool("self_consistency", {"question": "What is 2 + 2?", "n": 2})
        seen.clear()
        with anyio.move_on_after(120):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: client.call_tool("long_count", COUNT, progress_callback=progress))
                while not seen:
                    await anyio.sleep(0.02)
                await anyio.sleep(1.0)  # the engine is decoding by now
                tg.cancel_scope.cancel()
        out["cancelled_at"] = time.time()
        out["run_id"] = str(seen[0][2]).split()[1]
        out["trace"] = await _ended(client, out["run_id"])
    return out


async def _ended(client: Client, run_id: str, wait_s: float = 30) -> dict[str, Any]:
    """The run's summary (the resource) once it has ended."""
    with anyio.fail_after(wait_s):
        while True:
            summary = resource_json(await client.read_resource(f"metagen://runs/{run_id}"))
            if summary["run"]["status"] != "running":
                return summary
            await anyio.sleep(0.1)


def _check(out: dict[str, Any], db: Path) -> None:
    tool = out["tools"]["self_consistency"]
    assert {"long_count", "echo", "fails"} <= set(out["tools"])
    assert tool.input_schema["properties"]["question"]["type"] == "string" and tool.output_schema
    answer = out["answer"]
    assert not answer.is_error, text_of(answer)
    data = answer.structured_content
    assert set(data) == {"outputs", "run_id", "stats"} and data["stats"]["lm_calls"] == 3
    assert text_of(answer) == data["outputs"]["answer"]
    assert [(v, t) for v, t, _ in out["progress"]] == [(0, 2), (1, 2), (2, 2)]
    assert "think" in str(out["progress"][1][2])
    assert out["bad"].is_error and text_of(out["bad"]).startswith("[unknown_input] ")
    run = _stored_run(db, out["run_id"])
    assert run["status"] == "cancelled" and "MCP client cancelled" in run["error"]
    # Liveness: a cancel that never reached the run would leave it decoding its 2048 tokens. How soon it stops is
    # bounded by one decode step of the engine; the in-process test holds the door itself to 1 s, and
    # benchmarks/bench_serve.py measures it on the real model.
    assert run["ended_at"] - out["cancelled_at"] < STOP_BOUND_S, run["ended_at"] - out["cancelled_at"]
    assert out["trace"]["totals"]["completion_tokens"] < 2048 and out["trace"]["run"]["status"] == "cancelled"


def _stored_run(db: Path, run_id: str) -> dict[str, Any]:
    store = TraceStore(db, recover=False)
    try:
        return store.get_run(run_id)["run"]  # type: ignore[no-any-return]
    finally:
        store.close()


def test_stdio(stdio_server: tuple[StdioServerParameters, Path]) -> None:
    params, db = stdio_server
    out = run_fresh(_session, Client(params))
    _check(out, db)


def test_streamable_http(http_server: ServeProcess) -> None:
    out = run_fresh(_session, _http_client(http_server))
    _check(out, http_server.db)


def test_http_needs_the_api_key(http_server: ServeProcess) -> None:
    url = http_server.base_url.removesuffix("/v1") + "/mcp"
    reply = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                       headers={"Authorization": "Bearer wrong"})
    assert reply.status_code == 401 and reply.json()["error"]["code"] == "invalid_api_key"
