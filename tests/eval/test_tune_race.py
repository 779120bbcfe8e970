"""`metagen tune` on a scripted backend whose candidates have known accuracies and costs: the known best within the
budget is recommended, the known worst dropped early, greedy recommended when nothing is better, and the held-out
labels never change the recommendation."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from app.eval.tune.api import TuneOptions
from app.eval.tune.split import split_items
from app.run.providers import fake_provider
from app.service.studio import StudioService
from app.workflow.problems import errors
from app.workflow.spec import load_workflow
from app.workflow.validation import validate
from backends.base import CancelToken
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
  params: {{prompt: '[{name}] {{question}}', max_tokens: 600}}
  inputs: {{question: inputs.question}}
outputs: {{answer: think.text}}
"""
KNOWN = {"chain_of_thought": (0.3, 5), "good": (0.9, 20), "mid": (0.6, 10), "bad": (0.0, 5), "pricey": (1.0, 400)}
"""name -> (accuracy, words of padding: its cost)."""


def _hit(item: int, accuracy: float) -> bool:
    """Whether a strategy of this accuracy answers the item right: a fixed per-item difficulty below it."""
    return (item * 37 % 100) / 100 < accuracy


def _reply_fn(strategies: dict[str, tuple[float, int]]):
    def reply(prompt: str, seed: int) -> str:
        name = re.search(r"\[(\w+)\]", prompt).group(1)
        item = int(re.search(r"Q(\d+)", prompt).group(1))
        accuracy, words = strategies[name]
        return " ".join(["so"] * words) + f" Answer: {item if _hit(item, accuracy) else item + 1000}"

    return reply


def _setup(tmp_path: Path, strategies: dict[str, tuple[float, int]], shuffle_test_labels: bool = False):
    examples = tmp_path / "examples"
    examples.mkdir(parents=True)
    for name in strategies:
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
    service = StudioService(provider=fake_provider(reply_fn=_reply_fn(strategies)), workflows_dir=tmp_path / "wf",
                            examples_dir=examples, trace_db=tmp_path / "traces.db")
    return service, data


def _tune(tmp_path: Path, strategies: dict[str, tuple[float, int]], shuffle_test_labels: bool = False, **kwargs):
    service, data = _setup(tmp_path, strategies, shuffle_test_labels)
    try:
        options = TuneOptions(data=str(data), metric="number", budget_tokens=200, out=str(tmp_path / "out.yaml"),
                              **kwargs)
        return service.tune(options)
    finally:
        service.close()


def test_recommends_the_known_best_within_the_budget_and_drops_the_worst_early(tmp_path: Path) -> None:
    data = _tune(tmp_path, KNOWN).to_json()
    assert data["recommended"]["label"] == "good"
    status = {c["label"]: c for c in data["candidates"]}
    assert status["pricey"]["status"] == "dropped" and "over budget" in status["pricey"]["reason"]
    assert status["bad"]["status"] == "dropped" and status["bad"]["dropped_after"] == 4  # the first slice
    assert status["good"]["status"] == "finalist"
    assert data["recommended"]["test"]["n"] == len(data["split"]["test"]) == 20
    assert data["comparison"]["diff"] > 0 and data["comparison"]["p"] < 0.05
    assert any(f["label"] == "good" for f in data["front"])
    assert data["tune_tokens"] > 0
    written = load_workflow(Path(data["recommended"]["path"]))
    assert written.provenance["candidate"] == "good" and written.provenance["split"]["test"] == 20
    assert not errors(validate(written, default_registry()))


def test_the_race_spends_fewer_tokens_than_the_grid_for_the_same_choice(tmp_path: Path) -> None:
    raced = _tune(tmp_path / "race", KNOWN)
    grid = _tune(tmp_path / "grid", KNOWN, exhaustive=True)
    assert raced.recommended["label"] == grid.recommended["label"] == "good"
    assert raced.tune_tokens < grid.tune_tokens


def test_recommends_greedy_when_nothing_is_better(tmp_path: Path) -> None:
    result = _tune(tmp_path, {"chain_of_thought": (0.6, 5), "same": (0.6, 20), "worse": (0.3, 5)})
    assert result.recommended["label"] == "chain_of_thought"
    assert "greedy" in result.verdict.lower()
    assert result.comparison["p"] == 1.0


def test_no_leak_shuffled_test_labels_change_nothing_chosen(tmp_path: Path) -> None:
    honest = _tune(tmp_path / "a", KNOWN)
    shuffled = _tune(tmp_path / "b", KNOWN, shuffle_test_labels=True)
    assert honest.split == shuffled.split
    assert set(honest.split["dev"]).isdisjoint(honest.split["test"])
    assert sorted(honest.split["dev"] + honest.split["test"]) == list(range(N_ITEMS))
    assert shuffled.recommended["label"] == honest.recommended["label"]
    assert [c["status"] for c in shuffled.candidates] == [c["status"] for c in honest.candidates]
    assert shuffled.recommended["test"]["accuracy"] != honest.recommended["test"]["accuracy"]


def test_a_killed_tune_resumes(tmp_path: Path) -> None:
    service, data = _setup(tmp_path, KNOWN)
    cancel = CancelToken()

    def kill_in_round_two(progress) -> None:
        if progress.round >= 2 and progress.done > 0:
            cancel.cancel("killed")

    options = TuneOptions(data=str(data), metric="number", budget_tokens=200, out=str(tmp_path / "o.yaml"))
    try:
        with pytest.raises(ValueError, match="--resume"):
            service.tune(options, on_progress=kill_in_round_two, cancel=cancel)
        tune_id = service.evaluations.list()[0]["id"]
        before = len(service.evaluations.store.get(tune_id)["items"])
        result = service.tune(TuneOptions(data="", resume=tune_id))
        assert result.tune_id == tune_id and result.recommended["label"] == "good"
        assert len(service.evaluations.store.get(tune_id)["items"]) > before
    finally:
        service.close()


def test_no_budget_says_what_to_give(tmp_path: Path) -> None:
    service, data = _setup(tmp_path, KNOWN)
    try:
        with pytest.raises(ValueError, match="--budget-tokens N or --budget-seconds S"):
            service.tune(TuneOptions(data=str(data), metric="number"))
    finally:
        service.close()
