"""Metrics by hand-computed cases: exact, number, contains, regex, output:NAME and python:FILE (sandboxed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.eval import metrics
from app.eval.datasets import load_dataset
from app.eval.metrics import Grade, MetricError, grade_samples, parse_metric

ROOT = Path(__file__).resolve().parents[2]


def grade(spec: str, output: object, reference: str | None = None, row: dict | None = None,
          outputs: dict | None = None) -> Grade:
    return parse_metric(spec).grade(output, row or {}, reference, outputs or {})


@pytest.mark.parametrize("spec", ["exact", "number", "contains", "regex", "regex:x", "output:answer"])
@pytest.mark.parametrize("empty", [None, "", "   ", []])
def test_no_output_is_always_wrong(spec: str, empty: object) -> None:
    result = grade(spec, empty, "x", outputs={"answer": empty})
    assert result == Grade(0.0, False, "no output")


def test_exact() -> None:
    metric = parse_metric("exact")
    assert metric.name == "exact" and metric.needs_reference and not metric.uses_python
    assert grade("exact", "  **Paris.** ", "paris").correct
    assert grade("exact", "The  ANSWER", "the answer").score == 1.0
    wrong = grade("exact", "Lyon", "Paris")
    assert not wrong.correct and wrong.score == 0.0 and "'lyon'" in wrong.detail and "'paris'" in wrong.detail
    assert grade("exact", 7.0, "7").correct  # numbers as canonical text
    assert "no reference" in grade("exact", "x", None).detail


def test_number() -> None:
    assert grade("number", "1,000", "1000").correct
    assert grade("number", "$1000.00", "1e3").correct
    assert grade("number", 42, "42.0").correct
    assert grade("number", "So 3 + 4 = 7. Answer: 7 apples", "7").correct
    assert grade("number", "\\boxed{12} (not 13)", "12").correct
    wrong = grade("number", "Answer: 8", "7")
    assert not wrong.correct and wrong.detail == "got 8, expected 7"
    none = grade("number", "I do not know", "7")
    assert not none.correct and "no number" in none.detail
    assert "not a number" in grade("number", "7", "seven").detail


def test_contains() -> None:
    assert grade("contains", "The capital is Paris, of course.", "paris").correct
    wrong = grade("contains", "The capital is Lyon.", "Paris")
    assert not wrong.correct and "not found" in wrong.detail
    assert not grade("contains", "anything", "  ").correct


def test_regex_forms() -> None:
    fixed = parse_metric(r"regex:^\d+$")
    assert fixed.name == r"regex:^\d+$" and not fixed.needs_reference
    assert fixed.grade("123", {}, None, {}).correct and not fixed.grade("12a", {}, None, {}).correct
    assert parse_metric("regex:a:b").grade("xa:b", {}, None, {}).correct  # only the first ':' splits
    assert parse_metric("regex").needs_reference
    assert grade("regex", "color: red", r"colou?r").correct
    assert not grade("regex", "colr", r"colou?r").correct
    bad = grade("regex", "x", "(")
    assert not bad.correct and "not a valid regular expression" in bad.detail
    with pytest.raises(MetricError, match="not a valid regular expression"):
        parse_metric("regex:(")
    with pytest.raises(MetricError, match="needs a pattern"):
        parse_metric("regex:")


def test_output_metric() -> None:
    outputs = {"passed": True, "score": 0.8, "big": 3, "text": "0.25", "word": "yes", "failed": False}
    assert grade("output:passed", "x", outputs=outputs) == Grade(1.0, True, "")
    assert grade("output:failed", "x", outputs=outputs) == Grade(0.0, False, "")
    assert grade("output:score", "x", outputs=outputs).score == 0.8
    big = grade("output:big", "x", outputs=outputs)
    assert big.score == 1.0 and "clipped" in big.detail
    assert grade("output:text", "x", outputs=outputs).score == 0.25
    assert not grade("output:text", "x", outputs=outputs).correct
    assert "not a bool or a number" in grade("output:word", "x", outputs=outputs).detail
    missing = grade("output:verdict", "x", outputs=outputs)
    assert not missing.correct and "no output 'verdict'" in missing.detail and "'passed'" in missing.detail
    assert not parse_metric("output:passed").needs_reference


@pytest.mark.parametrize("spec", ["", "exactly", "f1", "bleu:4", "Python"])
def test_unknown_metric_lists_the_forms(spec: str) -> None:
    with pytest.raises(MetricError) as caught:
        parse_metric(spec)
    assert str(caught.value).endswith("use one of: exact, number, contains, math, choice, regex, regex:PATTERN, "
                                      "python:FILE, output:NAME, tests, bfcl")


@pytest.mark.parametrize(("spec", "words"), [("python:", "needs a file"), ("output:", "needs the name")])
def test_forms_without_their_argument(spec: str, words: str) -> None:
    with pytest.raises(MetricError, match=words):
        parse_metric(spec)


def test_grade_samples() -> None:
    metric = parse_metric("number")
    texts = ["Answer: 7", "Answer: 8", "seven", "so it is 7."]
    assert grade_samples(metric, texts, {}, "7") == [True, False, False, True]
    assert grade_samples(parse_metric("output:passed"), texts, {}, None) == []  # it grades outputs, not texts


# ------------------------------------------------------------------ python:FILE (runs the sandbox child)


def test_python_metric_file_errors(tmp_path: Path) -> None:
    with pytest.raises(MetricError, match=r"'missing\.py' not found"):
        parse_metric("python:missing.py", base_dir=tmp_path)
    (tmp_path / "nometric.py").write_text("def score(x, y):\n    return 1\n", encoding="utf-8")
    with pytest.raises(MetricError, match="does not define metric"):
        parse_metric("python:nometric.py", base_dir=tmp_path)
    (tmp_path / "broken.py").write_text("def metric(output, row)\n    return 1\n", encoding="utf-8")
    with pytest.raises(MetricError, match="syntax error on line 1"):
        parse_metric("python:broken.py", base_dir=tmp_path)
    (tmp_path / "big.py").write_text("# " + "x" * metrics.MAX_METRIC_FILE_BYTES, encoding="utf-8")
    with pytest.raises(MetricError, match="limit"):
        parse_metric("python:big.py", base_dir=tmp_path)
    (tmp_path / "latin.py").write_bytes(b"# caf\xe9\ndef metric(o, r):\n    return 1\n")
    with pytest.raises(MetricError, match="not UTF-8"):
        parse_metric("python:latin.py", base_dir=tmp_path)


def test_python_metric_with_the_instructions_metric() -> None:
    metric = parse_metric("python:datasets/instructions_metric.py", base_dir=ROOT)
    assert metric.uses_python and not metric.needs_reference and metric.name.startswith("python:")
    rows = {row["check"]: row for row in reversed(load_dataset(ROOT / "datasets" / "instructions.csv").rows)}
    assert metric.grade("The ocean is deep, blue and vast.", rows["max_words"], None, {}).correct
    assert not metric.grade("word " * 40, rows["max_words"], None, {}).correct
    assert rows["number_of_lines"]["arg"] == "3"
    assert metric.grade("lions\n\ncamels\nfoxes\n", rows["number_of_lines"], None, {}).correct
    assert not metric.grade("lions\ncamels", rows["number_of_lines"], None, {}).correct
    result = metric.grade("Commas, everywhere", rows["no_commas"], None, {})
    assert result == Grade(0.0, False, "")


def test_python_metric_scores_fractions_reads_rows_and_reports_failures(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "def verify(candidate, inputs):\n    return True  # would hijack the sandbox if it were called\n"
        "def metric(output, row):\n"
        "    if row.get('boom'):\n        raise KeyError('boom')\n"
        "    return float(row['weight']) * len(output) / 10\n", encoding="utf-8")
    metric = parse_metric("python:m.py", base_dir=tmp_path)
    assert metric.grade("abcd", {"weight": "0.5"}, None, {}) == Grade(0.2, False, "")
    high = metric.grade("abcdefghij", {"weight": 3}, None, {})
    assert high.score == 1.0 and high.correct and "clipped" in high.detail
    failed = metric.grade("abcd", {"weight": 1, "boom": True}, None, {})
    assert not failed.correct and failed.score == 0.0 and "KeyError" in failed.detail and "line 5" in failed.detail


def test_python_metric_that_never_returns_is_cut_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "PYTHON_METRIC_TIMEOUT_S", 1.0)  # the default is 5 s; keep the suite quick
    (tmp_path / "loop.py").write_text("def metric(output, row):\n    while True:\n        pass\n", encoding="utf-8")
    result = parse_metric(f"python:{tmp_path / 'loop.py'}").grade("x", {}, None, {})
    assert not result.correct and result.score == 0.0 and "timed out" in result.detail


# ------------------------------------------------------------------ math and choice


def test_math_metric_checks_equivalence() -> None:
    pytest.importorskip("math_verify")
    metric = parse_metric("math")
    assert metric.name == "math" and metric.needs_reference
    assert grade("math", "so the answer is \\boxed{\\frac{1}{2}}", "0.5").correct
    assert grade("math", "0.5", "$\\frac{1}{2}$").correct
    wrong = grade("math", "\\boxed{\\frac{1}{3}}", "0.5")
    assert not wrong.correct and "expected" in wrong.detail
    assert grade("math", "1/2", None).detail == "no reference answer for this row"


@pytest.mark.parametrize(("output", "reference", "correct"), [
    ("Answer: B", "B", True),
    ("The answer is (C).", "(C)", True),
    ("Looking at the options, **D** is right.", "d", True),
    ("I weighed (A) against (B)... Answer: **B**", "B", True),
    ("$\\boxed{C}$", "C", True),
    ("Answer: A", "B", False),
])
def test_choice_metric_extracts_the_letter(output: str, reference: str, correct: bool) -> None:
    assert grade("choice", output, reference).correct is correct


def test_choice_metric_explains_what_is_missing() -> None:
    assert "no option letter" in grade("choice", "I am not sure", "B").detail
    assert "not an option letter" in grade("choice", "Answer: B", "42").detail
