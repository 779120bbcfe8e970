"""Everything the observer saw during a run is in the store, and the store's token counts match the run's."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.run import events as ev
from app.run.events import EventRecorder
from app.run.providers import fake_provider
from app.run.scheduler import Scheduler
from app.traces import TraceStore
from app.viz import compare_runs_html
from app.workflow.spec import Workflow, load_workflow_text
from nodes.registry import default_registry

MakeScheduler = Callable[..., Scheduler]


def check_record_matches_events(record: dict, recorder: EventRecorder, result) -> None:  # type: ignore[no-untyped-def]
    run = record["run"]
    assert run["status"] == result.status
    assert run["outputs"] == result.to_json()["outputs"]
    assert run["stats"] == result.stats.to_json()

    seen_calls = recorder.of_type(ev.LM_CALL)
    assert len(record["lm_calls"]) == len(seen_calls) == result.stats.lm_calls
    for stored, event in zip(record["lm_calls"], seen_calls, strict=True):
        assert stored["node_id"] == event.node_id
        for key, value in event.data.items():
            if key == "tag":
                assert stored["tag"] == value
            else:
                assert stored[key] == value, key

    seen_notes = recorder.of_type(ev.NODE_EVENT)
    assert [(e["node_id"], e["kind"], e["data"]) for e in record["events"]] == [
        (e.node_id, e.data["kind"], {k: v for k, v in e.data.items() if k != "kind"}) for e in seen_notes]

    ended = {e.node_id: e for e in recorder.of_type(ev.NODE_END)}
    nodes = {n["node_id"]: n for n in record["nodes"]}
    assert set(nodes) == set(ended)
    for node_id, event in ended.items():
        assert nodes[node_id]["status"] == "succeeded"
        assert nodes[node_id]["outputs"] == event.data["outputs"]
        assert nodes[node_id]["duration_s"] == event.data["duration_s"]

    calls = record["lm_calls"]
    stats = result.stats
    assert sum(c["completion_tokens"] for c in calls) == stats.completion_tokens == run["completion_tokens"]
    assert sum(c["prompt_tokens_evaluated"] for c in calls) == stats.prompt_tokens_evaluated
    assert sum(c["prompt_tokens_cached"] for c in calls) == stats.prompt_tokens_cached
    # samples of one request share its prompt: the request's prompt tokens sit on its first sample
    assert sum(c["prompt_tokens"] for c in calls if c["sample_index"] == 0) == stats.prompt_tokens


def test_fake_run_round_trip(store: TraceStore, sc_workflow: Workflow, make_scheduler: MakeScheduler) -> None:
    recorder = EventRecorder()
    scheduler = make_scheduler()
    result = scheduler.run(sc_workflow, seed=3, observers=[recorder, store])
    assert result.status == "succeeded"
    record = store.get_run(result.run_id)
    check_record_matches_events(record, recorder, result)
    assert record["run"]["workflow_yaml"] == sc_workflow.to_yaml()
    assert record["run"]["workflow_hash"] == sc_workflow.semantic_hash()
    assert record["run"]["inputs"] == {"question": "What is 17 + 25?"}
    assert record["run"]["seed"] == 3
    assert record["run"]["model_ids"] == ["fake:fake"]
    assert all(c["logprobs"] and "logprob" in c["logprobs"][0] for c in record["lm_calls"])
    assert [e["kind"] for e in record["events"]] == ["vote"]
    # candidates are queryable rows, with the voter's winner marked
    voted = store.candidates(result.run_id, "vote")
    assert len(voted) == 6
    assert [c["idx"] for c in voted if c["winner"]] == [record["events"][0]["data"]["winner"]]
    assert {c["answer"] for c in voted} >= {"42", "41"}
    listed = store.list_runs()
    assert [r["id"] for r in listed] == [result.run_id]
    assert listed[0]["lm_calls"] == 6 and listed[0]["status"] == "succeeded"


def test_cache_hits_and_failures_are_recorded(store: TraceStore, sc_workflow: Workflow, sc_yaml: str,
                                               make_scheduler: MakeScheduler) -> None:
    scheduler = make_scheduler()
    first = scheduler.run(sc_workflow, observers=[store])
    second = scheduler.run(sc_workflow, observers=[store])
    nodes = {n["node_id"]: n for n in store.get_run(second.run_id)["nodes"]}
    assert {n["status"] for n in nodes.values()} == {"cached"}
    assert all(n["cache_hit"] for n in nodes.values())
    # a cached node records its params too (Compare used to list every param as changed to null)
    first_nodes = {n["node_id"]: n for n in store.get_run(first.run_id)["nodes"]}
    assert all(n["params"] and n["params"] == first_nodes[nid]["params"] for nid, n in nodes.items())
    assert "Same workflow, inputs and seed." in compare_runs_html(store.get_run(first.run_id),
                                                                  store.get_run(second.run_id))
    assert store.get_run(second.run_id)["lm_calls"] == []
    assert store.get_run(first.run_id)["run"]["lm_calls"] == 6

    unscored_weighted_vote = load_workflow_text(sc_yaml.replace("method: majority", "method: weighted"))
    failed = make_scheduler().run(unscored_weighted_vote, observers=[store])
    assert failed.status == "failed"
    record = store.get_run(failed.run_id)
    assert record["run"]["status"] == "failed" and "scores" in record["run"]["error"]
    vote = next(n for n in record["nodes"] if n["node_id"] == "vote")
    assert vote["status"] == "failed" and vote["cause"] == "NodeError" and vote["duration_s"] >= 0


def test_wal_mode_and_a_reader_during_a_run(tmp_path: Path, sc_workflow: Workflow) -> None:
    db = tmp_path / "t.db"
    writer = TraceStore(db)
    reader = TraceStore(db)
    reader_saw_it = threading.Event()

    def reply_once_the_reader_looked(prompt: str, seed: int) -> str:
        reader_saw_it.wait(60)  # the run stays in flight until the reader has seen it
        return "Answer: 42"

    scheduler = Scheduler(default_registry(), fake_provider(reply_fn=reply_once_the_reader_looked))
    results = []
    thread = threading.Thread(target=lambda: results.append(scheduler.run(sc_workflow, observers=[writer])))
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not (reader.list_runs() and reader.get_run(reader.list_runs()[0]["id"])["nodes"]):
            assert time.monotonic() < deadline, "the reader never saw the run while it was going"
            time.sleep(0.02)
        live = reader.get_run(reader.list_runs()[0]["id"])
        assert live["run"]["status"] == "running" and live["nodes"][0]["status"] == "running"
        assert reader.list_runs()[0]["status"] == "running"
    finally:
        reader_saw_it.set()
        thread.join()
    assert reader.get_run(results[0].run_id)["run"]["status"] == "succeeded"
    writer.close()
    reader.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_parallel_runs_share_one_store(store: TraceStore, sc_workflow: Workflow,
                                       make_scheduler: MakeScheduler) -> None:
    scheduler = make_scheduler(latency_s=0.05)
    results = []
    lock = threading.Lock()

    def go(seed: int) -> None:
        result = scheduler.run(sc_workflow, seed=seed, observers=[store], use_cache=False)
        with lock:
            results.append(result)

    threads = [threading.Thread(target=go, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    for result in results:
        record = store.get_run(result.run_id)
        assert record["run"]["status"] == "succeeded"
        assert len(record["lm_calls"]) == 6
        assert {c["node_id"] for c in record["lm_calls"]} == {"think"}


REAL_MODEL_WORKFLOW = """\
version: 1
name: sc-real
models:
  main: {source: bundled, n_ctx: 1024}
