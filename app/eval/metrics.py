"""Grading: parse a metric spec (exact, number, contains, regex, math, choice, python:FILE, output:NAME, tests,
bfcl) and score outputs."""

from __future__ import annotations

import ast
import contextvars
import json
import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.eval.bfcl_data import grade_answer
from nodes.algorithms.choice import choice_letter, reference_letter
from nodes.algorithms.code_exec import ExecLimits
from nodes.algorithms.code_tests import run_code_tests
from nodes.algorithms.extract import AnswerSpec, canonical_number, extract_answer, normalize_text, parse_number
from nodes.algorithms.math_equiv import default_checker, math_available
from nodes.algorithms.safe_regex import PatternError, SafePattern, compile_pattern
from nodes.algorithms.sandbox import run_python_verifier

log = logging.getLogger(__name__)

METRIC_FORMS = ("exact", "number", "contains", "math", "choice", "regex", "regex:PATTERN", "python:FILE",
                "output:NAME", "tests", "bfcl")
MAX_METRIC_FILE_BYTES = 256 * 1024
PYTHON_METRIC_TIMEOUT_S = 5.0
PYTHON_METRIC_MEMORY_MB = 256
_NUMBER_IN_TEXT = AnswerSpec(extract="auto", normalize="number")
_HASHES_ANSWER = re.compile(r"^####\s*(.+?)\s*$", re.MULTILINE)
"""GSM8K's own answer marker: the line `#### N` that ends its solutions (as its authors grade it)."""


@dataclass
class Grade:
    """The verdict on one output: a score in [0, 1], correct when score >= 0.5, and why; or `ungraded` (why
    the grader itself could not run: a sandbox that did not start, a math worker that died, a metric that
    raised), which is no verdict on the output at all."""

    score: float
    correct: bool
    detail: str = ""
    ungraded: str = ""


def _grade(score: float, detail: str = "") -> Grade:
    score = min(1.0, max(0.0, float(score)))
    return Grade(score=score, correct=score >= 0.5, detail=detail)


def _wrong(detail: str) -> Grade:
    return Grade(score=0.0, correct=False, detail=detail)


def ungraded(reason: str) -> Grade:
    """No verdict: the grader could not run (not a wrong answer)."""
    return Grade(score=0.0, correct=False, detail=f"ungraded: {reason}", ungraded=reason)


class MetricError(ValueError):
    """A metric spec that cannot be used (unknown form, bad regex, missing or unreadable python file)."""


GradeFn = Callable[[Any, dict[str, Any], str | None, dict[str, Any]], Grade]

grading_stop: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar("grading_stop", default=None)
"""Set by the evaluation around an item's grading: polled by graders that run programs (the `tests` metric), so a
cancelled evaluation kills its candidates' programs at once instead of waiting out their time limits."""


@dataclass
class Metric:
    """A parsed metric: `grade(output_value, row, reference, outputs)` where `outputs` holds every
    workflow output of the item's run."""

    name: str
    grade: GradeFn
    needs_reference: bool = False
    uses_python: bool = False
    runs_code: bool = False
    """The output is a program run against the item's tests (share mode: only with --allow-code-execution)."""


def _is_empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    return isinstance(value, list | dict | tuple) and not value


