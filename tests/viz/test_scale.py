"""Views stay readable at 1,000 candidates and 10,000 LM calls: they aggregate or paginate."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest

import app.viz as viz
from app.run import events as ev
from app.run.events import Event
from app.traces import TraceStore
from app.viz.samples import MAX_BARS
from app.viz.timeline import MAX_LANES, MAX_REQUEST_BARS, TIME_BINS

N_CANDIDATES = 1000
N_CALLS = 10_000


def build_big_run(store: TraceStore, run_id: str, samples_per_request: int) -> dict[str, Any]:
    rng = random.Random(7)
    t0 = 1_700_000_000.0
    emit = store.on_event
    emit(Event(ev.RUN_START, run_id, None, {"workflow": "big", "workflow_yaml": "version: 1\n", "inputs": {}},
               time=t0))
    nodes = ["sample_a", "sample_b", "search"]
    for k, node in enumerate(nodes):
        emit(Event(ev.NODE_START, run_id, node, {"kind": "sampler", "params": {"n": 1000}, "inputs": {}},
                   time=t0 + k))
    for i in range(N_CALLS):
        request = i // samples_per_request
        node = nodes[request % 3]
        start = t0 + request * 0.01
        emit(Event(ev.LM_CALL, run_id, node, {
            "call_id": f"{node}#{i}", "purpose": "generate", "model": "fake:m",
            "sample_index": i % samples_per_request, "n": samples_per_request, "parent": None, "tag": {},
            "prompt": f"prompt {request}", "completion": f"reply {i}", "prompt_tokens": 20,
            "prompt_tokens_evaluated": 20 if i % samples_per_request == 0 else 0, "prompt_tokens_cached": 0,
            "completion_tokens": rng.randint(1, 60), "logprobs": None, "seed": i, "finish_reason": "eog",
            "start": start, "end": start + rng.uniform(0.01, 2.0), "prefill_s": 0.0, "decode_s": 0.0}))
    answers = [str(rng.randint(0, 300)) for _ in range(N_CANDIDATES)]
    cset = {"__type__": "candidates", "prompt": "p", "winner": 3, "meta": {}, "candidates": [
        {"text": f"long reasoning {i} " * 20, "index": i, "source": "sample_a", "seed": i, "answer": answers[i],
         "score": rng.random(), "scores": {}, "cluster": None, "finish_reason": "eog", "completion_tokens": 40,
         "logprobs": None, "meta": {}} for i in range(N_CANDIDATES)]}
    emit(Event(ev.NODE_END, run_id, "sample_a", {"kind": "sampler", "outputs": {"candidates": cset},
                                                  "duration_s": 100.0}, time=t0 + 100))
    tree = [{"id": 0, "parent": None, "depth": 0, "text": "", "score": None, "pruned": False, "chosen": True}]
    for i in range(1, N_CANDIDATES):
        parent = rng.randrange(0, i)
        tree.append({"id": i, "parent": parent, "depth": tree[parent]["depth"] + 1, "text": f"step {i}",
                     "score": rng.random(), "pruned": rng.random() < 0.5, "chosen": False})
    emit(Event(ev.NODE_EVENT, run_id, "search", {"kind": "tree", "nodes": tree}))
    for node in nodes[1:]:
        emit(Event(ev.NODE_END, run_id, node, {"kind": "sampler", "outputs": {}, "duration_s": 100.0},
                   time=t0 + 101))
    emit(Event(ev.RUN_END, run_id, None, {"status": "succeeded", "outputs": {}, "stats": {"lm_calls": N_CALLS}},
               time=t0 + 102))
    return store.get_run(run_id)


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> TraceStore:
    store = TraceStore(tmp_path_factory.mktemp("big") / "t.db")
    yield store  # type: ignore[misc]
    store.close()


def call_bars(fig: Any) -> Any:
    return next(t for t in fig.data if t.name == "LM calls")


def test_timeline_groups_samples_into_requests(big_store: TraceStore) -> None:
    record = build_big_run(big_store, "batched", samples_per_request=16)
    assert len(record["lm_calls"]) == N_CALLS
    fig = viz.timeline_figure(record)
    bars = call_bars(fig)
    assert len(bars.x) == -(-N_CALLS // 16) <= MAX_REQUEST_BARS
    assert "per request" in fig.layout.title.text
    lanes = {y for y in bars.y}
    assert len(lanes) <= 3 * MAX_LANES


def test_timeline_bins_ten_thousand_single_requests(big_store: TraceStore) -> None:
    record = build_big_run(big_store, "single", samples_per_request=1)
    fig = viz.timeline_figure(record)
    bars = call_bars(fig)
    assert len(bars.x) <= 3 * TIME_BINS
    assert "time bins" in fig.layout.title.text
    counted = sum(int(re.search(r"<b>(\d+) calls", h).group(1)) for h in bars.hovertext)  # type: ignore[union-attr]
    assert counted == N_CALLS


def test_samples_paginate_and_histogram_aggregates(big_store: TraceStore) -> None:
    record = big_store.get_run("batched")
    fig = viz.sample_view(record, "sample_a")
    table = next(t for t in fig.data if t.type == "table")
    assert len(table.cells.values[0]) == 200
    last = viz.sample_view(record, "sample_a", page=4)
    assert list(next(t for t in last.data if t.type == "table").cells.values[0]) == list(range(800, 1000))
    votes = next(t for t in fig.data if t.type == "bar")
    assert len(votes.x) == MAX_BARS
    tail = re.search(r"\+ (\d+) more answers with (\d+) votes", fig.layout.annotations[0].text)
    assert tail is not None
    assert len(votes.x) + int(tail.group(1)) == len(set(c["answer"] for c in viz.sample_rows(record, "sample_a")))
    assert sum(votes.y) + int(tail.group(2)) == N_CANDIDATES
    html = viz.samples_html(record, "sample_a")
    assert html.count("<tr class=") == 300 and "700 more candidates" in html


def test_big_tree_and_page(big_store: TraceStore, tmp_path: Path) -> None:
    record = big_store.get_run("batched")
    fig = viz.search_tree_figure(record, "search")
    assert fig is not None
    points = sum(len(t.x) for t in fig.data if t.name in ("kept", "pruned"))
    assert points == N_CANDIDATES
    page = viz.export_html(record)
    calls_table = re.search(r"<table class=mg-calls>.*?</table>", page, re.S)
    assert calls_table is not None and calls_table.group(0).count("<tr>") == 500 + 1  # + the header row
    assert "Showing the first 500 of 10000 calls" in page
    assert len(page) < 12_000_000


def test_the_winner_always_has_a_bar() -> None:
    counts = [(str(i), 100 - i, None) for i in range(60)]
    cands = [{"text": a, "answer": a} for a, n, _ in counts for _ in range(n)]
    winner = next(i for i, c in enumerate(cands) if c["answer"] == "55")
    record = {"run": {"id": "r"}, "events": [], "lm_calls": [], "nodes": [{"node_id": "v", "outputs": {
        "candidates": {"__type__": "candidates", "candidates": cands, "winner": winner}}}]}
    bars = next(t for t in viz.sample_view(record).data if t.type == "bar")
    assert "55" in bars.x and len(bars.x) == MAX_BARS
    assert "+ 20 more answers" in viz.sample_view(record).layout.annotations[0].text
