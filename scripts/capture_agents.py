"""Record what the real agent clients (Codex CLI, Claude Code) send: a loopback capture server and its fixtures.

Usage: python scripts/capture_agents.py [--out tests/fixtures/agents] [--agents codex,claude]

Each client is started against a tiny HTTP server on 127.0.0.1 that records every request (method, path, query,
headers, body) and answers with the smallest valid reply of its API (one streamed text answer "ok"), so a client goes
through one whole turn and every request it makes on the way is seen. Secrets (API keys, session and device ids) are
replaced by placeholders before anything is written. The clients come from `make agents` (.agents/node_modules).
"""

from __future__ import annotations

import argparse
import http.server
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
AGENT_BIN = ROOT / ".agents" / "node_modules" / ".bin"
CAPTURE_KEY = "sk-capture-secret-0000"
REDACTED = "REDACTED"
SECRET_HEADERS = {"authorization", "x-api-key", "cookie"}
SESSION_HEADERS = {"session_id", "session-id", "x-claude-code-session-id", "conversation_id", "x-client-request-id",
                   "x-codex-turn-metadata", "x-codex-window-id", "x-codex-installation-id"}

log = logging.getLogger("capture_agents")


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


def responses_stream(model: str) -> bytes:
    """The Responses API's smallest streamed answer: one message holding "ok"."""
    rid, mid = "resp_capture", "msg_capture"
    base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model, "output": []}
    item = {"type": "message", "id": mid, "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}]}
    usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
             "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}
    events = [
        ("response.created", {"response": {**base, "status": "in_progress"}}),
        ("response.output_item.added", {"output_index": 0, "item": {**item, "status": "in_progress", "content": []}}),
        ("response.output_text.delta", {"output_index": 0, "content_index": 0, "item_id": mid, "delta": "ok"}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": {**base, "status": "completed", "output": [item], "usage": usage}}),
    ]
    return b"".join(_sse(k, {"type": k, "sequence_number": i, **d}) for i, (k, d) in enumerate(events))


def messages_stream(model: str) -> bytes:
    """The Messages API's smallest streamed answer: one text block "ok"."""
    usage = {"input_tokens": 1, "output_tokens": 1}
    events = [
        ("message_start", {"message": {"id": "msg_capture", "type": "message", "role": "assistant", "model": model,
                                       "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}}),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "ok"}}),
        ("content_block_stop", {"index": 0}),
        ("message_delta", {"delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": usage}),
        ("message_stop", {}),
    ]
    return b"".join(_sse(k, {"type": k, **d}) for k, d in events)


def message_object(model: str) -> dict[str, Any]:
    return {"id": "msg_capture", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1}}


class Recorder:
    """Every request the server saw, in arrival order (thread-safe)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def add(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(entry)


def make_handler(recorder: Recorder) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            log.debug(format, *args)

        def _record(self) -> dict[str, Any]:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            url = urllib.parse.urlsplit(self.path)
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            entry = {"method": self.command, "path": url.path, "query": url.query,
                     "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body, "bytes": len(raw)}
            recorder.add(entry)
            return entry

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            entry = self._record()
            if entry["path"].endswith("/models"):
                self._send(200, json.dumps({"object": "list", "data": []}).encode(), "application/json")
            else:
                self._send(404, b'{"error": {"message": "not captured"}}', "application/json")

        def do_HEAD(self) -> None:
            self._record()
            self._send(200, b"", "text/plain")

        def do_POST(self) -> None:
            entry = self._record()
            body = entry["body"] if isinstance(entry["body"], dict) else {}
            model = str(body.get("model", "capture"))
            path = entry["path"]
            if path.endswith("/messages/count_tokens"):
                self._send(200, b'{"input_tokens": 1}', "application/json")
            elif path.endswith("/messages"):
                if body.get("stream"):
                    self._send(200, messages_stream(model), "text/event-stream")
                else:
                    self._send(200, json.dumps(message_object(model)).encode(), "application/json")
            elif path.endswith("/responses"):
                self._send(200, responses_stream(model), "text/event-stream")
            else:
                self._send(404, b'{"error": {"message": "not captured"}}', "application/json")

    return Handler


def start_server(recorder: Recorder) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(recorder))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def codex_config(base_url: str, model: str = "metagen-capture") -> str:
    """A CODEX_HOME config.toml: one custom provider on the Responses API at `base_url`."""
    return (f'model = "{model}"\nmodel_provider = "metagen"\n\n[model_providers.metagen]\nname = "Metagen"\n'
            f'base_url = "{base_url}"\nenv_key = "METAGEN_API_KEY"\nwire_api = "responses"\n')


CLAUDE_QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "DISABLE_GROWTHBOOK": "1",
    "DISABLE_INSTALLATION_CHECKS": "1",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
}
"""Claude Code's switches for its traffic beyond the model's API (telemetry, error reports, update checks, feature
flags), as its 2.1.197 binary spells them."""


def run_codex(base_url: str, home: Path, workdir: Path, prompt: str, timeout_s: float) -> subprocess.CompletedProcess:
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(codex_config(base_url))
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(codex_home),
           "METAGEN_API_KEY": CAPTURE_KEY, "NO_COLOR": "1"}
    cmd = [str(AGENT_BIN / "codex"), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
           "-C", str(workdir), prompt]
    return subprocess.run(cmd, env=env, cwd=workdir, capture_output=True, text=True, timeout=timeout_s,
                          stdin=subprocess.DEVNULL)


def run_claude(base_url: str, home: Path, workdir: Path, prompt: str, timeout_s: float) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "ANTHROPIC_BASE_URL": base_url,
           "ANTHROPIC_API_KEY": CAPTURE_KEY, **CLAUDE_QUIET_ENV}
    # --allowedTools, not --dangerously-skip-permissions: Claude Code refuses the latter to root (CI runs as root)
    cmd = [str(AGENT_BIN / "claude"), "-p", prompt, "--allowedTools", "Bash", "--output-format", "text"]
    return subprocess.run(cmd, env=env, cwd=workdir, capture_output=True, text=True, timeout=timeout_s,
                          stdin=subprocess.DEVNULL)


DEVICE_ID = re.compile(r'(\\?"device_id\\?":\s*\\?")[0-9a-f]{16,}')


def redact(value: Any) -> Any:
    """The capture with the API key and the device id replaced by placeholders."""
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return DEVICE_ID.sub(lambda m: m.group(1) + REDACTED, value.replace(CAPTURE_KEY, REDACTED))
    return value


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    out = {}
    for k, v in headers.items():
        if k in SECRET_HEADERS:
            out[k] = re.sub(re.escape(CAPTURE_KEY), REDACTED, v)
        elif k in SESSION_HEADERS:
            out[k] = REDACTED
        else:
            out[k] = v
    return out


def clean(entry: dict[str, Any], home: Path, workdir: Path) -> dict[str, Any]:
    """One request as a fixture: secrets out, the temporary folders as stable placeholders."""
    text = json.dumps(redact({**entry, "headers": redact_headers(entry["headers"])}))
    for path, name in ((workdir, "/tmp/agent-work"), (home, "/tmp/agent-home")):
        text = text.replace(str(path.resolve()), name).replace(str(path), name)
    return json.loads(text)


FIXTURE_NAMES = {
    ("codex", "/v1/responses"): "codex_responses_request",
    ("claude", "/v1/messages"): "claude_code_messages_request",
    ("claude", "/v1/messages/count_tokens"): "claude_code_count_tokens",
}


def capture(agent: str, out: Path, prompt: str, timeout_s: float) -> list[dict[str, Any]]:
    """Run one agent on `prompt` against a fresh capture server; return the requests it made, cleaned."""
    recorder = Recorder()
    server = start_server(recorder)
    port = server.server_address[1]
    with tempfile.TemporaryDirectory(prefix=f"capture-{agent}-") as tmp:
        home, workdir = Path(tmp) / "home", Path(tmp) / "work"
        home.mkdir()
        workdir.mkdir()
        try:
            if agent == "codex":
                proc = run_codex(f"http://127.0.0.1:{port}/v1", home, workdir, prompt, timeout_s)
            else:
                proc = run_claude(f"http://127.0.0.1:{port}", home, workdir, prompt, timeout_s)
            log.info("%s exited %s\nstdout: %s\nstderr: %s", agent, proc.returncode, proc.stdout[-1000:],
                     proc.stderr[-1000:])
        except subprocess.TimeoutExpired:
            log.warning("%s did not finish in %ss: keeping the requests seen so far", agent, timeout_s)
        finally:
            server.shutdown()
            server.server_close()
        return [clean(r, home, workdir) for r in recorder.requests]


def write_fixtures(agent: str, requests: list[dict[str, Any]], out: Path) -> None:
    """The first request of each kind as its fixture (count_tokens: also the largest, Claude Code's tool list), and
    a summary of every request seen (method, path, query, size, headers)."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for req in requests:
        name = FIXTURE_NAMES.get((agent, req["path"]))
        if name is not None and req["method"] == "POST":
            by_name.setdefault(name, []).append(req)
    for name, reqs in by_name.items():
        (out / f"{name}.json").write_text(json.dumps(reqs[0], indent=1, ensure_ascii=False) + "\n")
        if name.endswith("count_tokens") and len(reqs) > 1:
            largest = max(reqs, key=lambda r: r["bytes"])
            (out / f"{name}_largest.json").write_text(json.dumps(largest, indent=1, ensure_ascii=False) + "\n")
    summary = [{k: r[k] for k in ("method", "path", "query", "bytes")} | {"headers": r["headers"]} for r in requests]
    (out / f"{agent}_requests_seen.json").write_text(json.dumps(summary, indent=1) + "\n")


PROMPTS = {"codex": ["{task}"], "claude": ["{task}", "/context"]}
"""What each agent is asked: the task, and for Claude Code also `/context`, the command that counts tokens
(POST /v1/messages/count_tokens)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "agents")
    parser.add_argument("--agents", default="codex,claude")
    parser.add_argument("--prompt", default="Run the shell command `echo MG-MARKER-4711` and tell me what it printed.")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args.out.mkdir(parents=True, exist_ok=True)
    for agent in args.agents.split(","):
        if not (AGENT_BIN / agent).exists():
            log.error("%s is not installed in %s: run `make agents`", agent, AGENT_BIN)
            return 1
        requests = [r for p in PROMPTS[agent] for r in capture(agent, args.out, p.format(task=args.prompt),
                                                                   args.timeout)]
        write_fixtures(agent, requests, args.out)
        for r in requests:
            log.info("%s %s %s?%s %d bytes", agent, r["method"], r["path"], r["query"], r["bytes"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
