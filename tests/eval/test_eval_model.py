"""Evaluations and the sample cache on the real bundled model (llama.cpp): incremental N, sweep prefixes,
invalidation, an evaluation end to end with its plots, and a SIGKILL followed by --resume."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.eval.plan import WorkflowSource, make_plan
from app.eval.results import summarize
from app.eval.runner import Evaluation
from app.eval.store import EvalStore
from app.run.events import EventRecorder
from app.run.providers import llama_provider
from app.run.scheduler import SUCCEEDED, Scheduler
from app.traces.store import TraceStore
from app.viz.evaluation import accuracy_curve_figure, evaluation_report_html, pass_at_k_figure
from app.workflow.model_specs import model_specs
from app.workflow.spec import load_workflow_text
from nodes.base import CandidateSet
from nodes.registry import default_registry

pytestmark = pytest.mark.model
ROOT = Path(__file__).resolve().parents[2]

SAMPLER_YAML = """
version: 1
name: tiny-sc
models: {{main: {{source: bundled}}}}
inputs:
  question: {{type: text, default: "What is 2 + 3?"}}
nodes:
- id: think
  kind: sampler
  model: main
  params: {{prompt: "{{question}} Answer with a number.", n: {n}, temperature: {temperature}, max_tokens: 12,
           extract: last_number, normalize: number}}
  inputs: {{question: inputs.question}}
- id: vote
  kind: voter
  params: {{method: majority, extract: last_number, normalize: number}}
  inputs: {{candidates: think.candidates}}