def as_text(value: Any) -> str:
    """An output value as text: strings as they are, numbers canonical (7.0 -> "7"), other data as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float) and math.isfinite(value):
        return canonical_number(float(value))
    return json.dumps(value, ensure_ascii=False, default=str)


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


# ------------------------------------------------------------------ the forms


def _bfcl(output: Any, row: dict[str, Any], reference: str | None, outputs: dict[str, Any]) -> Grade:
    """A tool-call answer (answer_json) graded by BFCL's AST checker against the row's possible answers (the
    reference the BFCL presets make: app/eval/bfcl_data.py); irrelevance rows are right without a call."""
    correct, detail = grade_answer(output, reference)
    return _grade(1.0 if correct else 0.0, detail)


def _exact(output: Any, row: dict[str, Any], reference: str | None, outputs: dict[str, Any]) -> Grade:
    if _is_empty(output):
        return _wrong("no output")
    if reference is None:
        return _wrong("no reference answer for this row")
    got, want = normalize_text(as_text(output)), normalize_text(reference)
    if got == want:
        return _grade(1.0)
    return _wrong(f"got {_short(got)}, expected {_short(want)}")


def _number(output: Any, row: dict[str, Any], reference: str | None, outputs: dict[str, Any]) -> Grade:
    if _is_empty(output):
        return _wrong("no output")
    if reference is None:
        return _wrong("no reference answer for this row")
    want = parse_number(reference)
    if want is None:
        return _wrong(f"the reference {_short(reference)} is not a number")
    text = as_text(output)
    got = parse_number(text)
    if got is not None:
        found = canonical_number(got)
    else:  # a longer text: GSM8K's `#### N`, else the number it gives as its answer (\boxed{}, 'Answer:', last)
        marked = [parse_number(m.replace(",", "")) for m in _HASHES_ANSWER.findall(text)]
        found_text = (canonical_number(marked[-1]) if marked and marked[-1] is not None
                      else extract_answer(text, _NUMBER_IN_TEXT))
        if found_text is None:
            return _wrong(f"no number in the output {_short(text)}")
        found = found_text
    expected = canonical_number(want)
    if found == expected:
        return _grade(1.0)
    return _wrong(f"got {found}, expected {expected}")


def _contains(output: Any, row: dict[str, Any], reference: str | None, outputs: dict[str, Any]) -> Grade:
    if _is_empty(output):
        return _wrong("no output")
    want = normalize_text(reference) if reference is not None else ""
    if not want:
        return _wrong("no reference answer for this row")
    if want in normalize_text(as_text(output)):
        return _grade(1.0)
    return _wrong(f"{_short(want)} not found in the output")


def _math(output: Any, row: dict[str, Any], reference: str | None, outputs: dict[str, Any]) -> Grade:
    if _is_empty(output):
        return _wrong("no output")
    if reference is None:
        return _wrong("no reference answer for this row")
    verdict = default_checker().equal(as_text(output), reference)
    if verdict.ungraded:
        return ungraded(verdict.ungraded)
    if verdict.equal:
        return _grade(1.0)
    if verdict.problem:
        return _wrong(verdict.problem)
    if verdict.want is None:
        return _wrong(f"the reference {_short(reference)} is not a mathematical expression")
    if verdict.got is None:
        return _wrong(f"no mathematical answer in the output {_short(as_text(output))}")
    return _wrong(f"got {_short(verdict.got)}, expected {_short(verdict.want)}")


def _choice(output: Any, row: dict[str, Any], reference: str | None, outputs: dict[str, Any]) -> Grade:
    if _is_empty(output):
        return _wrong("no output")
    want = reference_letter(reference or "")
    if want is None:
        return _wrong(f"the reference {_short(reference or '')} is not an option letter A-J")
    got = choice_letter(as_text(output))
    if got is None:
        return _wrong(f"no option letter in the output {_short(as_text(output))}")
    return _grade(1.0) if got == want else _wrong(f"chose {got}, expected {want}")


def _regex_fixed(pattern: SafePattern) -> GradeFn:
    def grade(output: Any, row: dict[str, Any], reference: str | None, outputs: dict[str, Any]) -> Grade:
        if _is_empty(output):
            return _wrong("no output")
        if pattern.search(as_text(output)):
            return _grade(1.0)
        return _wrong(f"no match for /{pattern.pattern}/")

    return grade


def _regex_reference(output: Any, row: dict[str, Any], reference: str | None, outputs: dict[str, Any]) -> Grade:
    if _is_empty(output):
        return _wrong("no output")
    if not reference:
        return _wrong("no reference pattern for this row")
    try:  # RE2: linear time, whatever the row's pattern
        pattern = compile_pattern(reference)
    except PatternError as exc:
        return _wrong(f"the reference {_short(reference)} is not a valid regular expression: {exc}")
    if pattern.search(as_text(output)):
        return _grade(1.0)
    return _wrong(f"no match for /{reference}/")


def _value_score(value: Any, what: str) -> Grade:
    """A workflow output used as the score itself: bool -> 1/0, a number clipped to [0, 1]."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "false"):
            value = text == "true"
        else:
            number = parse_number(text)
            if number is None:
                return _wrong(f"{what} is {_short(value)}, not a bool or a number")
            value = number
    if isinstance(value, bool):
        return _grade(1.0 if value else 0.0)
    if isinstance(value, int | float):
        if not math.isfinite(value):
            return _wrong(f"{what} is {value}, not a finite number")
        clipped = min(1.0, max(0.0, float(value)))
        return _grade(clipped, "" if clipped == value else f"{what} {value:g} clipped to {clipped:g}")
    return _wrong(f"{what} is a {type(value).__name__}, not a bool or a number")


