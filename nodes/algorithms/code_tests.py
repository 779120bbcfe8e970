"""Scoring candidate programs by running tests on them: extraction, one confined run each, parallel runs.

`run_code_tests` runs one candidate (the last fenced code block of its text, else the whole text) against
assert tests / a `check(candidate)` function / stdin-stdout pairs and extra inputs (`probes`), through the
supervisor of `confined/supervisor.py` (the verdict) and the harness of `confined/harness.py` (the breakdown),
and returns a `TestReport`: the verdict (`passed_all`: the benchmark's own rule, the whole test program runs to
its end without an exception, and every stdin/stdout pair matches), per-test results (the detail, never the verdict),
the outputs on the probes (its behaviour), stdout / stderr tails, and the score (1 when the verdict passes,
else the fraction of the tests the supervisor observed passing, below 1: only stdin/stdout pairs, since the
per-test breakdown of assert tests runs in the candidate's own process and could be forged; with `partial:
observed` each assert test also runs as a confined program of its own, and those verdicts count). Nothing raises: a
timeout, a crash or a syntax error is a reason; a sandbox that could not start at all is `ungraded` (the grader
failed, not the candidate).
"""

from __future__ import annotations

import ast
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from nodes.algorithms.code_exec import ExecLimits, ExecResult, run_confined
from nodes.algorithms.confined import ENTRY, program_files

FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)


def extract_code(text: str) -> str:
    """The last fenced code block (a python-tagged one preferred), else the whole text."""
    blocks = FENCE.findall(text or "")
    if not blocks:
        return text or ""
    python = [body for lang, body in blocks if lang.lower() in ("python", "py", "python3")]
    return (python or [body for _, body in blocks])[-1]


def count_tests(tests: str, entry_point: str) -> int:
    """How many tests `tests` holds (asserts; a check()'s statements with entry_point); 0 if it does not parse."""
    try:
        tree = ast.parse(tests)
    except SyntaxError:
        return 0
    check = next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "check"), None)
    if check is not None and entry_point:
        return sum(1 for s in check.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)))
    return sum(1 for s in tree.body if isinstance(s, ast.Assert))


def tests_problem(tests: str) -> str | None:
    """Why `tests` cannot run (not Python), or None."""
    try:
        ast.parse(tests)
    except SyntaxError as exc:
        return f"is not valid Python: {exc.msg} (line {exc.lineno})"
    return None


@dataclass
class TestReport:
    """One candidate's run: its score, per-test results and behaviour."""

    score: float
    passed: int
    total: int
    reason: str
    tests: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[str | None] = field(default_factory=list)
    """The candidate's output on each probe (its behaviour on the generated inputs)."""
    stdout: str = ""
    stderr: str = ""
    isolated: bool = False
    passed_all: bool = False
    """The verdict: the benchmark's rule (the program ran to its end, every stdin/stdout pair matched)."""
    ungraded: str = ""
    """Why the candidate could not be graded at all (the sandbox did not start), '' when it was."""

    def behaviour(self) -> tuple[Any, ...]:
        """What the candidate did on every test and probe: equal tuples, same behaviour."""
        return (*((t.get("output"), t.get("passed")) for t in self.tests), *self.outputs)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


PARTIAL_CHOICES = ("none", "observed")
"""A failing program's score: `none`, the share of the stdin/stdout pairs the supervisor saw pass; `observed`, also
each assert test run as a confined program of its own, so the count of tests passed is the supervisor's."""


def split_tests(tests: str, entry_point: str) -> list[str]:
    """One test program per test of `tests`: every top-level statement that is not an assert (imports, helpers,
    data) with one of its asserts; for a `def check(candidate)` (with entry_point), the check with the statements
    before its k-th assert that are not asserts, and that assert. [] when `tests` does not parse or holds no test."""
    try:
        tree = ast.parse(tests)
    except SyntaxError:
        return []
    check = next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "check"), None)
    if check is not None and entry_point:
        programs = []
        for k, stmt in enumerate(check.body):
            if not isinstance(stmt, ast.Assert):
                continue
            body = [s for s in check.body[:k] if not isinstance(s, ast.Assert)] + [stmt]
            one = ast.FunctionDef(**{**{f: getattr(check, f) for f in check._fields}, "body": body})
            module = ast.Module([one if s is check else s for s in tree.body], type_ignores=[])
            programs.append(ast.unparse(ast.fix_missing_locations(module)))
        return programs
    prelude = [s for s in tree.body if not isinstance(s, ast.Assert)]
    return [ast.unparse(ast.Module([*prelude, stmt], type_ignores=[]))
            for stmt in tree.body if isinstance(stmt, ast.Assert)]


