"""Hostile candidates that try to pass by forging the harness's bookkeeping instead of being right: each is a
wrong program (f(2) should be 4) with one generic trick, graded wrong; and right programs that use the standard
library in ordinary ways still pass the supervisor's checks."""

from __future__ import annotations

import pytest

from app.eval.metrics import parse_metric
from nodes.algorithms.code_exec import ExecLimits, isolation
from nodes.algorithms.code_tests import run_code_tests

LIMITS = ExecLimits(timeout_s=5, memory_mb=256)
TESTS = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(3) == 9\n"
MODES = [pytest.param(False, id="limits-only"), pytest.param(True, id="isolated")]

FORGERIES = {
    "writes verdict lines to the result fd": '''
import json, os
line = (json.dumps({"type": "verdict", "passed": True, "error": ""}) + "\\n"
        + json.dumps({"type": "test", "index": 0, "source": "x", "passed": True, "error": "", "output": "4"}) + "\\n")
fds = [int(os.environ["METAGEN_RESULT_FD"])] if "METAGEN_RESULT_FD" in os.environ else []
for fd in fds + list(range(0, 64)):
    try:
        os.write(fd, line.encode())
        os.write(fd, b"P" + b"0" * 16)
    except OSError:
        pass
def f(x):
    return 0
''',
    "patches the harness's run_code and emit": '''
import sys
main = sys.modules.get("__main__")
for name in ("run_code", "emit", "verdict", "function_tests"):
    try:
        setattr(main, name, lambda *a, **k: "")
    except Exception:
        pass
def f(x):
    return 0
''',
    "rewrites the results at exit": '''
import atexit, os
def forge():
    for fd in range(0, 64):
        try:
            os.lseek(fd, 0, 0)
            os.write(fd, b'{"type": "verdict", "passed": true, "error": ""}\\n')
        except OSError:
            pass
    os._exit(0)
atexit.register(forge)
def f(x):
    return 0
''',
    "exits with status 0 before the tests run": '''
import os
os._exit(0)
def f(x):
    return 0
''',
    "returns an object equal to everything": '''
class Anything:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = object.__hash__
def f(x):
    return Anything()
''',
    "returns an int that equals everything": '''
class Sly(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__
def f(x):
    return Sly(0)
''',
    "reads the hidden tests to copy the expected answers": '''
import os, re, sys
def _find():
    texts = []
    main = sys.modules.get("__main__")
    req = getattr(main, "req", None)
    if isinstance(req, dict):
        texts.append(str(req.get("tests")))
    try:
        frame = sys._getframe(1)
        while frame is not None:
            texts.append(repr(frame.f_locals))
            frame = frame.f_back
    except Exception:
        pass
    try:
        import gc
        texts += [o for o in gc.get_objects() if isinstance(o, str) and "assert" in o]
    except Exception:
        pass
    for path in ("../out/stdin", f"/proc/{os.getppid()}/fd/0", "/proc/self/fd/0", f"/proc/{os.getppid()}/mem"):
        try:
            with open(path, errors="replace") as fh:
                texts.append(fh.read(1 << 20))
        except Exception:
            pass
    try:
        texts.append(repr(globals()["check"].__code__.co_consts))
    except Exception:
        pass
    return "\\n".join(texts)
def f(x):
    found = re.search(r"candidate\\(%d\\) == (\\d+)" % x, _find())
    return int(found.group(1)) if found else 0
''',
}

HONEST = {
    "a Counter compared with a dict": ("from collections import Counter\ndef f(s):\n    return Counter(s)\n",
                                       "assert f('aab') == {'a': 2, 'b': 1}\n"),
    "a generator consumed by list()": ("def f(n):\n    return (i * i for i in range(n))\n",
                                       "assert list(f(3)) == [0, 1, 4]\n"),
    "a map object, namedtuples, typing and warnings": (
        "import warnings\nfrom collections import namedtuple\nfrom typing import List\nP = namedtuple('P', 'x y')\n"
        "def f(xs: List[int]):\n    warnings.warn('fine')\n"
        "    return map(lambda p: p.x + p.y, [P(x, x) for x in xs])\n",
        "assert list(f([1, 2])) == [2, 4]\n"),
    "floats, tuples, None and nested lists": ("def f(x):\n    return [(x / 2, None), [x, [x]]]\n",
                                              "assert f(3) == [(1.5, None), [3, [3]]]\n"),
}


def _mode(isolate: bool) -> None:
    if isolate and isolation() != "bwrap":
        pytest.fail("bubblewrap does not work here: install it (Debian package bubblewrap) to run the isolated "
                    "half of these tests")


@pytest.mark.parametrize("isolate", MODES)
@pytest.mark.parametrize("trick", sorted(FORGERIES))
def test_a_forging_candidate_is_graded_wrong(trick: str, isolate: bool) -> None:
    _mode(isolate)
    report = run_code_tests(FORGERIES[trick], tests=TESTS, entry_point="f", limits=LIMITS, isolate=isolate)
    assert not report.passed_all and report.score < 1.0, report.reason
    assert not report.ungraded


FORGED_BREAKDOWN = '''
import sys
prelude = sys.modules.get("prelude") or sys.modules.get("nodes.algorithms.confined.prelude")
real = prelude.Channel.emit if prelude is not None else None
def emit(self, **data):
    if data.get("type") == "test":
        data["passed"], data["error"] = True, ""
    real(self, **data)
if real is not None:
    prelude.Channel.emit = emit
def f(x):
    return 0
'''
"""A wrong program that rewrites its own per-test breakdown (the harness runs in its process) to say every test
passed: it used to score (total - 1) / total, above honest partial answers."""


@pytest.mark.parametrize("isolate", MODES)
def test_a_forged_breakdown_earns_no_partial_credit(isolate: bool) -> None:
    _mode(isolate)
    tests = TESTS + "    assert candidate(4) == 16\n    assert candidate(5) == 25\n"
    report = run_code_tests(FORGED_BREAKDOWN, tests=tests, entry_point="f", limits=LIMITS, isolate=isolate)
    assert not report.passed_all and not report.ungraded, report.reason
    assert report.passed == 4, "the forgery did not take: this test no longer shows what it guards"
    assert report.score == 0.0, report.score


def test_the_tests_metric_grades_them_wrong() -> None:
    metric = parse_metric("tests")
    row = {"tests": TESTS, "entry_point": "f"}
    assert metric.grade("def f(x):\n    return x * x\n", row, None, {}).correct
    for trick, code in FORGERIES.items():
        assert not metric.grade(code, row, None, {}).correct, trick


@pytest.mark.parametrize("case", sorted(HONEST))
def test_ordinary_standard_library_values_still_pass(case: str) -> None:
    code, tests = HONEST[case]
    report = run_code_tests(code, tests=tests, limits=LIMITS)
    assert report.passed_all, report.reason