def _output_metric(name: str) -> GradeFn:
    def grade(output: Any, row: dict[str, Any], reference: str | None, outputs: dict[str, Any]) -> Grade:
        if name not in outputs:
            return _wrong(f"the run has no output {name!r} (its outputs: {', '.join(map(repr, outputs)) or 'none'})")
        value = outputs[name]
        if _is_empty(value):
            return _wrong("no output")
        return _value_score(value, f"output {name!r}")

    return grade


def _read_metric_file(file: str, base_dir: Path | None) -> tuple[Path, str]:
    given = Path(file).expanduser()
    candidates = [given] if given.is_absolute() or base_dir is None else [base_dir / given, given]
    path = next((c for c in candidates if c.is_file()), None)
    if path is None:
        looked = " or ".join(str(c) for c in candidates)
        raise MetricError(f"python metric file {file!r} not found (looked for {looked})")
    size = path.stat().st_size
    if size > MAX_METRIC_FILE_BYTES:
        raise MetricError(f"python metric file {path} is {size} bytes; the limit is {MAX_METRIC_FILE_BYTES}")
    try:
        code = path.read_bytes()[:MAX_METRIC_FILE_BYTES].decode("utf-8")
    except UnicodeDecodeError:
        raise MetricError(f"python metric file {path} is not UTF-8 text") from None
    except OSError as exc:
        raise MetricError(f"cannot read python metric file {path}: {exc.strerror or exc}") from None
    try:
        tree = ast.parse(code, filename=str(path))
    except SyntaxError as exc:
        raise MetricError(f"python metric file {path} has a syntax error on line {exc.lineno}: {exc.msg}") from None
    defines = any(
        (isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "metric")
        or (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "metric" for t in node.targets))
        for node in tree.body
    )
    if not defines:
        raise MetricError(f"python metric file {path} does not define metric(output, row)")
    return path, code.removeprefix("\ufeff")


def _python_metric(code: str) -> GradeFn:
    # `verify = None`: the sandbox would call a function named verify in place of reading `score`
    program = code + "\nscore = metric(candidate, inputs)\nverify = None\n"

    def grade(output: Any, row: dict[str, Any], reference: str | None, outputs: dict[str, Any]) -> Grade:
        if _is_empty(output):
            return _wrong("no output")
        result = run_python_verifier(program, as_text(output), inputs=dict(row), reference=reference,
                                     timeout_s=PYTHON_METRIC_TIMEOUT_S, memory_mb=PYTHON_METRIC_MEMORY_MB)
        if not result.ok:  # the metric raised (or passed its limits): the grader failed, not the output
            return ungraded(f"the metric failed: {result.reason}")
        if not math.isfinite(result.score):
            return _wrong(f"metric returned {result.score}")
        clipped = min(1.0, max(0.0, result.score))
        detail = result.reason
        if clipped != result.score:
            detail = (detail + "; " if detail else "") + f"score {result.score:g} clipped to {clipped:g}"
        return _grade(clipped, detail)

    return grade