def run_code_tests(text: str, *, tests: str = "", entry_point: str = "", io_tests: list[dict[str, Any]] | None = None,
                   probes: list[str] | None = None, limits: ExecLimits | None = None,
                   isolate: bool | None = None, partial: str = "none") -> TestReport:
    """Run one candidate's code against the tests (see the module docstring); `partial: observed` scores a failing
    program by its tests run one program each (PARTIAL_CHOICES)."""
    report = _run_code_tests(text, tests=tests, entry_point=entry_point, io_tests=io_tests, probes=probes,
                             limits=limits, isolate=isolate)
    if partial != "observed" or report.passed_all or report.ungraded or not tests.strip():
        return report
    return _with_observed_partial(report, text, tests, entry_point, io_tests or [], limits, isolate)


def _with_observed_partial(report: TestReport, text: str, tests: str, entry_point: str,
                           io_tests: list[dict[str, Any]], limits: ExecLimits | None,
                           isolate: bool | None) -> TestReport:
    """The report with its score from each assert test run as a program of its own: each one's verdict is the
    supervisor's (the program ran to its end), so a candidate cannot claim passes it did not make."""
    programs = split_tests(tests, entry_point)
    if not programs:
        return report
    verdicts = [_run_code_tests(text, tests=program, entry_point=entry_point, io_tests=None,
                                probes=None, limits=limits, isolate=isolate)
                for program in programs]
    if any(v.ungraded for v in verdicts):
        return report  # a stop or a sandbox failure midway: no count to trust beyond the first run's
    ios = [t for t in report.tests if t.get("type") == "io"]
    passed = sum(1 for v in verdicts if v.passed_all) + sum(1 for t in ios if t.get("passed"))
    total = len(programs) + len(io_tests)
    report.score = min(passed / total, (total - 1) / total) if total else 0.0
    report.reason = f"{report.reason} · observed one by one: {passed}/{total} passed"[:500]
    return report


def _run_code_tests(text: str, *, tests: str, entry_point: str, io_tests: list[dict[str, Any]] | None,
                    probes: list[str] | None, limits: ExecLimits | None, isolate: bool | None) -> TestReport:
    limits = limits or ExecLimits()
    io_cases = list(io_tests or [])
    request = {"code": extract_code(text), "tests": tests or "", "entry_point": entry_point or "",
               "io_tests": io_cases, "probes": [str(p) for p in probes or []], "timeout_s": limits.timeout_s}
    result = run_confined([ENTRY], json.dumps(request), limits, files=program_files(), isolate=isolate)
    total = (count_tests(tests, entry_point) if tests.strip() else 0) + len(io_cases)
    if result.refused:
        return TestReport(0.0, 0, total, result.refused, isolated=False, ungraded=result.refused)
    if result.cancelled:  # killed by the stop (a cancel, the run's cap): no verdict on the candidate
        return TestReport(0.0, 0, total, KILLED_BY_STOP, isolated=result.isolated, ungraded=KILLED_BY_STOP)
    return _report(result, total, len(request["probes"]), limits, bool(request["tests"].strip()), len(io_cases))


KILLED_BY_STOP = "stopped while running: the run was cancelled or reached its cap; the candidate was not graded"


def _report(result: ExecResult, total: int, n_probes: int, limits: ExecLimits, has_tests: bool,
            n_io: int) -> TestReport:
    events = []
    for line in result.results.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    if not any(e.get("type") == "start" for e in events) and not result.timed_out:
        why = sandbox_failure(result)
        return TestReport(0.0, 0, total, why, isolated=result.isolated, stderr=result.stderr[-2000:], ungraded=why)
    tests = [e for e in events if e.get("type") in ("test", "io")]
    probe_out: list[str | None] = [None] * n_probes
    for e in events:
        if e.get("type") == "probe" and 0 <= int(e.get("index", -1)) < n_probes:
            probe_out[int(e["index"])] = e.get("output")
    passed = sum(1 for t in tests if t.get("passed"))
    total = max(total, len(tests))
    verdict = next((e for e in events if e.get("type") == "verdict"), None)
    ios = [t for t in tests if t.get("type") == "io"]
    passed_all = ((has_tests or n_io > 0) and (not has_tests or bool(verdict and verdict.get("passed")))
                  and len(ios) == n_io and all(t.get("passed") for t in ios))
    reason = _reason(events, tests, result, limits, passed, total, verdict)
    if passed_all and passed < total:  # the verdict stands; the breakdown is detail
        reason = f"the whole test program passed; run one by one: {reason}"[:500]
    score = 1.0 if passed_all else _partial_credit(ios, total)
    return TestReport(score, passed, total, reason, tests, probe_out, result.stdout[-2000:], result.stderr[-2000:],
                      result.isolated, passed_all)


