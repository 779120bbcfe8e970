"""Codex CLI (the real `codex exec` from `make agents`) completes a tool round trip against `metagen serve`: with
docs/agents.md's config.toml it asks /v1/responses, runs the scripted model's exec_command call, sends its output
back, and prints the answer the scripted model made from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents.agent_clients import (
    MARKER,
    agent_binary,
    at_port,
    base_env,
    describe,
    docs_block,
    port_of,
    run_agent,
)

pytestmark = pytest.mark.agents

SCRIPT = Path(__file__).resolve().parent / "scripts" / "codex.yaml"


def test_codex_exec_runs_the_tool_and_answers_from_its_output(scripted_serve, tmp_path: Path) -> None:
    codex = agent_binary("codex")
    server = scripted_serve(SCRIPT)
    home, work = tmp_path / "home", tmp_path / "work"
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True)
    work.mkdir()
    (codex_home / "config.toml").write_text(at_port(docs_block("codex-config"), port_of(server.base_url)))
    env = {**base_env(home), "CODEX_HOME": str(codex_home), "METAGEN_API_KEY": "unused"}
    proc = run_agent([str(codex), "exec", "--skip-git-repo-check", "--sandbox", "workspace-write",
                      "-C", str(work), "Run the marker command and tell me what it printed."], env, work)
    assert proc.returncode == 0, describe(proc, server.log())
    assert f"The command printed {MARKER}" in proc.stdout, describe(proc, server.log())