def _tests_metric(output: Any, row: dict[str, Any], reference: str | None, outputs: dict[str, Any]) -> Grade:
    """The output's code run, confined, against the item's `tests` (and `entry_point`, `io_tests`) columns;
    correct exactly when the benchmark's own rule passes it (the whole test program runs to its end, every
    stdin/stdout pair matches), the score 1 then, else the fraction of tests passed; ungraded when the sandbox
    could not start."""
    if _is_empty(output):
        return _wrong("no output")
    tests = str(row.get("tests") or "")
    pairs = row.get("io_tests") or []
    if isinstance(pairs, str):
        try:
            pairs = json.loads(pairs) if pairs.strip() else []
        except ValueError:
            return _wrong("the item's io_tests column is not JSON")
    if not tests.strip() and not pairs:
        return _wrong("the item has no tests (a `tests` or `io_tests` column)")
    report = run_code_tests(as_text(output), tests=tests, entry_point=str(row.get("entry_point") or ""),
                            io_tests=pairs if isinstance(pairs, list) else [],
                            limits=ExecLimits(stop=grading_stop.get()))
    if report.ungraded:
        return ungraded(report.ungraded)
    return Grade(score=report.score, correct=report.passed_all, detail=report.reason)


def parse_metric(spec: str, base_dir: Path | None = None) -> Metric:
    """The metric a spec names; relative python:FILE paths are looked up in `base_dir` first, then as given."""
    text = (spec or "").strip()
    form, sep, arg = text.partition(":")
    form = form.strip().lower()
    if not sep:
        if form == "exact":
            return Metric("exact", _exact, needs_reference=True)
        if form == "number":
            return Metric("number", _number, needs_reference=True)
        if form == "contains":
            return Metric("contains", _contains, needs_reference=True)
        if form == "regex":
            return Metric("regex", _regex_reference, needs_reference=True)
        if form == "math":
            missing = math_available()
            if missing:
                raise MetricError(missing)
            return Metric("math", _math, needs_reference=True)
        if form == "choice":
            return Metric("choice", _choice, needs_reference=True)
        if form == "tests":
            return Metric("tests", _tests_metric, runs_code=True)
        if form == "bfcl":
            return Metric("bfcl", _bfcl, needs_reference=True)
    elif form == "regex":
        if not arg:
            raise MetricError("regex: needs a pattern, e.g. regex:^\\d+$ (or plain `regex` to use the reference)")
        try:  # RE2: linear time, so no pattern can hang an evaluation
            pattern = compile_pattern(arg)
        except PatternError as exc:
            raise MetricError(f"regex:{arg} is not a valid regular expression: {exc}") from None
        return Metric(f"regex:{arg}", _regex_fixed(pattern))
    elif form == "python":
        if not arg.strip():
            raise MetricError("python: needs a file defining metric(output, row), e.g. python:my_metric.py")
        path, code = _read_metric_file(arg.strip(), base_dir)
        log.debug("python metric from %s (%d bytes)", path, len(code))
        return Metric(f"python:{arg.strip()}", _python_metric(code), uses_python=True)
    elif form == "output":
        name = arg.strip()
        if not name:
            raise MetricError("output: needs the name of a workflow output, e.g. output:passed")
        return Metric(f"output:{name}", _output_metric(name))
    raise MetricError(f"unknown metric {spec!r}; use one of: {', '.join(METRIC_FORMS)}")


def grade_samples(metric: Metric, texts: list[str], row: dict[str, Any], reference: str | None) -> list[bool]:
    """Whether each sample (e.g. every completion of a sampler) is correct, for pass@k. An output:NAME
    metric scores a workflow output, not texts, so it grades no samples: [] (no pass@k for it)."""
    if metric.name.startswith("output:"):
        return []
    return [metric.grade(text, row, reference, {}).correct for text in texts]
