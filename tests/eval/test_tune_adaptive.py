"""`metagen tune --adaptive` (scripted backend): the probe's quantile bins and the candidate per bin are fixed on dev
within the budget, the held-out labels never change them, and the policy is written as a workflow (probe + route +
branches) that validates, runs, and beats the best single strategy the budget allows."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from app.eval.store import EvalStore
from app.eval.tune.adaptive import Probe, allocate, eligible, quantile_bins
from app.eval.tune.api import TuneOptions
from app.eval.tune.race import ItemResult
from app.eval.tune.split import split_items
from app.eval.tune.writer import BRANCH_ROLE, POLICY_ROLE
from app.run.providers import fake_provider
from app.service.studio import StudioService
from app.traces.store import TraceStore
from app.workflow.problems import errors
from app.workflow.spec import load_workflow
from app.workflow.subworkflows import ChildLoader
from app.workflow.validation import validate
from nodes.registry import default_registry

N_ITEMS = 40
WORKFLOW = """version: 1
name: {name}
models:
  main: {{source: fake}}
inputs:
  question: {{type: text, default: Q1}}
nodes:
- id: think
  kind: generator
  model: main
  params: {{prompt: '[{name}] {{question}}', max_tokens: 100}}
  inputs: {{question: inputs.question}}
outputs: {{answer: think.text}}
"""


def _hard(item: int) -> bool:
    return item % 2 == 1


def _reply(prompt: str, seed: int) -> str:
    """Greedy chain_of_thought is cheap and right on easy items only; on hard ones its samples scatter (low
    agreement). `big` is right everywhere at 60 words: over a 60-token budget on its own."""
    name = re.search(r"\[(\w+)\]", prompt).group(1)
    item = int(re.search(r"Q(\d+)", prompt).group(1))
    if name == "big":
        return " ".join(["so"] * 60) + f" Answer: {item}"
    return f"so Answer: {item + 1000 + seed % 7}" if _hard(item) else f"so Answer: {item}"


def _tune(tmp_path: Path, shuffle_test_labels: bool = False, **options: Any):
    examples = tmp_path / "examples"
    examples.mkdir(parents=True)
    for name in ("chain_of_thought", "big"):
        (examples / f"{name}.yaml").write_text(WORKFLOW.format(name=name))
    rows = [{"question": f"Q{i}", "answer": str(i)} for i in range(N_ITEMS)]
    if shuffle_test_labels:  # the held-out answers permuted among the held-out items
        _, test = split_items(N_ITEMS, 0.5, 0)
        answers = [rows[i]["answer"] for i in test]
        random.Random(5).shuffle(answers)
        for i, answer in zip(test, answers, strict=True):
            rows[i]["answer"] = answer
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    service = StudioService(provider=fake_provider(reply_fn=_reply), workflows_dir=tmp_path / "wf",
                            examples_dir=examples, trace_db=tmp_path / "traces.db")
    try:
        return service.tune(TuneOptions(data=str(data), metric="number", budget_tokens=60,
                                        out=str(tmp_path / "out.yaml"), adaptive=True, **options))
    finally:
        service.close()


def test_quantile_bins_split_dev_scores_and_merge_ties() -> None:
    assert quantile_bins([0.25, 0.25, 0.5, 0.5, 0.75, 0.75, 1.0, 1.0, 1.0]) == [0.5, 1.0]  # 2, 4, 3 items
    assert quantile_bins([1.0] * 8) == []  # every item alike: one bin
    assert quantile_bins([0.5, 1.0, 1.0, 1.0, 1.0, 1.0]) == []  # a bin of one item is no bin
    assert quantile_bins([0.5, 0.5, 1.0, 1.0]) == [1.0]


def _scripted() -> tuple[dict[int, Probe], dict[str, dict[int, ItemResult]]]:
    """Items 0-3 easy (probe 1.0), 4-7 hard (probe 0.25); cheap is right on easy ones, big on all."""
    probes = {i: Probe(1.0 if i < 4 else 0.25, 10, 0.1) for i in range(8)}
    results = {"cheap": {i: ItemResult(1.0 if i < 4 else 0.0, 10, 0.1) for i in range(8)},
               "big": {i: ItemResult(1.0, 100, 1.0) for i in range(8)}}
    return probes, results


def test_allocate_spends_on_the_hard_bin_within_the_budget() -> None:
    probes, results = _scripted()
    got = allocate([1.0], probes, results, ["cheap", "big"], list(range(8)), budget_tokens=70)
    assert got is not None and got.branches == ["big", "cheap"] and got.accuracy == 1.0
    assert got.tokens_per_item == pytest.approx(10 + (100 * 4 + 10 * 4) / 8)
    assert allocate([1.0], probes, results, ["cheap", "big"], list(range(8)), budget_tokens=30).branches == [
        "cheap", "cheap"]
    assert allocate([1.0], probes, results, ["cheap", "big"], list(range(8)), budget_tokens=5) is None


def test_allocate_reads_dev_items_only() -> None:
    probes, results = _scripted()
    dev = list(range(8))
    before = allocate([1.0], probes, results, ["cheap", "big"], dev, budget_tokens=70)
    for label in results:  # test items (8-11) where cheap is perfect and big always wrong: nothing may change
        results[label].update({i: ItemResult(1.0 if label == "cheap" else 0.0, 1, 0.0) for i in range(8, 12)})
    probes.update({i: Probe(0.25, 1, 0.0) for i in range(8, 12)})
    assert allocate([1.0], probes, results, ["cheap", "big"], dev, budget_tokens=70) == before
    assert eligible(["cheap", "big", "partial"], {**results, "partial": {0: ItemResult(1, 1, 1)}}, dev) == [
        "cheap", "big"]


def test_adaptive_tune_beats_the_best_single_strategy_within_the_budget(tmp_path: Path) -> None:
    result = _tune(tmp_path)
    data = result.to_json()
    status = {c["label"]: c["status"] for c in data["candidates"]}
    assert status["big"] == "dropped"  # over budget alone...
    adaptive = data["adaptive"]
    assert adaptive["status"] == "built", adaptive
    assert [b["label"] for b in adaptive["branches"]] == ["big", "chain_of_thought"]  # ...affordable on hard items
    assert adaptive["dev"]["tokens_per_item"] <= 60
    assert adaptive["against"]["label"] == "chain_of_thought"
    assert adaptive["test"]["n"] == 20 and adaptive["test"]["accuracy"] == 1.0
    assert adaptive["comparison"]["diff"] > 0 and adaptive["comparison"]["p"] < 0.05
    policy = load_workflow(Path(adaptive["path"]))
    assert policy.provenance["role"] == POLICY_ROLE  # `auto` keeps answering with the recommended workflow
    assert {load_workflow(Path(f)).provenance.get("role") for f in adaptive["files"][1:]} == {
        f"{BRANCH_ROLE}{Path(adaptive['path']).stem}"}
    assert policy.provenance["branches"] == ["big", "chain_of_thought"]
    assert [n.kind for n in policy.nodes] == ["sampler", "voter", "route"]
    assert not errors(validate(policy, default_registry(), ChildLoader((policy.source.parent,))))


def test_no_leak_shuffled_test_labels_change_no_adaptive_choice(tmp_path: Path) -> None:
    honest = _tune(tmp_path / "a").adaptive
    shuffled = _tune(tmp_path / "b", shuffle_test_labels=True).adaptive
    assert shuffled["bins"] == honest["bins"]
    assert [b["label"] for b in shuffled["branches"]] == [b["label"] for b in honest["branches"]]
    assert shuffled["dev"] == honest["dev"] and shuffled["against"]["label"] == honest["against"]["label"]
    assert shuffled["test"]["accuracy"] != honest["test"]["accuracy"]


def test_the_probe_and_policy_are_evaluations_of_the_tune(tmp_path: Path) -> None:
    """Review 3.3: the adaptive step ran its own thread pools outside the evaluation store. Now the probe (on dev)
    and the policy (on test) are evaluations recorded beside the tune's, graded by the runner, so a resumed tune
    finds them, and their tokens count in the tune's."""
    result = _tune(tmp_path)
    traces = TraceStore(tmp_path / "traces.db")
    store = EvalStore(traces.engine)
    try:
        ids = {e["id"] for e in store.list()}
        probe = next(i for i in ids if i.startswith(f"{result.tune_id}-probe-"))
        policy = next(i for i in ids if i.startswith(f"{result.tune_id}-adaptive-"))
        assert len(store.get(probe)["items"]) == len(result.split["dev"])
        rows = store.get(policy)["items"]
        assert len(rows) == len(result.split["test"]) == result.adaptive["test"]["n"]
        assert sum(r["score"] for r in rows) / len(rows) == result.adaptive["test"]["accuracy"]
    finally:
        traces.close()


def test_the_tunes_token_budget_holds_through_the_adaptive_step(tmp_path: Path) -> None:
    """Review 3.3: `--tune-budget-tokens` was not enforced on the probe and policy runs."""
    free = _tune(tmp_path / "free")
    race = free.tune_tokens - _adaptive_spent(tmp_path / "free", free.tune_id)
    capped = _tune(tmp_path / "capped", tune_budget_tokens=race + 5)
    assert capped.adaptive["status"] == "none"
    assert "--tune-budget-tokens" in capped.adaptive["reason"]
    assert capped.tune_tokens < free.tune_tokens


def _adaptive_spent(folder: Path, tune_id: str) -> int:
    traces = TraceStore(folder / "traces.db")
    store = EvalStore(traces.engine)
    try:
        return sum(int(r["prompt_tokens_evaluated"] or 0) + int(r["completion_tokens"] or 0)
                   for e in store.list() if e["id"].startswith(f"{tune_id}-")
                   for r in store.get(e["id"])["items"])
    finally:
        traces.close()
