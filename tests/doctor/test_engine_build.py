"""The engine build: no AMX instructions in libggml-cpu unless asked for, and what a broken build says (setup and
doctor) when its canary decode crashes."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import main as metagen
from app.service import doctor_checks as checks
from backends.llama.build_facts import read_build_record

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "scripts" / "build_engine.py"
AMX_MNEMONICS = ("tdpbssd", "tdpbsud", "tdpbusd", "tdpbuud", "tdpbf16ps", "tileloadd", "tileloaddt1", "tilestored",
                 "ldtilecfg", "sttilecfg", "tilezero", "tilerelease")
"""The AMX instructions (Intel SDM): llama.cpp's AMX matrix multiply uses tdpbssd, tileloadd and ldtilecfg."""
SEGFAULT_CANARY = f"{sys.executable} -c \"import os, signal; os.kill(os.getpid(), signal.SIGSEGV)\""


def amx_instructions(disassembly: str) -> set[str]:
    """The AMX mnemonics in objdump -d output."""
    found = set()
    for line in disassembly.splitlines():
        parts = line.split("\t")  # "  address:\t[raw bytes\t]mnemonic operands"
        if len(parts) >= 2 and parts[0].strip().endswith(":") and parts[-1].split():
            mnemonic = parts[-1].split()[0]
            if mnemonic in AMX_MNEMONICS:
                found.add(mnemonic)
    return found


def disassemble(path: Path) -> str:
    done = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(path)], capture_output=True, text=True,
                          check=True)
    return done.stdout


def ggml_cpu_libraries() -> list[Path]:
    """libggml-cpu* of the installed llama_cpp package (found without importing it)."""
    spec = importlib.util.find_spec("llama_cpp")
    assert spec is not None and spec.origin, "llama_cpp is not installed"
    lib = Path(spec.origin).parent / "lib"
    return sorted(p for p in lib.glob("libggml-cpu*") if p.suffix in (".so", ".dylib") or ".so." in p.name)


def test_the_detector_finds_amx_instructions(tmp_path: Path) -> None:
    """So the library test below can fail: AMX code assembled here is found by the same objdump scan."""
    source = tmp_path / "amx.s"
    source.write_text(".text\n.globl f\nf:\n  ldtilecfg (%rdi)\n  tileloadd (%rsi,%rdx,1), %tmm1\n"
                      "  tdpbssd %tmm3, %tmm2, %tmm1\n  tilerelease\n  ret\n")
    subprocess.run(["as", "-o", str(tmp_path / "amx.o"), str(source)], check=True)
    assert {"tdpbssd", "tileloadd", "ldtilecfg"} <= amx_instructions(disassemble(tmp_path / "amx.o"))


def test_libggml_cpu_holds_no_amx_instructions_unless_asked_for() -> None:
    libraries = ggml_cpu_libraries()
    assert libraries, "no libggml-cpu in llama_cpp's lib folder"
    found = {lib.name: amx_instructions(disassemble(lib)) for lib in libraries}
    record = read_build_record()
    if os.environ.get(checks.AMX_OPT_IN_ENV) == "1":  # asked for: then the build must have been made with them
        assert record.get("amx") is True, f"METAGEN_AMX=1 but the installed build was made without: {record}"
        return
    assert not any(found.values()), f"AMX instructions in the engine build (they segfault on Sapphire Rapids+): {found}"
    if record:
        assert record.get("amx") is False and "-mno-amx-int8" in record.get("cflags", ""), record


def test_a_canary_that_crashes_fails_the_setup_with_a_message(tmp_path: Path) -> None:
    env = {**os.environ, "METAGEN_CANARY_COMMAND": SEGFAULT_CANARY}
    done = subprocess.run([sys.executable, str(BUILD_SCRIPT), "--canary-only"], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300, check=False)
    assert done.returncode != 0
    assert "canary FAILED" in done.stdout
    assert "crashed (SIGSEGV)" in done.stdout
    assert re.search(r"fix: .*make setup", done.stdout), done.stdout


def test_a_crashing_native_build_is_rebuilt_portable_once(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The build script's whole path with installing stubbed: native canary crashes -> one portable rebuild ->
    its canary crashes too -> a failed setup that says so."""
    spec = importlib.util.spec_from_file_location("build_engine_under_test", BUILD_SCRIPT)
    assert spec is not None and spec.loader is not None
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    installs: list[dict] = []
    monkeypatch.setattr(build, "install", lambda version, config, venv, force: installs.append(config))
    monkeypatch.setattr(build, "native_failed", lambda venv: "")
    monkeypatch.setattr(build, "remember_native_failed", lambda venv, key: None)
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    monkeypatch.setenv("METAGEN_CANARY_COMMAND", SEGFAULT_CANARY)
    assert build.main([]) == 1
    out = capsys.readouterr().out
    assert [c["portable"] for c in installs] == [False, True]
    assert "rebuilding once with a portable set" in out
    assert "canary FAILED again with the portable build" in out and "SIGSEGV" in out


def test_doctor_names_the_crash_and_its_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("METAGEN_CANARY_COMMAND", SEGFAULT_CANARY)
    code = metagen(["doctor", "--json", "--models", str(tmp_path / "models"), "--db", str(tmp_path / "t.db")])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["ok"] is False
    canary = next(c for c in report["checks"] if c["name"] == "canary decode")
    assert canary["status"] == "problem"
    assert "crashed (SIGSEGV)" in canary["detail"]
    assert "make setup" in canary["fix"]
    assert "canary decode" in report["summary"]
