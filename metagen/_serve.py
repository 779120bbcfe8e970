"""`metagen.serve`: the OpenAI-compatible API of `metagen serve`, in a child process until it is stopped."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from metagen._args import expect

__all__ = ["serve"]

log = logging.getLogger(__name__)

STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
STOP_WAIT_S = 5.0
"""How long the child gets to stop after SIGTERM (it promises 5 s: app/platform/shutdown.py) before it is killed."""


class _Stopped(KeyboardInterrupt):
    """A stopping signal arrived while serve() waited (`signum` says which)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    """While serve() waits in the main thread: SIGINT, SIGTERM and SIGHUP stop the server, whatever this process
    inherited. A shell that starts a background job (`make test &`, nohup) has it ignore SIGINT, and Python then keeps
    ignoring it: Ctrl+C or a signal sent to this process did nothing and the server ran on (a SIGTERM left it behind,
    orphaned). The handlers in place before are back once serve() returns."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}

    def stop(signum: int, frame: Any) -> None:
        raise _Stopped(signum)

    for name in STOP_SIGNALS:
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        with contextlib.suppress(OSError, ValueError):
            previous[signum] = signal.getsignal(signum)
            signal.signal(signum, stop)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            with contextlib.suppress(OSError, ValueError, TypeError):
                signal.signal(signum, handler)


def _stop_child(process: subprocess.Popen[str]) -> int:
    """SIGTERM the server (it exits within 5 s), then SIGKILL it if it has not; its exit code."""
    process.terminate()
    try:
        return process.wait(STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def _command(host: str, port: int, workflows_dir: str | Path | None, trace_db: str | Path | None,
             api_key: str | None, dry_run: bool) -> list[str]:
    expect("host", host, str, "an address such as '127.0.0.1'")
    expect("port", port, int, "a port number")
    if not 0 < port < 65536:
        raise ValueError(f"port must be between 1 and 65535, got {port}")
    expect("dry_run", dry_run, bool, "True or False")
    command = [sys.executable, "-m", "app.cli", "serve", "--host", host, "--port", str(port)]
    for flag, value in (("--workflows", workflows_dir), ("--db", trace_db)):
        if value is not None:
            expect(flag.strip("-"), value, (str, Path), "a path or None")
            command += [flag, str(Path(value).expanduser())]
    if api_key is not None:
        expect("api_key", api_key, str, "a key (str) or None")
        command += ["--api-key", api_key]
    if dry_run:
        command.append("--dry-run")
    return command


def serve(host: str = "127.0.0.1", port: int = 8000, *, workflows_dir: str | Path | None = None,
          trace_db: str | Path | None = None, api_key: str | None = None, dry_run: bool = False) -> int:
    """Serve every workflow of the workflows folder as an OpenAI-compatible model on http://HOST:PORT/v1 and block
    until it stops (Ctrl+C, interrupting the notebook cell, or SIGTERM to this process stops it within 5 s). It is
    `metagen serve` in a child process, so a notebook's own event loop is left alone. Returns its exit code;
    RuntimeError when it could not start.

    Example:
        >>> metagen.serve("127.0.0.1", 8000)   # doctest: +SKIP
        >>> # then: openai.OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="-").chat.completions.create(
        >>> #           model="self_consistency", messages=[{"role": "user", "content": "What is 3 + 4?"}])
    """
    command = _command(host, port, workflows_dir, trace_db, api_key, dry_run)
    said: list[str] = []
    stopped_by: int | None = None
    with _stop_on_signals():
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        try:
            assert process.stderr is not None
            for line in process.stderr:  # its own lines (address, rules) where the caller reads them
                said = [*said[-19:], line]
                sys.stderr.write(line)
            code = process.wait()
        except KeyboardInterrupt as stop:
            code = _stop_child(process)
            log.info("metagen serve stopped")
            stopped_by = stop.signum if isinstance(stop, _Stopped) else signal.SIGINT
    if stopped_by is not None:
        if stopped_by != signal.SIGINT:
            _resend(stopped_by)
        return code
    if code not in (0, -2, 130):
        raise RuntimeError(f"metagen serve could not run (exit code {code}): {''.join(said[-3:]).strip()}")
    return code


def _resend(signum: int) -> None:
    """A SIGTERM / SIGHUP was meant for this process too: once the server is down, it gets it with the handler it
    had before serve() (by default, the process ends)."""
    with contextlib.suppress(OSError, ValueError):
        os.kill(os.getpid(), signum)
