"""The `tests` metric on the bundled code dataset: reference solutions pass every item, wrong ones do not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.eval.metrics import grade_samples, parse_metric

ROWS = [json.loads(line) for line in (Path(__file__).parents[2] / "datasets" / "code.jsonl").read_text().splitlines()]
SOLUTIONS = {
    "add_numbers": "def add_numbers(a, b): return a + b", "is_even": "def is_even(n): return n % 2 == 0",
    "reverse_string": "def reverse_string(s): return s[::-1]", "max_of_list": "max_of_list = max",
    "count_vowels": "def count_vowels(s): return sum(c in 'aeiouAEIOU' for c in s)",
    "factorial": "import math\nfactorial = math.factorial",
    "fibonacci": "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n): a, b = b, a + b\n    return a",
    "is_palindrome": "def is_palindrome(s): return s.lower() == s.lower()[::-1]",
    "sum_of_digits": "def sum_of_digits(n): return sum(map(int, str(n)))",
    "celsius_to_fahrenheit": "def celsius_to_fahrenheit(c): return c * 9 / 5 + 32",
    "remove_duplicates": "def remove_duplicates(xs): return list(dict.fromkeys(xs))",
    "count_words": "def count_words(s): return len(s.split())",
    "square_list": "def square_list(xs): return [x * x for x in xs]",
    "is_prime": "def is_prime(n): return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))",
    "gcd": "from math import gcd",
    "capitalize_words": "def capitalize_words(s): return ' '.join(w[:1].upper() + w[1:] for w in s.split(' '))",
    "second_largest": "def second_largest(xs): return sorted(set(xs))[-2]",
    "flatten": "def flatten(xss): return [x for xs in xss for x in xs]",
    "char_frequency": "from collections import Counter\ndef char_frequency(s): return dict(Counter(s))",
    "running_sum": "import itertools\ndef running_sum(xs): return list(itertools.accumulate(xs))",
}


def test_the_dataset_has_twenty_problems_with_tests() -> None:
    assert len(ROWS) == 20 and {r["entry_point"] for r in ROWS} == set(SOLUTIONS)
    assert all(r["tests"].count("assert ") >= 3 for r in ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[r["entry_point"] for r in ROWS])
def test_reference_solutions_pass_and_stubs_fail(row: dict) -> None:
    metric = parse_metric("tests")
    assert metric.runs_code and not metric.needs_reference
    fenced = f"Sure:\n```python\n{SOLUTIONS[row['entry_point']]}\n```"
    stub = f"def {row['entry_point']}(*args):\n    return None\n"
    assert grade_samples(metric, [fenced, stub], row, None) == [True, False]
    grade = metric.grade(stub, row, None, {})
    assert grade.score < 1 and "first failure" in grade.detail


def test_an_item_without_tests_is_wrong_with_a_reason() -> None:
    grade = parse_metric("tests").grade("x = 1", {"question": "q"}, None, {})
    assert not grade.correct and "no tests" in grade.detail


def test_a_cancelled_evaluation_stops_the_program_being_graded() -> None:
    """The runner sets `grading_stop` to its cancel: a program looping under grading is killed when it turns
    True (its grade says stopped, not timed out after its 5 s) and a stop already set runs nothing."""
    import threading

    from app.eval.metrics import grading_stop

    row = next(r for r in ROWS if r["entry_point"] == "add_numbers")
    metric = parse_metric("tests")
    cancelled = threading.Event()
    threading.Timer(0.5, cancelled.set).start()
    token = grading_stop.set(cancelled.is_set)
    try:
        grade = metric.grade("def add_numbers(a, b):\n    while True: pass", row, None, {})
        assert grade.ungraded and "stopped" in grade.detail and "timed out" not in grade.detail
        again = metric.grade(SOLUTIONS["add_numbers"], row, None, {})
        assert again.ungraded and "not run" in again.detail
    finally:
        grading_stop.reset(token)
    assert metric.grade(SOLUTIONS["add_numbers"], row, None, {}).correct  # outside an evaluation: no stop