outputs: {{answer: vote.answer}}
"""


def sampler_workflow(n: int, temperature: float = 0.8) -> Any:
    return load_workflow_text(SAMPLER_YAML.format(n=n, temperature=temperature))


@pytest.fixture(scope="module")
def scheduler() -> Iterator[Scheduler]:
    provider = llama_provider()
    yield Scheduler(default_registry(), provider)
    provider.close()  # its engine worker ends with the module


def _run(scheduler: Scheduler, wf: Any, question: str = "What is 2 + 3?") -> tuple[list[str], int, dict[str, Any]]:
    """(sample texts, LM calls made, engine counters after) of one run."""
    recorder = EventRecorder(skip=("token",))
    result = scheduler.run(wf, {"question": question}, seed=7, observers=[recorder])
    assert result.status == SUCCEEDED, result.error
    cset = result.node_outputs["think"]["candidates"]
    assert isinstance(cset, CandidateSet)
    calls = [e for e in recorder.of_type("lm_call") if e.data["purpose"] == "generate"]
    backend = scheduler.provider(model_specs(wf)["main"])
    return cset.texts(), len(calls), backend.info()["engine"]


def test_raising_n_draws_only_the_new_samples_and_lowering_it_draws_none(scheduler: Scheduler) -> None:
    question = "What is 6 + 1?"
    two, calls_two, engine_a = _run(scheduler, sampler_workflow(2), question)
    assert calls_two == 2
    four, calls_four, engine_b = _run(scheduler, sampler_workflow(4), question)
    assert calls_four == 2, "raising n from 2 to 4 must draw only samples 2 and 3"
    assert four[:2] == two, "the first samples of the larger draw are the ones drawn before"
    assert engine_b["completion_tokens"] > engine_a["completion_tokens"]
    one, calls_one, engine_c = _run(scheduler, sampler_workflow(1), question)
    assert calls_one == 0 and one == two[:1]
    assert engine_c["requests"] == engine_b["requests"], "lowering n must not reach the engine"
    assert engine_c["completion_tokens"] == engine_b["completion_tokens"]


def test_editing_the_prompt_or_temperature_invalidates_the_samples(scheduler: Scheduler) -> None:
    question = "What is 5 + 2?"
    _run(scheduler, sampler_workflow(2, 0.8), question)
    _, calls_same, _ = _run(scheduler, sampler_workflow(2, 0.8), question)
    assert calls_same == 0
    _, calls_temp, _ = _run(scheduler, sampler_workflow(2, 0.9), question)
    assert calls_temp == 2, "a new temperature draws new samples"
    _, calls_prompt, _ = _run(scheduler, sampler_workflow(2, 0.8), question + " Be brief.")
    assert calls_prompt == 2, "a new prompt draws new samples"


def _dataset(tmp_path: Path, rows: int) -> Path:
    path = tmp_path / "tiny.jsonl"
    path.write_text("".join(json.dumps({"question": f"What is {i} + {i + 1}?", "answer": str(2 * i + 1)}) + "\n"
                            for i in range(rows)), encoding="utf-8")
    return path


def test_an_evaluation_sweep_uses_the_first_k_samples_of_its_largest_draw(llama_provide: Any, tmp_path: Path) -> None:
    wf_path = tmp_path / "tiny.yaml"
    wf_path.write_text(sampler_workflow(2).to_yaml(), encoding="utf-8")
    registry = default_registry()
    plan = make_plan([WorkflowSource(path=wf_path)], _dataset(tmp_path, 3), registry=registry, metric="number",
                     sweeps=["think.n=1,2"])
    scheduler = Scheduler(registry, llama_provide)
    traces = TraceStore(tmp_path / "traces.db")
    store = EvalStore(traces.engine)
    evaluation = Evaluation(plan, scheduler, store, observers=[traces], concurrency=3)
    assert evaluation.run() == "succeeded"
    record = store.get(evaluation.eval_id)
    summary = summarize(record)
    assert [p["params"] for p in summary["points"]] == [{"think.n": 1}, {"think.n": 2}]
    assert all(p["total"] == 3 for p in summary["points"])
    # the n=2 point drew every sample; the n=1 point found its one sample in the cache
    by_point = {p["params"]["think.n"]: p for p in summary["points"]}
    assert by_point[1]["completion_tokens"] == 0 and by_point[2]["completion_tokens"] > 0
    # costed as if alone: the n=1 point reused the first sample of each item's n=2 draw
    assert 0 < by_point[1]["cost_tokens"] <= by_point[2]["cost_tokens"] == by_point[2]["completion_tokens"]
    traces.flush()
    for item in range(3):
        runs = {r["point_idx"]: r["run_id"] for r in record["items"] if r["item_idx"] == item}
        small = traces.candidates(runs[0], "think")
        large = traces.candidates(runs[1], "think")
        assert [c["text"] for c in small] == [c["text"] for c in large][:1]
    assert summary["pass_at_k"] and summary["pass_at_k"][0]["k"] == [1, 2]
    assert accuracy_curve_figure(summary) is not None and pass_at_k_figure(summary) is not None
    report = evaluation_report_html(summary)
    assert report.startswith("<!DOCTYPE html>") and "think.n=2" in report
    traces.close()


def test_a_killed_evaluation_resumes_and_runs_every_item_exactly_once(tmp_path: Path) -> None:
    wf_path = tmp_path / "tiny.yaml"
    wf_path.write_text(sampler_workflow(2).to_yaml(), encoding="utf-8")
    data = _dataset(tmp_path, 8)
    db = tmp_path / "traces.db"
    env = {**os.environ, "METAGEN_HOME": str(tmp_path / "home")}
    cmd = [sys.executable, "-m", "app.cli", "eval", str(wf_path), "--data", str(data), "--metric", "number",
           "--db", str(db), "--concurrency", "2", "-q"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    done = 0
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.3)
        try:
            with sqlite3.connect(db, timeout=5) as conn:
                done = conn.execute("SELECT count(*) FROM eval_items").fetchone()[0]
        except sqlite3.Error:
            continue
        if done >= 2:
            break
    assert proc.poll() is None, f"the evaluation ended before it could be killed: {proc.stderr.read()!r}"
    assert 2 <= done < 8
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        eval_id, status = conn.execute("SELECT id, status FROM evaluations").fetchone()
    assert status == "running"
    resumed = subprocess.run([sys.executable, "-m", "app.cli", "eval", "--resume", eval_id, "--db", str(db),
                              "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["status"] == "succeeded" and result["points"][0]["total"] == 8
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute("SELECT item_idx, count(*) FROM eval_items GROUP BY item_idx").fetchall()
        runs = conn.execute("SELECT count(DISTINCT run_id) FROM eval_items").fetchone()[0]
    assert sorted(rows) == [(i, 1) for i in range(8)]
    assert runs == 8
