"""The sandbox's programs as real modules: one prelude both import, settings as JSON (malformed ones refused), and
the supervisor's conversation with the harness bounded (a harness that never reads its stdin cannot hold it)."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nodes.algorithms import confined
from nodes.algorithms.confined import prelude, supervisor
from nodes.algorithms.confined.prelude import Settings, SettingsError

PACKAGE = Path(confined.__file__).resolve().parent
SHARED = {"emit", "short", "calls_check", "error_text", "exception_text"}


def _program_tree(name: str) -> ast.Module:
    return ast.parse((PACKAGE / name).read_text())


@pytest.mark.parametrize("name", ["supervisor.py", "harness.py"])
def test_both_programs_import_the_prelude_and_copy_none_of_it(name: str) -> None:
    tree = _program_tree(name)
    imported = {a.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                for a in node.names}
    assert "prelude" in imported
    defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    assert not defined & SHARED, f"{name} defines its own {sorted(defined & SHARED)}"
    uses = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id == "prelude"}
    assert uses & SHARED, f"{name} uses none of the prelude's helpers"


def test_the_programs_are_what_a_run_copies_and_ruff_checks_them() -> None:
    files = confined.program_files()
    assert set(files) == {p.name for p in PACKAGE.glob("*.py")} - {"__init__.py"}
    assert all(files[name] == (PACKAGE / name).read_text() for name in files)
    ruff = shutil.which("ruff", path=os.path.dirname(sys.executable)) or shutil.which("ruff")
    assert ruff, "ruff is a dev dependency: pip install -e '.[dev]'"
    done = subprocess.run([ruff, "check", str(PACKAGE)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_settings_round_trip_through_json() -> None:
    for settings in (Settings(), Settings(1_900_000_123, 512, 32, True), Settings(None, 128, 4, False)):
        text = settings.to_json()
        assert json.loads(text) == settings.as_dict()
        assert Settings.from_json(text) == settings


@pytest.mark.parametrize("text", [
    "1900000123:512:32:1",  # the old colon format
    "[1, 2]",
    '{"uid": null, "memory_mb": 512, "processes": 32}',
    '{"uid": null, "memory_mb": 512, "processes": 32, "isolated": true, "extra": 1}',
    '{"uid": "0", "memory_mb": 512, "processes": 32, "isolated": true}',
    '{"uid": 0, "memory_mb": 512, "processes": 32, "isolated": true}',
    '{"uid": null, "memory_mb": true, "processes": 32, "isolated": true}',
    '{"uid": null, "memory_mb": 512, "processes": -1, "isolated": true}',
    '{"uid": null, "memory_mb": 512, "processes": 32, "isolated": 1}',
    '{"uid": null, "memory_mb": 0, "processes": 32, "isolated": true}',
    "",
])
def test_malformed_settings_are_refused_with_a_reason(text: str) -> None:
    with pytest.raises(SettingsError, match=prelude.SETTINGS_ENV):
        Settings.from_json(text)


def _run_by_path(folder: Path, program: str, request: dict, env_extra: dict[str, str],
                 timeout: float = 60) -> tuple[subprocess.CompletedProcess[bytes], list[dict], float]:
    """Run a program by path as the sandbox does (python -I -S file.py), its results on a pipe."""
    r, w = os.pipe()
    env = {"PATH": "/usr/bin:/bin", prelude.RESULT_FD_ENV: str(w), **env_extra}
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-I", "-S", str(folder / program)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(w,), env=env, cwd=folder)
    os.close(w)
    try:
        out, err = proc.communicate(json.dumps(request).encode(), timeout=timeout)
    finally:
        proc.kill()
        proc.wait()
    with os.fdopen(r, "rb") as results:
        events = [json.loads(line) for line in results.read().splitlines() if line.strip()]
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), events, time.monotonic() - started


def _copy_programs(folder: Path) -> None:
    for name, text in confined.program_files().items():
        (folder / name).write_text(text)


REQUEST = {"code": "def f(x):\n    return x + 1\n", "tests": "assert f(1) == 2\nassert f(2) == 4\n",
           "entry_point": "f", "io_tests": [], "probes": ["5"], "timeout_s": 5}


def test_the_supervisor_runs_by_path_with_the_prelude_beside_it(tmp_path: Path) -> None:
    _copy_programs(tmp_path)
    done, events, _ = _run_by_path(tmp_path, "supervisor.py", REQUEST, {})
    assert done.returncode == 0, done.stderr
    types = [e["type"] for e in events]
    assert types[0] == "start" and types[-1] == "done"
    verdict = next(e for e in events if e["type"] == "verdict")
    assert verdict == {"type": "verdict", "passed": False, "error": "AssertionError"}
    assert [e["passed"] for e in events if e["type"] == "test"] == [True, False]
    assert next(e for e in events if e["type"] == "probe")["output"] == "6"


def test_a_program_with_malformed_settings_refuses_before_it_starts(tmp_path: Path) -> None:
    _copy_programs(tmp_path)
    done, events, _ = _run_by_path(tmp_path, "harness.py", REQUEST, {prelude.SETTINGS_ENV: "::32:0"})
    assert done.returncode == prelude.REFUSED_EXIT
    assert events == []  # no `start`: code_tests reports the run ungraded, the candidate is not blamed
    assert b"sandbox settings refused" in done.stderr and b"expected an object like" in done.stderr


SILENT_HARNESS = "import time\ntime.sleep(120)\n"
"""A harness that never reads its stdin, never writes a result and never ends."""


def test_a_harness_that_never_reads_its_stdin_cannot_hold_the_supervisor(tmp_path: Path) -> None:
    _copy_programs(tmp_path)
    (tmp_path / "harness.py").write_text(SILENT_HARNESS)
    request = {**REQUEST, "tests": "", "probes": ["1"], "timeout_s": 1,
               "code": "# filler\n" * 200_000}  # ~1.8 MB: far more than a pipe holds, so an unbounded write blocks
    done, events, seconds = _run_by_path(tmp_path, "supervisor.py", request, {}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert [e["type"] for e in events] == ["start", "breakdown_error", "done"]
    assert "did not finish within 1 s" in events[1]["error"]
    assert seconds < 30  # bounded by its timeout (1 s) plus start-up, not by the harness's 120 s


def test_converse_bounds_a_child_that_reads_nothing_and_one_that_never_ends() -> None:
    lines: list[bytes] = []
    for code in ("import time; time.sleep(60)", "import sys, time; sys.stdin.read(); time.sleep(60)"):
        r, w = os.pipe()
        proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, pass_fds=(w,))
        os.close(w)
        started = time.monotonic()
        try:
            finished = supervisor.converse(proc, b"x" * (4 << 20), r, time.monotonic() + 0.5, lines.append)
        finally:
            os.close(r)
            proc.kill()
            proc.wait()
        assert finished is False
        assert proc.returncode is not None
        assert time.monotonic() - started < 10
    assert lines == []


def test_converse_passes_every_line_and_waits_for_a_child_that_ends() -> None:
    r, w = os.pipe()
    code = (f"import os, sys; data = sys.stdin.buffer.read(); "
            f"os.write({w}, b'first\\n' + str(len(data)).encode() + b'\\nlast')")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, pass_fds=(w,))
    os.close(w)
    lines: list[bytes] = []
    try:
        finished = supervisor.converse(proc, b"y" * (1 << 20), r, time.monotonic() + 30, lines.append)
    finally:
        os.close(r)
    assert finished is True and proc.returncode == 0
    assert lines == [b"first", str(1 << 20).encode(), b"last"]
