"""The engine build's facts, parsed once (backends/llama/build_facts.py): CPU flags, the build record, how a
process ended, a canary's exit, the GPU probe's timeout; and the build script loads the module before the app is
installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backends.llama import build_facts as facts

REPO = Path(__file__).resolve().parents[2]
X86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu avx2 sse3 avx512f amx_int8\nbugs\t\t: spectre_v1\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes\nCPU implementer\t: 0x41\n"


def test_cpu_flags_from_x86_and_arm_cpuinfo() -> None:
    assert facts.cpu_flags(X86) == {"fpu", "avx2", "sse3", "avx512f", "amx_int8"}
    assert facts.cpu_flags(ARM) == {"fp", "asimd", "evtstrm", "aes"}
    assert facts.cpu_flags("processor\t: 0\nflagsomething\n") == set()
    assert facts.cpu_flags("") == set()


def test_the_cpu_signature_is_the_sorted_flags() -> None:
    assert facts.cpu_signature(X86) == "amx_int8 avx2 avx512f fpu sse3"
    assert facts.cpu_signature("") != ""  # the processor's name where there are no flags


def test_the_build_record_round_trips_and_a_bad_one_reads_empty(tmp_path: Path) -> None:
    assert facts.read_build_record(tmp_path) == {}
    record = {"key": "0123456789abcdef", "amx": False, "cflags": "-mno-amx-int8", "portable": False}
    facts.write_build_record(record, tmp_path)
    assert facts.read_build_record(tmp_path) == record
    assert json.loads((tmp_path / facts.BUILD_RECORD).read_text()) == record
    for broken in ("{not json", "[1, 2]"):
        (tmp_path / facts.BUILD_RECORD).write_text(broken)
        assert facts.read_build_record(tmp_path) == {}


@pytest.mark.parametrize(("code", "name"), [(-11, "SIGSEGV"), (-6, "SIGABRT"), (139, "SIGSEGV"), (134, "SIGABRT"),
                                            (-9, "SIGKILL"), (0, "exit status 0"), (3, "exit status 3"),
                                            (128, "exit status 128"), (-99, "signal 99")])
def test_signal_names(code: int, name: str) -> None:
    assert facts.signal_name(code) == name


def test_a_canarys_exit_in_one_sentence() -> None:
    good = json.dumps({"ok": True, "tokens": 8, "tokens_per_s": 50.0, "text": " Paris."})
    assert facts.describe_exit(0, good, "") == (True, "decoded 8 tokens at 50.0 tokens/s: 'Paris.'")
    garbage = json.dumps({"ok": False, "text": "zzz", "expected": "Paris"})
    ok, sentence = facts.describe_exit(facts.GARBAGE_EXIT, garbage, "")
    assert not ok and "decoded garbage" in sentence
    ok, sentence = facts.describe_exit(-11, "", "")
    assert not ok and "crashed (SIGSEGV)" in sentence
    ok, sentence = facts.describe_exit(1, "", "Traceback\nImportError: no llama_cpp\n")
    assert not ok and sentence == "the canary failed (exit status 1): ImportError: no llama_cpp"


def test_run_canary_reports_a_crash_a_timeout_and_a_missing_program() -> None:
    crash = facts.run_canary([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    assert (crash.ok, crash.failure) == (False, "exit") and "SIGSEGV" in crash.sentence
    slow = facts.run_canary([sys.executable, "-c", "import time; time.sleep(30)"], timeout_s=0.5)
    assert (slow.ok, slow.failure) == (False, "timeout")
    missing = facts.run_canary(["/nonexistent/canary"])
    assert (missing.ok, missing.failure) == (False, "start")


def test_the_gpu_probe_gives_up_on_a_driver_that_does_not_answer(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nsleep 30\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    started = time.monotonic()
    assert facts.gpu_driver(timeout_s=0.5) == ""
    assert time.monotonic() - started < 10
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: GPU-1)'\n")
    assert facts.gpu_driver() == "GPU 0: NVIDIA H100 (UUID: GPU-1)"


def test_the_build_script_loads_the_facts_with_the_standard_library_alone() -> None:
    """It runs before the app is installed: no site-packages, the repository not on sys.path."""
    done = subprocess.run([sys.executable, "-I", "-S", str(REPO / "scripts" / "build_engine.py"), "--help"],
                          capture_output=True, text=True, timeout=60, check=False, cwd="/")
    assert done.returncode == 0, done.stderr
    source = (REPO / "backends" / "llama" / "build_facts.py").read_text()
    imported = {line.split()[1].split(".")[0] for line in source.splitlines()
                if line.startswith(("import ", "from ")) and "__future__" not in line}
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
