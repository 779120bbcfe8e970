"""The python verifier's sandbox: every way user code can fail gives a clean failed score with a reason."""

from __future__ import annotations

import pytest

from nodes.algorithms.sandbox import run_python_verifier


def test_expression_function_and_score_forms() -> None:
    assert run_python_verifier("answer == '42'", "x", answer="42").score == 1.0
    assert run_python_verifier("len(candidate)", "abcd").score == 4.0
    res = run_python_verifier("def verify(candidate, inputs):\n    return 0.25, 'partly'", "x")
    assert (res.score, res.reason, res.ok, res.passed) == (0.25, "partly", True, False)
    res = run_python_verifier("score = {'score': 1, 'reason': 'fine'}['score']", "x")
    assert res.score == 1.0 and res.passed
    res = run_python_verifier("inputs['a'] + inputs['b'] == int(answer)", "", answer="7", inputs={"a": 3, "b": 4})
    assert res.passed


def test_user_prints_do_not_break_the_protocol() -> None:
    res = run_python_verifier("def verify(candidate, inputs):\n    print('debug', candidate)\n    return True", "c")
    assert res.passed and "debug c" in res.stdout


@pytest.mark.parametrize(("code", "expected"), [
    ("1/0", "ZeroDivisionError"),
    ("def verify(candidate, inputs):\n    raise ValueError('bad candidate')", "ValueError: bad candidate (line 2)"),
    ("def broken(:", "SyntaxError"),
    ("'a string'", "returned str"),
    ("nothing = 1", "must be an expression"),
])
def test_exceptions_give_a_failed_score_with_the_reason(code: str, expected: str) -> None:
    res = run_python_verifier(code, "x")
    assert (res.score, res.passed, res.ok) == (0.0, False, False)
    assert expected in res.reason


def test_timeout() -> None:
    res = run_python_verifier("while True:\n    pass", "x", timeout_s=1.0)
    assert (res.score, res.passed, res.ok) == (0.0, False, False)
    assert "timed out" in res.reason


def test_sleeping_code_hits_the_wall_clock_limit() -> None:
    res = run_python_verifier("import time\ntime.sleep(30)", "x", timeout_s=0.5)
    assert not res.ok and "timed out" in res.reason


@pytest.mark.parametrize("code", [
    "import socket\nsocket.socket()",
    "import urllib.request\nurllib.request.urlopen('http://example.com')",
    "import _socket\n_socket.socket()",
])
def test_network_is_blocked(code: str) -> None:
    res = run_python_verifier(code, "x")
    assert not res.ok and res.score == 0.0
    assert "blocked" in res.reason


def test_processes_are_blocked() -> None:
    res = run_python_verifier("import subprocess\nsubprocess.run(['true'])", "x")
    assert not res.ok and "starting processes is blocked" in res.reason
    res = run_python_verifier("import os\nos.system('true')", "x")
    assert not res.ok and "blocked" in res.reason


def test_memory_hog() -> None:
    res = run_python_verifier("x = bytearray(2 * 1024 ** 3)\nscore = 1", "x", memory_mb=128)
    assert (res.score, res.ok) == (0.0, False)
    assert "memory limit" in res.reason


def test_nan_is_refused() -> None:
    res = run_python_verifier("float('nan')", "x")
    assert not res.ok and "NaN" in res.reason


def test_writing_outside_its_folder_is_refused(tmp_path) -> None:
    target = tmp_path / "x_outside"
    result = run_python_verifier(f"open({str(target)!r}, 'w').write('pwned') or True", "c")
    assert not result.ok and "blocked" in result.reason and "x_outside" in result.reason
    assert not target.exists()


@pytest.mark.parametrize("code", [
    "open('/etc/passwd').read() != ''",
    "import os; os.open('/etc/passwd', os.O_RDONLY); score = 1",
])
def test_reading_outside_its_folder_is_refused(code: str) -> None:
    result = run_python_verifier(code, "c")
    assert not result.ok and "blocked" in result.reason and "/etc/passwd" in result.reason


def test_removing_and_renaming_outside_is_refused(tmp_path) -> None:
    victim = tmp_path / "keep.txt"
    victim.write_text("precious")
    for code in (f"import os; os.remove({str(victim)!r}); score = 1",
                 f"import os; os.rename({str(victim)!r}, 'mine.txt'); score = 1",
                 f"import shutil; shutil.rmtree({str(tmp_path)!r}); score = 1"):
        result = run_python_verifier(code, "c")
        assert not result.ok and "blocked" in result.reason, code
    assert victim.read_text() == "precious"


def test_own_folder_and_stdlib_imports_still_work() -> None:
    code = ("import json, re, math, collections, fractions\n"
            "open('scratch.txt', 'w').write('ok')\n"
            "score = open('scratch.txt').read() == 'ok'")
    result = run_python_verifier(code, "c")
    assert result.ok and result.score == 1.0, result.reason