def _partial_credit(observed: list[dict[str, Any]], total: int) -> float:
    """A failing program's score: the share of the tests whose result the supervisor observed itself (stdin/stdout
    pairs) that passed, below 1. The harness's per-test breakdown is detail only: it runs in the candidate's own
    process, which can write any result there (a program failing as a whole could claim total - 1 passes)."""
    if not total:
        return 0.0
    return min(sum(1 for t in observed if t.get("passed")) / total, (total - 1) / total)


def sandbox_failure(result: ExecResult) -> str:
    """Why the harness never started (bubblewrap missing or refused): the grader failed, not the candidate."""
    tail = result.stderr.strip().splitlines()[-1][:300] if result.stderr.strip() else ""
    how = "bubblewrap" if result.isolated else "the sandboxed Python"
    return (f"the sandbox could not start ({how} exited with status {result.returncode}"
            + (f": {tail}" if tail else "") + "); the candidate was not graded")


def _reason(events: list[dict[str, Any]], tests: list[dict[str, Any]], result: ExecResult, limits: ExecLimits,
            passed: int, total: int, verdict: dict[str, Any] | None = None) -> str:
    """The first failing test and its error, or why the run stopped."""
    for e in events:
        if e.get("type") in ("compile_error", "load_error"):
            return str(e.get("error"))
    if verdict is not None and not verdict.get("passed") and all(t.get("passed") for t in tests):
        return f"{passed}/{total} tests passed, but the whole program raised {verdict.get('error')}"[:500]
    failed = next((t for t in tests if not t.get("passed")), None)
    if failed is not None:
        what = failed.get("source") or f"stdin/stdout test {failed.get('index')}"
        return f"{passed}/{total} passed; first failure: {what}: {failed.get('error')}"[:500]
    if not any(e.get("type") == "done" for e in events):
        return f"{passed}/{total} passed; then {_death(result, limits)}"
    cut = next((e for e in events if e.get("type") == "breakdown_error"), None)
    if cut is not None:  # the supervisor stopped waiting for the per-test breakdown
        return f"{passed}/{total} passed; then {cut.get('error')}"[:500]
    return f"{passed}/{total} tests passed" if total else "no tests to run"


STOPPED_BY = {"cpu": "stopped at the CPU time limit ({timeout_s:g} s of its processes together)",
              "disk": "stopped at the scratch disk limit ({disk_mb} MB)",
              "memory": "memory limit exceeded ({memory_mb} MB for its processes together)"}
"""What the process-tree watch or the cgroup stopped a program for (`ExecResult.stopped_by`)."""


def _death(result: ExecResult, limits: ExecLimits) -> str:
    if result.timed_out:
        return f"timed out after {limits.timeout_s:g} s"
    if result.stopped_by in STOPPED_BY:  # a kill by the tree's watch is not the CPU limit's SIGKILL
        return STOPPED_BY[result.stopped_by].format(timeout_s=limits.timeout_s, disk_mb=limits.disk_mb,
                                                    memory_mb=limits.memory_mb)
    code = result.returncode
    if code is not None and result.isolated and code > 128:  # bwrap reports its child's signal as 128 + signal
        code = 128 - code
    if code is not None and code < 0:
        import signal

        sig = -code
        if sig in (signal.SIGXCPU, signal.SIGKILL):
            return f"stopped at the CPU time limit ({limits.timeout_s:g} s)"
        if sig == signal.SIGXFSZ:
            return f"stopped at the output limit ({limits.output_bytes} bytes)"
        return f"killed by signal {signal.Signals(sig).name}"
    tail = result.stderr.strip().splitlines()[-1][:300] if result.stderr.strip() else ""
    if "MemoryError" in result.stderr:
        return f"memory limit exceeded ({limits.memory_mb} MB)"
    return f"the program exited with status {code}" + (f": {tail}" if tail else "")


def run_many(texts: list[str], *, workers: int | None = None, **kwargs: Any) -> list[TestReport]:
    """`run_code_tests` on every text, in parallel up to the cores."""
    workers = workers or max(1, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=min(workers, max(1, len(texts)))) as pool:
        return list(pool.map(lambda t: run_code_tests(t, **kwargs), texts))
