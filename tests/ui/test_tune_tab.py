"""The Tune tab's parts without a browser: the form checked into TuneOptions, tunes on threads of their own (progress
kept for polling, cancel, one visitor's tunes hidden from another), and the race drawn (dropped rows greyed with the
reason, the CI band narrowing as items come in). A scripted tuner stands in for `StudioService.tune` here."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest

from app.eval.tune.api import TuneOptions, TuneProgress, TuneResult
from app.service.errors import UserError
from app.service.tune_jobs import CANCELLED, DONE, FAILED, RUNNING, TuneJobs
from app.ui.tune_tab import _policy_path_of, options_from_form
from app.viz.tune_race import held_out_html, race_html


def progress(n: int, rows: list[dict[str, Any]], phase: str = "dev") -> TuneProgress:
    return TuneProgress(phase=phase, rows=rows, tokens_used=100 * n, eta_s=30.0, round=1, done=n, total=40)


ROUND_1 = [
    {"label": "self_consistency n=4", "status": "running", "n_items": 4, "accuracy": 0.5, "ci": [0.15, 0.85],
     "tokens_per_item": 400.0, "reason": ""},
    {"label": "chain_of_thought", "status": "running", "n_items": 4, "accuracy": 0.25, "ci": [0.05, 0.7],
     "tokens_per_item": 90.0, "reason": ""},
]
ROUND_2 = [
    {**ROUND_1[0], "n_items": 16, "accuracy": 0.5, "ci": [0.28, 0.72]},
    {**ROUND_1[1], "n_items": 16, "accuracy": 0.25, "ci": [0.1, 0.49]},
    {"label": "self_consistency n=32", "status": "dropped", "n_items": 4, "accuracy": 0.5, "ci": [0.15, 0.85],
     "tokens_per_item": 3200.0, "reason": "over budget: 3,200 tokens per item > 2,000"},
]


def result() -> TuneResult:
    return TuneResult(
        tune_id="t1", candidates=[], split={"dev": [0, 1, 2, 3], "test": [4, 5, 6, 7]},
        recommended={"label": "self_consistency n=4", "path": "tuned/arithmetic-bundled.yaml",
                     "dev": {"accuracy": 0.5, "tokens_per_item": 400.0},
                     "test": {"accuracy": 0.5, "ci": [0.2, 0.8], "tokens_per_item": 410.0, "n": 4}},
        baseline={"label": "chain_of_thought", "test": {"accuracy": 0.25}}, comparison={"diff": 0.25},
        front=[], tune_tokens=12345,
        held_out=[{"label": "self_consistency n=4", "accuracy": 0.5, "ci": [0.2, 0.8], "tokens_per_item": 410.0,
                   "seconds_per_item": 1.5, "n": 4},
                  {"label": "chain_of_thought", "accuracy": 0.25, "ci": [0.05, 0.7], "tokens_per_item": 95.0,
                   "seconds_per_item": 0.4, "n": 4}],
        comparisons=[{"sentence": "self_consistency n=4 vs greedy: +25 points (-20..+70), p = 0.50"}],
        verdict="No strategy beats greedy significantly on test; greedy is recommended.")


class ScriptedTuner:
    """Reports two rounds of a race, then waits for `release` (or a cancel) before returning its result."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.reported = threading.Event()

    def __call__(self, options: TuneOptions, *, on_progress: Any, cancel: Any) -> TuneResult:
        on_progress(progress(8, ROUND_1))
        on_progress(progress(32, ROUND_2))
        self.reported.set()
        while not self.release.wait(0.01):
            if cancel.cancelled:
                raise UserError("the tune was cancelled")
        return result()


def wait_state(jobs: TuneJobs, job_id: str, owner: str | None = None) -> str:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        state = jobs.get(job_id, owner).state
        if state != RUNNING:
            return state
        time.sleep(0.01)
    raise AssertionError("the tune never ended")


