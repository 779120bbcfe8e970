"""HumanEval's own docstring examples as public tests: the forms they take, the count over the real 164 problems,
the canonical solutions passing them, and the humaneval presets' `public_tests` column made from them."""

from __future__ import annotations

import subprocess
import sys

from app.eval.docstring_tests import docstring_asserts
from app.eval.tasks import PUBLIC_TESTS_COLUMN, load_task, task_row
from tests.eval.humaneval_data import problems

PROBLEMS = problems()


def test_each_example_form_becomes_an_assert() -> None:
    doc = '''def f(x, y=0):
    """
    >>> f(2)
    4
    >>> f(1.5)
    2.25
    >>> f(
    ...  3)
    9

    f(0) ==> 0
    f(5) ➞ 25
    f(-1) => true
    f(a) => 1
    f(2) should return 4.

    >>> f(3)  # the square
    9
    >>> f("x")
    Traceback (most recent call last):
    TypeError
    >>> g(2)
    5
    >>> f(4)
    16"""
'''
    assert docstring_asserts(doc, "f") == [
        "assert (f(2)) == (4)", "assert abs((f(1.5)) - (2.25)) < 1e-6", "assert (f(\n 3)) == (9)",
        "assert (f(3)) == (9)", "assert (f(4)) == (16)", "assert (f(0)) == (0)", "assert (f(5)) == (25)",
        "assert (f(-1)) == (True)"]  # f(a) => 1 is prose (a name, not a value); f(2) should return 4 a repeat


def test_most_humaneval_problems_get_public_tests_their_canonical_solution_passes() -> None:
    with_tests = 0
    failing: list[str] = []
    for problem in PROBLEMS:
        asserts = docstring_asserts(problem["prompt"], problem["entry_point"])
        with_tests += bool(asserts)
        if not asserts:
            continue
        program = problem["prompt"] + problem["canonical_solution"] + "\n" + "\n".join(
            f"try:\n    {a}\nexcept AssertionError:\n    print('FAILED', {a!r})" for a in asserts)
        out = subprocess.run([sys.executable, "-I", "-c", program], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, (problem["task_id"], out.stderr[-500:])
        if "FAILED" in out.stdout:
            failing.append(problem["task_id"])
    assert with_tests == 128
    assert failing == ["HumanEval/47", "HumanEval/148"]  # their docstrings' examples are wrong in HumanEval itself


def test_the_presets_public_tests_come_from_the_docstring_and_never_from_check() -> None:
    problem = next(p for p in PROBLEMS if p["task_id"] == "HumanEval/0")
    for name in ("humaneval", "humaneval_base"):
        row = task_row(load_task(name), problem, 0)
        public = row[PUBLIC_TESTS_COLUMN]
        assert "has_close_elements([1.0, 2.0, 3.0], 0.5)" in public and "check(" not in public
        assert all(line.startswith("assert") for line in public.splitlines())
    base = task_row(load_task("humaneval_base"), problem, 0)
    assert base["question"] == problem["prompt"]  # raw: the model continues the signature and docstring
