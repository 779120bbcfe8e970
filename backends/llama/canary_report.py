"""Reads a canary child's exit: a signal, an error or garbage becomes one sentence that says what to do."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys

GARBAGE_EXIT = 3
CANARY_COMMAND_ENV = "METAGEN_CANARY_COMMAND"
"""A command line that replaces the canary child (tests give one that crashes, to check what a broken build says)."""


def canary_command() -> list[str]:
    """The canary child's argv: $METAGEN_CANARY_COMMAND when set, else this Python running backends.llama.canary."""
    given = os.environ.get(CANARY_COMMAND_ENV, "").strip()
    if given:
        return shlex.split(given)
    return [sys.executable, "-m", "backends.llama.canary", "--json"]


def signal_name(returncode: int) -> str:
    """'SIGSEGV' for -11 (or a shell's 139), else 'exit status N'."""
    number = -returncode if returncode < 0 else returncode - 128 if 128 < returncode < 160 else 0
    if number:
        try:
            return signal.Signals(number).name
        except ValueError:
            return f"signal {number}"
    return f"exit status {returncode}"


def describe_exit(returncode: int, stdout: str, stderr: str) -> tuple[bool, str]:
    """(ok, sentence) from a canary child's exit code and output."""
    report: dict = {}
    for line in reversed(stdout.strip().splitlines()):
        try:
            report = json.loads(line)
            break
        except ValueError:
            continue
    if returncode == 0 and report.get("ok"):
        return True, (f"decoded {report.get('tokens')} tokens at {report.get('tokens_per_s')} tokens/s: "
                      f"{report.get('text', '').strip()!r}")
    if returncode == GARBAGE_EXIT and report:
        return False, (f"the engine ran but decoded garbage: {report.get('text', '')!r} (expected "
                       f"{report.get('expected')!r}); the build computes wrong results on this CPU")
    if returncode < 0 or 128 < returncode < 160:
        how = signal_name(returncode)
        return False, (f"the llama.cpp engine crashed ({how}) while decoding; this build does not run on this CPU "
                       "(llama.cpp's AMX kernels are a known cause: build without them, the default unless "
                       "METAGEN_AMX=1)")
    tail = (stderr.strip().splitlines() or ["no output"])[-1][:300]
    return False, f"the canary failed ({signal_name(returncode)}): {tail}"