def test_the_form_becomes_tune_options() -> None:
    options = options_from_form("arithmetic", "", " ", 2000.0, 20.0, ["self_consistency"])
    assert options == TuneOptions(data="arithmetic", metric=None, model=None, budget_tokens=2000, limit=20,
                                  candidates=["self_consistency"])
    assert options_from_form("code", "tests", "my.gguf", None, None, []).model == "my.gguf"
    assert options_from_form("code", "", "", 2000, 8, [], " think.n=2,4 ; rounds=1 ;").axes == ["think.n=2,4",
                                                                                                "rounds=1"]
    assert not options_from_form("code", "", "", 2000, 8, []).adaptive
    assert options_from_form("code", "", "", 2000, 8, [], "", True).adaptive  # the adaptive policy checkbox


def test_the_adaptive_policy_opens_only_when_the_tune_built_one() -> None:
    plain = result()
    assert _policy_path_of(plain) is None and _policy_path_of(None) is None
    plain.adaptive = {"status": "none", "reason": "no choice fits the budget"}
    assert _policy_path_of(plain) is None
    plain.adaptive = {"status": "built", "path": "tuned/arithmetic-bundled-adaptive.yaml"}
    assert _policy_path_of(plain) == "tuned/arithmetic-bundled-adaptive.yaml"


@pytest.mark.parametrize(("form", "says"), [
    (("", "", "", 2000, 20, []), "pick a dataset"),
    (("arithmetic", "", "", 0, 20, []), "positive"),
    (("arithmetic", "", "", 2000, 2, []), "at least 4 items"),
    (("arithmetic", "", "", "lots", 20, []), "whole numbers"),
])
def test_a_bad_form_says_what_to_fix(form: tuple[Any, ...], says: str) -> None:
    with pytest.raises(UserError, match=says):
        options_from_form(*form)


def test_a_tune_runs_on_its_own_thread_and_its_race_is_polled() -> None:
    tuner = ScriptedTuner()
    jobs = TuneJobs(tuner)
    try:
        job = jobs.start(TuneOptions(data="arithmetic"), owner="me")
        assert tuner.reported.wait(5)
        snap = jobs.get(job.job_id, "me").snapshot()
        assert snap["state"] == RUNNING and snap["progress"]["done"] == 32 and snap["result"] is None
        with pytest.raises(UserError, match="no tune"):
            jobs.get(job.job_id, "someone else")  # one visitor's tunes are its own
        tuner.release.set()
        assert wait_state(jobs, job.job_id, "me") == DONE
        assert jobs.get(job.job_id, "me").snapshot()["result"]["recommended"]["label"] == "self_consistency n=4"
    finally:
        tuner.release.set()
        jobs.close()


def test_cancel_stops_the_tune_and_failures_are_reported() -> None:
    tuner = ScriptedTuner()
    jobs = TuneJobs(tuner)
    try:
        job = jobs.start(TuneOptions(data="arithmetic"))
        assert tuner.reported.wait(5)
        jobs.cancel(job.job_id)
        assert wait_state(jobs, job.job_id) == CANCELLED
        assert "cancelled" in (jobs.get(job.job_id).error or "")

        def broken(options: TuneOptions, **_: Any) -> TuneResult:
            raise RuntimeError("no candidate binds")

        failing = TuneJobs(broken)
        bad = failing.start(TuneOptions(data="arithmetic"))
        assert wait_state(failing, bad.job_id) == FAILED
        assert "no candidate binds" in (failing.get(bad.job_id).error or "")
        failing.close()
    finally:
        jobs.close()


def _ci_width(html: str, label: str) -> float:
    row = re.search(rf'data-label="{re.escape(label)}".*?data-ci-width="([0-9.]+)"', html, re.S)
    assert row, html
    return float(row.group(1))


