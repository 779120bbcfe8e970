"""The real agent clients of the suite (Codex CLI, Claude Code from `make agents`) and docs/agents.md's settings,
read as written: where the binaries are, the fenced blocks the docs mark `<!-- tested: NAME -->`, bounded runs."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AGENT_BIN = ROOT / ".agents" / "node_modules" / ".bin"
AGENTS_DOC = ROOT / "docs" / "agents.md"
DOC_PORT = "8000"
"""The port docs/agents.md's settings name; a test puts its server's port in its place."""
MARKER = "MG-MARKER-4711"
"""What the tool prints: only the shell makes it (the command says MG-MARKER-$((4700+11))), so the prompt holds it
once the tool's result came back, and the final answer quotes it."""
AGENT_TIMEOUT_S = 240.0


def agent_binary(name: str) -> Path:
    """The installed client `name` (codex, claude); a test failure saying how to install it when it is missing."""
    path = AGENT_BIN / name
    if not path.exists():
        pytest.fail(f"{name} is not installed at {path}: run `make agents` (npm ci in .agents/, the pinned Codex CLI "
                    "and Claude Code); `make test` does it first", pytrace=False)
    return path


def docs_block(name: str) -> str:
    """The fenced block that follows `<!-- tested: NAME -->` in docs/agents.md."""
    text = AGENTS_DOC.read_text(encoding="utf-8")
    match = re.search(rf"<!-- tested: {re.escape(name)} -->\s*```[a-z]*\n(.*?)```", text, re.S)
    assert match, f"docs/agents.md has no block marked <!-- tested: {name} -->"
    return match.group(1)


def at_port(text: str, port: int) -> str:
    """A docs block with its server at `port` instead of the docs' 8000."""
    assert f"127.0.0.1:{DOC_PORT}" in text, text
    return text.replace(f"127.0.0.1:{DOC_PORT}", f"127.0.0.1:{port}")


def port_of(base_url: str) -> int:
    """The port of a server's base URL (http://127.0.0.1:PORT/v1)."""
    return int(base_url.rsplit(":", 1)[1].split("/", 1)[0])


def exported_env(block: str) -> dict[str, str]:
    """`export NAME=VALUE` lines of a shell block as a mapping."""
    env = dict(re.findall(r"^export ([A-Z_][A-Z0-9_]*)=(\S+)$", block, re.M))
    assert env, f"no `export NAME=VALUE` lines in:\n{block}"
    return env


def base_env(home: Path) -> dict[str, str]:
    """A clean environment for a client: PATH (node for Codex's launcher), a HOME of its own, no proxies or keys
    of the machine running the suite."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8", "NO_COLOR": "1"}
    if os.environ.get("TMPDIR"):
        env["TMPDIR"] = os.environ["TMPDIR"]
    return env


def run_agent(cmd: list[str], env: dict[str, str], cwd: Path,
              timeout_s: float = AGENT_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """The client run to its end, bounded; a test failure with its output when it does not end in time."""
    try:
        return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        pytest.fail(f"{Path(cmd[0]).name} did not finish within {timeout_s:g}s\nstdout:\n{out[-3000:]}\n"
                    f"stderr:\n{err[-3000:]}", pytrace=False)


def describe(proc: subprocess.CompletedProcess[str], server_log: str) -> str:
    """A failed run's story: the client's exit, output and errors, and the server's log."""
    return (f"exit {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}\n"
            f"server log:\n{server_log[-4000:]}")