inputs:
  question: {type: text, default: "What is 2 + 3?"}
nodes:
  - id: think
    kind: sampler
    params: {n: 3, temperature: 0.8, max_tokens: 12, logprobs: true,
             prompt: "{question} Answer with a number."}
    inputs: {question: inputs.question}
  - id: vote
    kind: voter
    params: {method: majority, extract: last_number}
    inputs: {candidates: think.candidates}
  - id: check
    kind: generator
    params: {max_tokens: 8, prompt: "{question} The answer is {answer}. Is that right?"}
    inputs: {question: inputs.question, answer: vote.answer}
outputs:
  answer: vote.answer
"""


@pytest.mark.model
def test_real_model_run_round_trip(llama_provide: Any, store: TraceStore) -> None:
    from app.viz import run_summary, token_view_html

    recorder = EventRecorder(skip=(ev.TOKEN,))
    scheduler = Scheduler(default_registry(), llama_provide)
    result = scheduler.run(load_workflow_text(REAL_MODEL_WORKFLOW), seed=1, observers=[recorder, store])
    assert result.status == "succeeded", result.error
    record = store.get_run(result.run_id)
    check_record_matches_events(record, recorder, result)
    assert len(record["lm_calls"]) == 4
    model_ids = record["run"]["model_ids"]
    assert len(model_ids) == 1 and model_ids[0] != "fake:fake"
    samples = [c for c in record["lm_calls"] if c["node_id"] == "think"]
    # three samples of one request: the prompt is evaluated once, on the first sample
    assert [c["sample_index"] for c in samples] == [0, 1, 2]
    assert samples[0]["prompt_tokens"] > 0 and all(c["prompt_tokens_evaluated"] == 0 for c in samples[1:])
    for call in samples:
        assert call["logprobs"] and len(call["logprobs"]) == call["completion_tokens"]
        assert all(lp["logprob"] <= 0 for lp in call["logprobs"])
        assert token_view_html(record, call["call_id"]).count('class="mg-tok"') == len(call["logprobs"])
    summary = run_summary(record)
    assert summary["completion_tokens"] == result.stats.completion_tokens
    assert summary["prompt_tokens_evaluated"] == result.stats.prompt_tokens_evaluated
    assert summary["tokens_saved_by_prefix_sharing"] >= 2 * samples[0]["prompt_tokens"]
