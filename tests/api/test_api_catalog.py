"""metagen.nodes, metagen.models and metagen.serve (the OpenAI-compatible API in a child process)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import metagen
from tests.serve.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_nodes_are_the_node_kinds_with_their_params(studio: metagen.Studio) -> None:
    kinds = {k["kind"]: k for k in metagen.nodes(studio=studio)}
    assert {"sampler", "voter", "generator"} <= set(kinds)
    n = next(p for p in kinds["sampler"]["params"] if p["name"] == "n")
    assert n["min"] == 1 and n["default"] >= 1


def test_models_lists_the_bundled_model_without_loading_it(studio: metagen.Studio) -> None:
    models = metagen.models(studio=studio)
    bundled = next(m for m in models if m["key"] == "bundled")
    assert bundled["path"].endswith(".gguf") and bundled["loaded"] is False


@pytest.mark.parametrize(("kwargs", "error", "named"), [
    ({"host": 8000}, TypeError, "host"),
    ({"port": "8000"}, TypeError, "port"),
    ({"port": 0}, ValueError, "port"),
    ({"port": 70000}, ValueError, "port"),
    ({"dry_run": "yes"}, TypeError, "dry_run"),
    ({"workflows_dir": 3}, TypeError, "workflows"),
])
def test_serve_refuses_bad_arguments_before_starting(kwargs: dict[str, object], error: type[Exception],
                                                     named: str) -> None:
    with pytest.raises(error, match=named):
        metagen.serve(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_serve_blocks_answers_and_stops_on_ctrl_c(tmp_path: Path, stop: str) -> None:
    """The caller's process starts with SIGINT ignored, as a background job's shell leaves it (`make test &`): the
    server ignored Ctrl+C there for 30 s and more; a SIGTERM ended the caller and left the server running. Either
    signal stops both within seconds now."""
    port = free_port()
    code = (f"import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); import metagen; "
            f"metagen.serve('127.0.0.1', {port}, dry_run=True, "
            f"trace_db={str(tmp_path / 't.db')!r}, workflows_dir={str(ROOT / 'workflows')!r})")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)  # its own group: the finally below ends the server too
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                listed = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).json()
                break
            except httpx.HTTPError:
                assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
                time.sleep(0.5)
        assert "self_consistency" in {m["id"] for m in listed["data"]}
        process.send_signal(getattr(signal, stop))
        assert process.wait(timeout=15) == (0 if stop == "SIGINT" else -signal.SIGTERM)  # a bound on a hang
        assert "Traceback" not in (process.stderr.read() if process.stderr else "")
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
