"""The engine build's facts, written once: this CPU's flags, the build record, the GPU probe, the canary child and
how a process's end is named. Standard library only: scripts/build_engine.py loads it by path before the app is
installed, and `metagen doctor` and the engine worker import it."""

from __future__ import annotations

import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

BUILD_RECORD = ".llama-build.json"
"""What scripts/build_engine.py writes into the environment about the installed engine build (its key, flags)."""
GPU_PROBE_TIMEOUT_S = 30.0
"""How long nvidia-smi may take to answer (a wedged driver must not hold the build or the doctor)."""
CANARY_TIMEOUT_S = 300.0
GARBAGE_EXIT = 3
"""The canary's exit status when the engine ran but decoded garbage."""
CANARY_COMMAND_ENV = "METAGEN_CANARY_COMMAND"
"""A command line that replaces the canary child (tests give one that crashes, to check what a broken build says)."""
REPO = Path(__file__).resolve().parents[2]


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo's `flags` (x86) or `Features` (ARM) line; empty where there is
    none (macOS, Windows)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return set()
    for line in cpuinfo.splitlines():
        if line.startswith(("flags", "Features")) and ":" in line:
            return set(line.split(":", 1)[1].split())
    return set()


def cpu_signature(cpuinfo: str | None = None) -> str:
    """This CPU's flags as one sorted string (a build key's part: a wheel built natively elsewhere is never taken
    for this CPU's), else the processor's name where there are no flags."""
    return " ".join(sorted(cpu_flags(cpuinfo))) or platform.processor() or platform.machine()


def read_build_record(prefix: str | Path | None = None) -> dict[str, Any]:
    """The record scripts/build_engine.py wrote for the installed build ({} for a build from elsewhere or a
    record that cannot be read)."""
    try:
        record = json.loads((Path(prefix or sys.prefix) / BUILD_RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def write_build_record(record: dict[str, Any], prefix: str | Path | None = None) -> None:
    (Path(prefix or sys.prefix) / BUILD_RECORD).write_text(json.dumps(record, indent=1) + "\n")


def gpu_driver(timeout_s: float = GPU_PROBE_TIMEOUT_S) -> str:
    """The first GPU nvidia-smi lists ('' when there is no NVIDIA driver, it sees none, or it does not answer in
    `timeout_s`)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return ""
    try:
        seen = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return seen.stdout.strip().splitlines()[0] if seen.returncode == 0 and seen.stdout.strip() else ""


def signal_name(returncode: int) -> str:
    """How a process ended: 'SIGSEGV' for -11 (or a shell's 139), 'signal N' for an unknown one, else
    'exit status N'."""
    number = -returncode if returncode < 0 else returncode - 128 if 128 < returncode < 160 else 0
    if number:
        try:
            return signal.Signals(number).name
        except ValueError:
            return f"signal {number}"
    return f"exit status {returncode}"


def canary_command() -> list[str]:
    """The canary child's argv: $METAGEN_CANARY_COMMAND when set, else this Python running backends.llama.canary."""
    given = os.environ.get(CANARY_COMMAND_ENV, "").strip()
    if given:
        return shlex.split(given)
    return [sys.executable, "-m", "backends.llama.canary", "--json"]


def describe_exit(returncode: int, stdout: str, stderr: str) -> tuple[bool, str]:
    """(ok, sentence) from a canary child's exit code and output."""
    report: dict[str, Any] = {}
    for line in reversed(stdout.strip().splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        report = found if isinstance(found, dict) else {}
        break
    if returncode == 0 and report.get("ok"):
        return True, (f"decoded {report.get('tokens')} tokens at {report.get('tokens_per_s')} tokens/s: "
                      f"{str(report.get('text', '')).strip()!r}")
    if returncode == GARBAGE_EXIT and report:
        return False, (f"the engine ran but decoded garbage: {report.get('text', '')!r} (expected "
                       f"{report.get('expected')!r}); the build computes wrong results on this CPU")
    if returncode < 0 or 128 < returncode < 160:
        return False, (f"the llama.cpp engine crashed ({signal_name(returncode)}) while decoding; this build does "
                       "not run on this CPU (llama.cpp's AMX kernels are a known cause: build without them, the "
                       "default unless METAGEN_AMX=1)")
    tail = (stderr.strip().splitlines() or ["no output"])[-1][:300]
    return False, f"the canary failed ({signal_name(returncode)}): {tail}"


class CanaryOutcome(NamedTuple):
    """What a canary child did: `failure` is '' (ok), 'timeout', 'start' (it could not start) or 'exit'."""

    ok: bool
    sentence: str
    failure: str


def run_canary(command: list[str] | None = None, timeout_s: float = CANARY_TIMEOUT_S) -> CanaryOutcome:
    """Decode a few tokens of the bundled model in a child process (backends/llama/canary.py, this repository
    first on its path), within `timeout_s`."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    try:
        done = subprocess.run(command or canary_command(), capture_output=True, text=True, env=env,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return CanaryOutcome(False, f"the canary decode did not finish in {timeout_s:g} s", "timeout")
    except OSError as exc:
        return CanaryOutcome(False, f"cannot start the canary: {exc}", "start")
    ok, sentence = describe_exit(done.returncode, done.stdout, done.stderr)
    return CanaryOutcome(ok, sentence, "" if ok else "exit")
