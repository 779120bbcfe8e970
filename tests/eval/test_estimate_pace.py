"""One estimate from Estimate to the end (issue 43 §2.4): the speed measured here at the batch an evaluation runs,
the pace of the last evaluation kept for the next one, a time left that neither jumps nor stalls, and the time
taken shown beside the estimate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.eval.estimate import (
    _throughput_at,
    calibration_complete,
    estimate,
    load_calibration,
    record_observed,
    time_left,
)
from app.eval.plan import WorkflowSource, make_plan
from app.eval.runner import Evaluation
from app.eval.store import EvalStore
from app.run.providers import fake_provider
from app.run.scheduler import Scheduler
from app.traces.store import TraceStore
from app.ui.evaluate_form import progress_html
from nodes.registry import default_registry

SAMPLER = """version: 1
name: tiny-sc
inputs:
  question: {type: text}
nodes:
- id: think
  kind: sampler
  params: {prompt: '{question}', n: 4, max_tokens: 16}
  inputs: {question: inputs.question}
outputs: {answer: think.candidates}
"""


def _plan(tmp_path: Path, rows: int = 4):  # type: ignore[no-untyped-def]
    wf = tmp_path / "tiny.yaml"
    wf.write_text(SAMPLER, encoding="utf-8")
    data = tmp_path / "tiny.jsonl"
    data.write_text("".join(json.dumps({"question": f"q{i}", "answer": "a"}) + "\n" for i in range(rows)),
                    encoding="utf-8")
    return make_plan([WorkflowSource(path=wf)], data, registry=default_registry(), metric="exact")


def test_speed_beyond_the_measured_batches_grows_as_the_last_ones_did() -> None:
    """SmolLM2 on 2 cores: 3.7 tokens/s at batch 8, 9.4 at 32 and 18 at 64 (measured). Holding batch 32's speed
    flat to 64 (as batch 8's was held before) put an estimate at twice the time or more."""
    measured = {"1": 3.5, "8": 3.7, "32": 9.4}
    at_64 = _throughput_at(measured, 64)
    assert 12.0 < at_64 <= 2 * 9.4  # grows, never faster than linearly
    assert _throughput_at(measured, 32) == pytest.approx(9.4) and _throughput_at(measured, 1) == pytest.approx(3.5)
    assert 3.7 < _throughput_at(measured, 16) < 9.4
    assert _throughput_at({"1": 60.0, "8": 50.0}, 64) == pytest.approx(50.0)  # a batch never makes it slower
    assert not calibration_complete({"decode_tps": {"1": 60.0, "8": 150.0}})  # an old calibration: measured again
    assert calibration_complete({"decode_tps": measured})


def test_the_pace_of_a_finished_evaluation_is_the_next_estimate_at_its_batch(tmp_path: Path) -> None:
    cache = tmp_path / "calibration.json"
    assert record_observed("m", 16, 900, 30.0, path=cache) is None  # no calibration to keep it beside
    cache.write_text(json.dumps({"m": {"model_id": "m", "decode_tps": {"1": 5.0, "8": 10.0, "32": 20.0}}}))
    assert record_observed("m", 16, 900, 0.2, path=cache) is None  # too short to say
    assert record_observed("m", 16, 900, 30.0, path=cache) == pytest.approx(30.0)
    calibration = load_calibration("m", path=cache)
    assert calibration is not None and calibration["decode_tps"]["32"] == 20.0  # the calibration is kept
    plan = _plan(tmp_path)  # 4 items in flight x n=4: batch 16
    est = estimate(plan, default_registry(), calibration=calibration, concurrency=8)
    assert est["batch"] == 16
    assert est["expected_s"] == pytest.approx(est["expected_completion_tokens"] / 30.0, abs=0.1)
    assert "last evaluation" in est["speed_source"] and "30.0 tokens/s" in est["assumptions"]
    measured_only = estimate(plan, default_registry(), calibration={**calibration, "observed": {}}, concurrency=8)
    assert measured_only["speed_source"] == "measured on this machine"


def test_time_left_starts_at_the_estimate_counts_down_and_follows_the_pace() -> None:
    """The newcomer's ETA (expected 1,263 s, taken 199 s) jumped from 13 min to 1 min 15 s at the first finished
    items, then stood still between them."""
    assert time_left(600.0, 0.0, 0, 10) == pytest.approx(600.0)
    assert time_left(600.0, 30.0, 0, 10) == pytest.approx(570.0)  # counts down before anything finished
    first = time_left(600.0, 40.0, 1, 10, done_at_s=40.0)  # one of ten done, fast: moves toward the pace
    later = time_left(600.0, 50.0, 1, 10, done_at_s=40.0)  # ten seconds on, nothing new finished
    assert later == pytest.approx(first - 10.0)  # no stall
    assert 400.0 < first < 560.0  # no jump to the one item's pace (360 s left)
    assert time_left(600.0, 90.0, 9, 10, done_at_s=90.0) == pytest.approx(0.1 * 600.0 + 0.9 * 100.0 - 90.0)
    assert time_left(None, 40.0, 2, 10, done_at_s=40.0) == pytest.approx(160.0)  # no estimate: the pace
    assert time_left(None, 5.0, 0, 10) is None
    assert time_left(10.0, 100.0, 5, 10, done_at_s=100.0) == pytest.approx(0.5 * 10.0 + 0.5 * 200.0 - 100.0)
    assert time_left(10.0, 300.0, 5, 10, done_at_s=100.0) == pytest.approx(300.0)  # past both: the pace as of now
    assert time_left(100.0, 5.0, 10, 10) == 0.0


def test_a_finished_evaluation_keeps_its_pace_and_shows_taken_against_estimated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAGEN_HOME", str(tmp_path / "home"))
    cache = tmp_path / "home" / "calibration.json"
    cache.parent.mkdir()
    cache.write_text(json.dumps({"fake-m": {"model_id": "fake-m", "decode_tps": {"1": 5.0, "8": 9.0}}}))
    registry = default_registry()
    plan = _plan(tmp_path, rows=3)
    traces = TraceStore(tmp_path / "traces.db")
    provide = fake_provider(latency_s=1.2)  # a run of at least a second: a pace worth keeping
    try:
        evaluation = Evaluation(plan, Scheduler(registry, provide), EvalStore(traces.engine), concurrency=3)
        evaluation.start_record({"calibrated": True, "calibration_model": "fake-m", "batch": 12, "expected_s": 7.0})
        assert evaluation.run(resume=True) == "succeeded"
        observed = (load_calibration("fake-m", path=cache) or {}).get("observed") or {}
        assert set(observed) == {"12"} and observed["12"]["tokens_per_s"] > 0
        from app.eval.results import summarize

        summary = summarize(evaluation.store.get(evaluation.eval_id))
        line = progress_html({"running": False, "status": "succeeded", "done": 3, "total": 3, "summary": summary})
        assert "took " in line and "(estimated 7.0 s)" in line
    finally:
        traces.close()


SAMPLE_RUN = """version: 1
name: sample-run
inputs:
  question: {type: text, default: 'What is 2 + 2?'}
nodes:
- id: think
  kind: sampler
  params: {prompt: '{question}', n: 8, max_tokens: 50}
  inputs: {question: inputs.question}
outputs: {answer: think.candidates}
"""


def test_a_run_is_expected_to_take_its_tokens_at_the_speed_measured_here(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run panel shows a run's expected seconds beside the time it took, from the speed measured here for its
    model at its batch (n=8: 8 x 50 tokens x 60% at 12 tokens/s = 20 s); none without a measured speed."""
    from app.eval.estimate import run_expected_s
    from app.workflow.spec import load_workflow_text
    from backends.base import ModelSpec
    from tests.ui.test_ui_service import editor_json, make_service

    workflow = load_workflow_text(SAMPLE_RUN)
    measured = {"decode_tps": {"1": 4.0, "8": 12.0, "32": 30.0}}
    assert run_expected_s(workflow, default_registry(), measured) == pytest.approx(20.0)
    assert run_expected_s(workflow, default_registry(), None) is None  # a default speed is no estimate
    monkeypatch.setenv("METAGEN_HOME", str(tmp_path / "home"))
    service = make_service(tmp_path)
    try:
        unmeasured = service.start_run(editor_json(SAMPLE_RUN), {})
        assert service.wait_run(unmeasured["run_id"], timeout=30)["expected_s"] is None
        model_id = service.scheduler.provider(ModelSpec()).model_id
        (tmp_path / "home").mkdir(exist_ok=True)
        (tmp_path / "home" / "calibration.json").write_text(json.dumps({model_id: measured}), encoding="utf-8")
        run = service.start_run(editor_json(SAMPLE_RUN), {"question": "What is 3 + 3?"})
        done = service.wait_run(run["run_id"], timeout=30)
        assert done["status"] == "succeeded" and done["expected_s"] == pytest.approx(20.0)
    finally:
        service.close()


def test_the_progress_line_says_the_time_left_or_that_it_is_past_its_estimate() -> None:
    running = {"running": True, "status": "running", "done": 0, "total": 4,
               "summary": {"estimate": {"expected_s": 8.0}}}
    assert "about 5.0 s left" in progress_html({**running, "eta_s": 5.0})
    assert "taking longer than its estimate of 8.0 s" in progress_html({**running, "eta_s": None})
