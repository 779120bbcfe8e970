"""Servers stop within seconds of SIGTERM / SIGINT whatever they are doing: the orderly shutdown starts, and a
timer ends the process after a grace period when something (a run stuck on a lock, a native call) holds it up."""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import sys
import threading
from typing import Any

from app.platform.scratch import handler_before

log = logging.getLogger(__name__)

FORCED_EXIT_AFTER_S = 4.0
"""Seconds the orderly shutdown gets after a stopping signal before the process ends anyway (callers promise 5)."""
STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")
BACKSTOP_S = 0.5
"""The C-level watchdog (faulthandler) fires this long after the timer, in case no Python thread can run."""

_armed = threading.Event()
_arm_lock = threading.Lock()
_previous: dict[int, Any] = {}
_received = 0
"""Stopping signals this process's handler got (the second ends the process at once)."""


def _name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def force_exit(signum: int, why: str) -> None:
    """End the process now (no cleanup can hold it up), with the shell's status for the signal; its engine workers
    end with it (a stopped one would not see its socket close)."""
    try:
        sys.stderr.write(f"metagen: {why} after {_name(signum)}; exiting now\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed: exit all the same
        pass
    try:
        from backends.llama.worker_process import kill_all_workers

        kill_all_workers()
    except Exception as exc:  # nothing may keep this process alive
        log.debug("ending the engine workers: %s", exc)
    os._exit(128 + signum)


def arm_forced_exit(signum: int, grace_s: float | None = None) -> None:
    """Start the timer that ends the process `grace_s` (default FORCED_EXIT_AFTER_S) after the first stopping
    signal unless it has exited by then; later calls change nothing (a server that replays the signal it caught,
    as uvicorn does, is not a second signal)."""
    grace_s = FORCED_EXIT_AFTER_S if grace_s is None else grace_s
    with _arm_lock:
        if _armed.is_set():
            return
        _armed.set()
    timer = threading.Timer(grace_s, force_exit, args=(signum, f"the orderly shutdown took over {grace_s:g} s"))
    timer.daemon = True
    timer.name = "metagen-forced-exit"
    timer.start()
    try:  # where no Python thread gets to run (a native call holding the GIL), faulthandler's C thread still does
        faulthandler.dump_traceback_later(grace_s + BACKSTOP_S, exit=True)
    except (RuntimeError, ValueError, OSError) as exc:  # stderr unusable
        log.debug("no faulthandler backstop: %s", exc)
    log.info("stopping on %s (forced after %g s)", _name(signum), grace_s)


def _on_signal(signum: int, frame: Any) -> None:
    global _received
    with _arm_lock:
        _received += 1
        second = _received > 1
    if second:
        force_exit(signum, "a second stop signal")  # Ctrl+C twice: at once
    arm_forced_exit(signum)
    previous = _previous.get(signum)
    if callable(previous):
        previous(signum, frame)  # the scratch cleanup, Python's KeyboardInterrupt: the orderly shutdown
    elif previous != signal.SIG_IGN:
        raise SystemExit(128 + signum)  # the default action would skip the app's `finally` blocks


def install_forced_exit() -> None:
    """On SIGTERM, SIGINT and SIGHUP: arm the forced exit, then do what the signal did before (install this after
    the other handlers, e.g. scratch.install_signal_cleanup, so it runs first); a signal the process started with
    ignored stays ignored. Main thread only; idempotent."""
    if threading.current_thread() is not threading.main_thread():
        return
    for name in STOP_SIGNALS:
        signum = getattr(signal, name, None)
        if signum is None or signum in _previous:
            continue
        if handler_before(signum) == signal.SIG_IGN:
            continue  # started with it ignored (a background job, nohup): it stays without effect
        try:
            _previous[signum] = signal.getsignal(signum)
            signal.signal(signum, _on_signal)
        except (OSError, ValueError) as exc:
            _previous.pop(signum, None)
            log.debug("no forced-exit handler for %s: %s", name, exc)
