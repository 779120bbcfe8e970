"""`metagen mcp` from the command line: bad flags refused with a message, and a dry-run server over stdio that an
MCP client lists and calls (the protocol alone on stdout), under share-mode rules when asked."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from tests.fresh_loop import run_fresh
from tests.mcp.conftest import ROOT, copy_workflows, text_of
from tests.serve.conftest import metagen


def test_bad_flags_are_refused(tmp_path: Path) -> None:
    for args, words in ((["--max-concurrent-runs", "0"], "--max-concurrent-runs"), (["--max-queue", "-1"],
                        "--max-queue"), (["--workflows", str(Path(__file__))], "is a file")):
        out = metagen("mcp", *args, home=tmp_path)
        assert out.returncode == 2 and words in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert "mcp" in metagen("--help", home=tmp_path).stdout


def _dry_run(tmp_path: Path, *flags: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("METAGEN_")}
    env.update({"METAGEN_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)})
    return StdioServerParameters(command=sys.executable, cwd=ROOT, env=env, args=[
        "-m", "app.cli.main", "mcp", "--dry-run", "--workflows", str(copy_workflows(tmp_path / "wf")),
        "--db", str(tmp_path / "traces.db"), *flags])


async def _round_trip(params: StdioServerParameters) -> dict[str, Any]:
    async with Client(params) as client:
        return {"tools": [t.name for t in (await client.list_tools()).tools],
                "echo": await client.call_tool("echo", {"text": "hi"}),
                "runs": (await client.list_resources()).resources}


def test_a_dry_run_server_over_stdio(tmp_path: Path) -> None:
    out = run_fresh(_round_trip, _dry_run(tmp_path))
    assert sorted(out["tools"]) == ["echo", "fails", "long_count", "self_consistency"]
    assert text_of(out["echo"]) == "You said: hi" and out["echo"].structured_content["outputs"]["times"] == 1
    assert [r.uri for r in out["runs"]] == [f"metagen://runs/{out['echo'].structured_content['run_id']}"]


def test_share_mode_lists_no_runs_over_stdio(tmp_path: Path) -> None:
    out = run_fresh(_round_trip, _dry_run(tmp_path, "--share-mode"))
    assert not out["echo"].is_error and out["runs"] == []
