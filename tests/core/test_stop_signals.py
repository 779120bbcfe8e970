"""`metagen ui` and `metagen serve` stop on SIGTERM / SIGINT even while a run is stuck on a lock (one `metagen ui`
ignored SIGTERM for 34 minutes): the orderly shutdown starts and a timer ends the process after a grace period."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from tests.serve.conftest import ROOT, free_port, workflows_folder

STOP_BOUND_S = 60
"""Generous: the forced exit comes after 4 s; before it, a stuck run held the process for good."""
START_BOUND_S = 180


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "METAGEN_HOME": str(home), "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    for key in ("METAGEN_WORKFLOWS", "METAGEN_TRACE_DB", "METAGEN_MODELS", "METAGEN_SHARE_MODE", "METAGEN_API_KEY",
                "GRADIO_TEMP_DIR"):
        env.pop(key, None)
    return env


def _wait_for(path: Path, proc: subprocess.Popen[bytes], log: Path, what: str) -> None:
    deadline = time.monotonic() + START_BOUND_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"exited early ({proc.returncode}):\n{log.read_text(errors='replace')}"
        if path.exists():
            return
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"{what} never happened:\n{log.read_text(errors='replace')}")


def _wait_serving(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Until GET /health answers (the server runs: its own signal handling is in place)."""
    deadline = time.monotonic() + START_BOUND_S
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.2)


def _stop_stuck(command: str, sig: signal.Signals, tmp_path: Path) -> tuple[int, str]:
    """Start `metagen COMMAND --dry-run` with a run stuck on a lock, send `sig`; its exit status and log."""
    home, marker, log = tmp_path / "home", tmp_path / "stuck", tmp_path / "server.log"
    home.mkdir()
    port = free_port()
    args = [command, "--dry-run", "--port", str(port), "--db", str(home / "traces.db"),
            "--workflows", str(workflows_folder(home / "wf"))]
    if command == "ui":
        args.append("--no-browser")
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "core" / "stuck_studio.py"), str(marker), *args],
                                cwd=ROOT, env=_env(home), stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_for(marker, proc, log, "the stuck run")
            _wait_serving(port, proc, log)
            proc.send_signal(sig)
            try:
                code = proc.wait(timeout=STOP_BOUND_S)
            except subprocess.TimeoutExpired:
                code = None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = log.read_text(errors="replace")
    assert code is not None, f"metagen {command} still ran {STOP_BOUND_S} s after {sig.name}:\n{text}"
    return code, text


@pytest.mark.parametrize(("command", "sig"), [("ui", signal.SIGTERM), ("serve", signal.SIGTERM),
                                              ("serve", signal.SIGINT)])
def test_the_server_exits_on_a_stop_signal_while_a_run_is_stuck(command: str, sig: signal.Signals,
                                                                  tmp_path: Path) -> None:
    code, text = _stop_stuck(command, sig, tmp_path)
    assert code != 0
    assert "Traceback" not in text, text


SCRIPT = textwrap.dedent("""
    import signal, sys, threading
    from app.platform import shutdown
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, whatever this test inherited
    shutdown.FORCED_EXIT_AFTER_S = float(sys.argv[1])
    shutdown.install_forced_exit()
    stuck = threading.Thread(target=threading.Event().wait, name="stuck-on-a-lock")  # not a daemon: exit waits
    stuck.start()
    try:
        print("ready", flush=True)  # inside: a signal right after it still reaches the finally
        threading.Event().wait()
    finally:
        print("stopping", flush=True)
""")


def _script(grace_s: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(grace_s)], cwd=ROOT, env=_env(Path("/nonexistent")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_a_stuck_shutdown_ends_after_the_grace_period() -> None:
    proc = _script(1.0)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=STOP_BOUND_S)
    assert "stopping" in out  # the orderly shutdown ran first (the app's finally blocks)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "the orderly shutdown took over 1 s after SIGTERM; exiting now" in err


def test_an_ignored_signal_stays_ignored(tmp_path: Path) -> None:
    """A server started with SIGHUP ignored (nohup) keeps running when the terminal goes."""
    script = tmp_path / "script.py"
    script.write_text("import signal\nsignal.signal(signal.SIGHUP, signal.SIG_IGN)\n" + SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), "3"], cwd=ROOT, env=_env(Path("/nonexistent")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGHUP)
    proc.send_signal(signal.SIGTERM)  # the first stop signal it heard: orderly, then the grace period
    out, err = proc.communicate(timeout=STOP_BOUND_S)
    assert "stopping" in out and "the orderly shutdown took over 3 s after SIGTERM" in err


def test_a_second_stop_signal_ends_the_process_at_once() -> None:
    proc = _script(600.0)
    assert proc.stdout is not None
    proc.send_signal(signal.SIGINT)
    assert proc.stdout.readline().strip() == "stopping"
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=STOP_BOUND_S)
    assert proc.returncode == 128 + signal.SIGINT
    assert "a second stop signal after SIGINT; exiting now" in err


def test_health_answers_while_the_server_runs(tmp_path: Path) -> None:
    """static/connection.js's probe: GET /health on `metagen serve` (and on the studio's server, same routes)."""
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--dry-run", "--port", str(port),
                                 "--workflows", str(workflows_folder(home / "wf"))], cwd=ROOT, env=_env(home),
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_BOUND_S
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                    assert answer.status == 200 and b'"ok":true' in answer.read().replace(b" ", b"")
                    assert answer.headers["Cache-Control"] == "no-store"
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=STOP_BOUND_S)
