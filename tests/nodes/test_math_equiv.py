"""Math equivalence through the math-verify worker: LaTeX against plain text, classes, and the time limit."""

from __future__ import annotations

import pytest

from nodes.algorithms.math_equiv import MathChecker

pytest.importorskip("math_verify")


@pytest.fixture(scope="module")
def checker() -> MathChecker:
    c = MathChecker(timeout_s=5.0, workers=1)
    yield c
    c.close()


@pytest.mark.parametrize(("answer", "reference"), [
    ("So the answer is \\boxed{\\frac{1}{2}}.", "0.5"),
    ("x = 1/2", "\\frac{1}{2}"),
    ("We get $\\frac{36}{2}$, hence 18", "18"),
    ("\\boxed{\\sqrt{2}/2}", "\\frac{\\sqrt{2}}{2}"),
    ("The interval is $\\left( 3, \\frac{\\pi}{2} \\right)$", "\\left( 3, \\frac{\\pi}{2} \\right)"),
    ("\\boxed{9}", "$9$"),
])
def test_equivalent_forms_are_equal(checker: MathChecker, answer: str, reference: str) -> None:
    verdict = checker.equal(answer, reference)
    assert verdict.equal, verdict


@pytest.mark.parametrize(("answer", "reference"), [
    ("\\boxed{\\frac{1}{3}}", "0.5"),
    ("the answer is 17", "18"),
    ("I do not know", "18"),
])
def test_different_answers_are_not_equal(checker: MathChecker, answer: str, reference: str) -> None:
    assert not checker.equal(answer, reference).equal


def test_the_last_boxed_answer_counts(checker: MathChecker) -> None:
    assert checker.equal("first \\boxed{3}, no wait: \\boxed{4}", "4").equal
    assert not checker.equal("first \\boxed{4}, no wait: \\boxed{3}", "4").equal


def test_classes_group_equivalent_answers(checker: MathChecker) -> None:
    assert checker.classes(["1/2", "0.5", "\\frac{2}{4}", None, "3", "", "3.0"]) == [0, 0, 0, None, 4, None, 4]


def test_a_pathological_expression_is_graded_wrong_within_the_limit() -> None:
    """A tower of powers sympy would evaluate forever, and a huge nested fraction: the child is killed at the
    limit, the item is wrong, and the next item is graded by a fresh child."""
    checker = MathChecker(timeout_s=2.0, workers=1)
    try:
        tower = checker.equal("\\boxed{9^{9^{9^{9^{9}}}}}", "5")
        assert not tower.equal
        nested = "\\boxed{" + "\\frac{1}{1+" * 400 + "x" + "}" * 400 + "}"
        assert not checker.equal(nested, "5").equal
        assert checker.equal("\\boxed{3}", "3").equal  # the checker still works afterwards
    finally:
        checker.close()
