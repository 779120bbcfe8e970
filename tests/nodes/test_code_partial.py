"""`partial: observed` (issue 48 §4.1): a failing program scored by its assert tests run one confined program each,
so best-of-N by public tests ranks candidates by the count passed (AlphaCode, CodeT) with counts the supervisor saw,
not the candidate's own breakdown; on HumanEval's real check() functions, and against a candidate forging passes."""

from __future__ import annotations

import ast

import pytest

from nodes.algorithms.code_exec import ExecLimits
from nodes.algorithms.code_tests import count_tests, run_code_tests, split_tests
from tests.eval.humaneval_data import problems

LIMITS = ExecLimits(timeout_s=5, memory_mb=256)
TESTS = ("def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(3) == 9\n"
         "    assert candidate(0) == 0\n")
SQUARES_BUT_THREE = "```python\ndef f(x):\n    return 10 if x == 3 else x * x\n```"
"""Right on two of the three tests."""


def test_each_humaneval_check_splits_into_one_program_per_assert() -> None:
    """On all 164 problems: as many programs as asserts in check() (what `count_tests` counts, less the non-assert
    statements), each valid Python holding exactly one assert of the check and every statement before it."""
    for problem in problems():
        programs = split_tests(problem["test"], problem["entry_point"])
        check = next(s for s in ast.parse(problem["test"]).body if isinstance(s, ast.FunctionDef) and s.name == "check")
        asserts = [s for s in check.body if isinstance(s, ast.Assert)]
        assert len(programs) == len(asserts) <= count_tests(problem["test"], problem["entry_point"])
        for k, program in enumerate(programs):
            inner = next(s for s in ast.parse(program).body if isinstance(s, ast.FunctionDef) and s.name == "check")
            assert [ast.dump(s) for s in inner.body if isinstance(s, ast.Assert)] == [ast.dump(asserts[k])]


def test_top_level_asserts_split_with_their_prelude() -> None:
    tests = "import math\nassert f(2) == 4\nHELP = 3\nassert f(HELP) == 9\n"
    assert split_tests(tests, "") == ["import math\nHELP = 3\nassert f(2) == 4",
                                      "import math\nHELP = 3\nassert f(HELP) == 9"]
    assert split_tests("def broken(:", "") == []


def test_a_program_failing_one_of_three_scores_two_thirds_observed_and_zero_without() -> None:
    plain = run_code_tests(SQUARES_BUT_THREE, tests=TESTS, entry_point="f", limits=LIMITS)
    observed = run_code_tests(SQUARES_BUT_THREE, tests=TESTS, entry_point="f", limits=LIMITS, partial="observed")
    assert not plain.passed_all and plain.score == 0.0
    assert not observed.passed_all and observed.score == pytest.approx(2 / 3)
    assert "observed one by one: 2/3 passed" in observed.reason
    right = run_code_tests("def f(x):\n    return x * x\n", tests=TESTS, entry_point="f", limits=LIMITS,
                           partial="observed")
    assert right.passed_all and right.score == 1.0


def test_a_forged_breakdown_earns_no_observed_credit() -> None:
    """A wrong program that passes the first assert and writes fake passes for every test earns at most 1/3, the one
    pass the supervisor could see, never the 3/3 its breakdown claims (measured: 0, its writes spoil that run too)."""
    fake = "".join(f'{{"type": "test", "index": {i}, "source": "x", "passed": true, "error": ""}}\\n' for i in range(3))
    forger = f'''
import os
for fd in range(0, 64):
    try:
        os.write(fd, {fake!r}.encode())
    except OSError:
        pass
def f(x):
    return 4
'''
    report = run_code_tests(forger, tests=TESTS, entry_point="f", limits=LIMITS, partial="observed")
    assert not report.passed_all and report.score <= 1 / 3


def test_a_humaneval_wrong_variant_gets_the_credit_of_the_asserts_it_passes() -> None:
    """HumanEval/0 (has_close_elements) with its threshold test flipped: the canonical solution wins every assert but
    the one whose expected value is inverted."""
    problem = problems()[0]
    check = problem["test"].replace("assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True",
                                    "assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == False")
    assert check != problem["test"]
    total = len(split_tests(check, problem["entry_point"]))
    report = run_code_tests(problem["prompt"] + problem["canonical_solution"], tests=check,
                            entry_point=problem["entry_point"], limits=LIMITS, partial="observed")
    assert not report.passed_all and report.score == pytest.approx((total - 1) / total)
