"""Claude Code (the real `claude -p` from `make agents`) completes a tool round trip against `metagen serve`: with
docs/agents.md's environment it asks /v1/messages for a claude-* model, runs the scripted model's Bash call, sends its
result back, and prints the answer the scripted model made from it (the fake script is the docs' own)."""

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
    exported_env,
    port_of,
    run_agent,
)

pytestmark = pytest.mark.agents


def test_claude_p_runs_bash_and_answers_from_its_result(scripted_serve, tmp_path: Path) -> None:
    claude = agent_binary("claude")
    script = tmp_path / "claude_code.yaml"
    script.write_text(docs_block("claude-code-script"))
    server = scripted_serve(script)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {**base_env(home), **exported_env(at_port(docs_block("claude-code-env"), port_of(server.base_url)))}
    proc = run_agent([str(claude), "-p", "Run the marker command and tell me what it printed.",
                      "--allowedTools", "Bash", "--output-format", "text"], env, work)
    assert proc.returncode == 0, describe(proc, server.log())
    assert f"The command printed {MARKER}" in proc.stdout, describe(proc, server.log())