def test_the_race_greys_dropped_rows_with_the_reason_and_the_ci_narrows() -> None:
    first = race_html({**progress(8, ROUND_1).__dict__})
    second = race_html({**progress(32, ROUND_2).__dict__})
    assert first.count('data-testid="tune-row"') == 2 and second.count('data-testid="tune-row"') == 3
    assert _ci_width(second, "self_consistency n=4") < _ci_width(first, "self_consistency n=4")
    dropped = re.search(r'<tr class="mg-tune-row mg-tune-dropped"[^>]*data-label="self_consistency n=32".*?</tr>',
                        second, re.S)
    assert dropped and "over budget: 3,200 tokens per item &gt; 2,000" in dropped.group(0)
    assert second.index("self_consistency n=4") < second.index("self_consistency n=32")  # the alive ones first
    assert "2 of 3 candidates left" in second and "32/40 runs" in second and "about 30 s left" in second
    assert "Choosing the candidates" in race_html(None)


def test_the_held_out_table_marks_the_recommended_one_and_greedy() -> None:
    html = held_out_html(result().to_json())
    assert "self_consistency n=4 ★ recommended" in html and "chain_of_thought (greedy)" in html
    assert "4 test items" in html and "4 dev items" in html and "12,345" in html
    assert "No strategy beats greedy significantly" in html and "p = 0.50" in html


def test_a_finished_race_shows_each_candidates_final_status_and_the_skipped_ones() -> None:
    candidates = [{"label": "self_consistency n=4", "status": "finalist", "reason": ""},
                  {"label": "chain_of_thought", "status": "finalist", "reason": ""},
                  {"label": "self_consistency n=32", "status": "dropped", "dropped_after": 4,
                   "reason": "over budget: 3,200 tokens per item > 2,000"},
                  {"label": "code_best_of_n", "status": "skipped",
                   "reason": "its input public_tests binds to no column"}]
    html = race_html({**progress(32, ROUND_2).__dict__}, "done", {"candidates": candidates})
    assert re.findall(r'data-status="(\w+)" data-label="([^"]+)"', html) == [
        ("finalist", "self_consistency n=4"), ("finalist", "chain_of_thought"), ("dropped", "self_consistency n=32"),
        ("skipped", "code_best_of_n")]
    assert "in the race" not in html
    assert "binds to no column" in html and "as it ended (done)" in html and "2 of 4 finalists" in html


def test_held_out_rows_from_the_shared_pool_are_marked_with_the_footnote() -> None:
    data = result().to_json()
    assert "tune-footnote" not in held_out_html(data)  # no pooled row: no mark, no footnote
    data["held_out"][0]["note"] = "reused from the shared pool"
    html = held_out_html(data)
    rows = re.findall(r'<tr data-testid="tune-held-out-row">.*?</tr>', html, re.S)
    assert 'class="mg-tune-note"' in rows[0] and "mg-tune-note" not in rows[1]  # only the pooled row: `*`
    assert html.count('data-testid="tune-footnote"') == 1
    assert "* reused from the shared pool: its tokens per item count the pooled samples as if it ran alone" in html


def test_the_plans_warnings_show_in_the_progress_area_before_the_first_run() -> None:
    warning = "best_of_n: its verifier receives the column the metric grades with"

    class WarningTuner(ScriptedTuner):
        def __call__(self, options: TuneOptions, *, on_progress: Any, cancel: Any) -> TuneResult:
            on_progress(TuneProgress(phase="dev", rows=[], tokens_used=0, eta_s=None, round=1, total=40,
                                     warnings=[warning]))
            self.reported.set()
            self.release.wait(5)
            return result()

    tuner = WarningTuner()
    jobs = TuneJobs(tuner)
    try:
        job = jobs.start(TuneOptions(data="arithmetic"), owner="me")
        assert tuner.reported.wait(5)
        html = race_html(jobs.get(job.job_id, "me").snapshot()["progress"], RUNNING)  # what the tab's poll shows
    finally:
        tuner.release.set()
        jobs.close()
    block = re.search(r'<div class="mg-tune-warnings" data-testid="tune-warnings">.*?</div>', html, re.S)
    assert block and "its verifier receives the column the metric grades with" in block.group(0)
    assert html.index("tune-head") < html.index("tune-warnings") < html.index("<table")
    assert "tune-warnings" not in race_html({**progress(8, ROUND_1).__dict__})  # none: no block
