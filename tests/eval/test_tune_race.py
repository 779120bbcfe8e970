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
from app.eval.tune.race import MIN_HALVING_ITEMS, ItemResult
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
    assert status["bad"]["status"] == "dropped"  # early: once a paired test on the slice can tell
    assert status["bad"]["dropped_after"] <= MIN_HALVING_ITEMS < len(data["split"]["dev"])
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


def test_workflows_that_do_not_fit_are_skipped_with_the_reason(tmp_path: Path) -> None:
    service, data = _setup(tmp_path, {"chain_of_thought": (0.3, 5), "good": (0.9, 5)})
    (tmp_path / "examples" / "needs_passage.yaml").write_text(
        WORKFLOW.format(name="needs_passage").replace("inputs:\n  question: {type: text, default: Q1}",
                                                      "inputs:\n  question: {type: text, default: Q1}\n"
                                                      "  passage: {type: text}"))
    try:
        result = service.tune(TuneOptions(data=str(data), metric="number", budget_tokens=200,
                                          out=str(tmp_path / "o.yaml")))
    finally:
        service.close()
    skipped = {c["label"]: c for c in result.candidates if c["status"] == "skipped"}
    assert "passage" in skipped["needs_passage"]["reason"]
    assert result.recommended["label"] == "good"


def test_model_override_replaces_generating_models_only() -> None:
    from app.eval.tune.errors import TuneError
    from app.eval.tune.model_override import model_entry, replace_models

    assert model_entry("http://a:8000/v1,http://b:8000/v1#Qwen/Qwen2.5-7B") == {
        "source": "openai", "base_url": ["http://a:8000/v1", "http://b:8000/v1"], "model": "Qwen/Qwen2.5-7B"}
    assert model_entry("unsloth/Qwen3-0.6B-GGUF:Q4_K_M") == {"source": "hub", "repo": "unsloth/Qwen3-0.6B-GGUF",
                                                            "quant": "Q4_K_M"}
    with pytest.raises(TuneError, match="no such file"):
        model_entry("missing.gguf")
    data = {"models": {"main": {"source": "bundled"}, "rm": {"source": "path", "path": "x.gguf", "pooling": "rank"}}}
    out = replace_models(data, {"source": "fake"})
    assert out["models"] == {"main": {"source": "fake"}, "rm": data["models"]["rm"]}


def test_a_tune_record_is_not_resumed_as_an_evaluation(tmp_path: Path) -> None:
    from app.eval.plan import EvalSetupError, plan_from_config

    with pytest.raises(EvalSetupError, match="metagen tune --resume"):
        plan_from_config({"tune": {"data": "x"}, "workflows": []}, default_registry())


def test_failing_runs_drop_a_candidate_instead_of_looking_cheap() -> None:
    from app.eval.tune.race import race_round

    items = [0, 1, 2, 3]
    results = {"chain_of_thought": {i: ItemResult(0.0, 50, 0.1) for i in items},
               "broken": {i: ItemResult(0.0, 0, 0.0, failed=True) for i in items},
               "fine": {i: ItemResult(0.0, 80, 0.1) for i in items}}
    drops = race_round(list(results), results, items, baseline="chain_of_thought", budget_tokens=100)
    assert drops["broken"].startswith("its runs failed on 4 of 4")
    assert "fine" not in drops


def test_provenance_survives_load_and_dump_and_a_bad_one_is_an_issue() -> None:
    from app.workflow.spec import load_workflow_text

    block = "provenance: {tool: metagen tune, dev: {accuracy: 0.5}}\nmodels:"
    text = WORKFLOW.format(name="x").replace("models:", block)
    wf = load_workflow_text(text)
    assert wf.provenance == {"tool": "metagen tune", "dev": {"accuracy": 0.5}}
    assert load_workflow_text(wf.to_yaml()).provenance == wf.provenance
    assert wf.semantic_hash() == load_workflow_text(WORKFLOW.format(name="x")).semantic_hash()
    bad = load_workflow_text(WORKFLOW.format(name="x").replace("models:", "provenance: 3\nmodels:"))
    assert [i.code for i in bad.load_issues] == ["bad_structure"]


def _rows(right: set[int], n: int, tokens: int = 10) -> dict[int, ItemResult]:
    return {i: ItemResult(float(i in right), tokens, 0.1) for i in range(n)}


def test_one_answer_on_a_first_slice_drops_nobody_but_over_budget_still_goes_at_once() -> None:
    from app.eval.tune.race import race_round

    four = {"chain_of_thought": _rows(set(), 4), "lead": _rows({0}, 4), "zero": _rows(set(), 4),
            "zero2": _rows(set(), 4), "pricey": _rows(set(), 4, tokens=500)}
    drops = race_round(list(four), four, [0, 1, 2, 3], baseline="chain_of_thought", budget_tokens=100)
    assert list(drops) == ["pricey"] and drops["pricey"].startswith("over budget")  # no "bottom half" on 4 items
    eight = {label: _rows({0} if label == "lead" else set(), MIN_HALVING_ITEMS) for label in ("chain_of_thought",
                                                                                               "lead", "a", "b")}
    drops = race_round(list(eight), eight, list(range(MIN_HALVING_ITEMS)), baseline="chain_of_thought")
    assert sorted(drops) == ["b"] and drops["b"].startswith("bottom half after 8 dev items")


def test_a_candidate_is_ruled_out_once_it_cannot_beat_greedy_on_dev_whatever_it_answers() -> None:
    from app.eval.tune.race import cannot_beat, steps_to_rule_out

    dev = list(range(10))
    greedy = _rows(set(), 10)  # wrong everywhere
    results = {"chain_of_thought": greedy, "c": {i: r for i, r in _rows(set(), 10).items() if i < 4}}
    # 4 ties and 6 items left: right on all 6 would be 6 wins to 0 (p = 0.031), so it can still win...
    assert cannot_beat("c", results, dev, baseline="chain_of_thought") is None
    # ...and one more wrong answer ends that (5 to 0: p = 0.062)
    assert steps_to_rule_out("c", results, dev, [4, 5, 6, 7], baseline="chain_of_thought") == 1
    results["c"] = {i: r for i, r in _rows(set(), 10).items() if i < 5}
    why = cannot_beat("c", results, dev, baseline="chain_of_thought")
    assert why is not None and "win 5 and lose 0" in why and "p = 0.062" in why
    four = {"chain_of_thought": greedy, "c": _rows({0, 1, 2, 3}, 4)}  # 4 wins: wrong on 5 of the 6 left ends it
    assert steps_to_rule_out("c", four, dev, [4, 5, 6, 7, 8, 9], baseline="chain_of_thought") == 5
    six = {"chain_of_thought": greedy, "c": _rows(set(range(6)), 6)}  # 6 wins to 0 (p = 0.031): never ruled out
    assert steps_to_rule_out("c", six, dev, [6, 7, 8, 9], baseline="chain_of_thought") is None
    graded = {"chain_of_thought": greedy, "c": {0: ItemResult(0.5, 1, 0.1)}}  # not 0/1: no exact bound, kept
    assert cannot_beat("c", graded, dev, baseline="chain_of_thought") is None


def test_the_choice_is_the_best_candidate_that_beats_greedy_significantly() -> None:
    from app.eval.tune.race import choose

    n = 20
    results = {"chain_of_thought": _rows(set(range(6)), n),
               "a": _rows(set(range(6, 19)), n),  # 13 of 20: 13 wins, 6 losses against greedy (p = 0.17)
               "b": _rows(set(range(14)), n)}  # 14 of 20: 8 wins, no loss (p = 0.0078 < 0.05 / 2, Holm)
    label, why = choose(list(results), results, list(range(n)), baseline="chain_of_thought")
    assert label == "b" and why.startswith("b beats greedy on 20 dev items")
    assert "after Holm's correction over 2 candidates" in why


def test_the_race_ends_with_greedy_alone_when_no_challenger_can_beat_it(tmp_path: Path) -> None:
    raced = _tune(tmp_path / "race", {"chain_of_thought": (0.6, 5), "same": (0.6, 20), "worse": (0.3, 5)})
    grid = _tune(tmp_path / "grid", {"chain_of_thought": (0.6, 5), "same": (0.6, 20), "worse": (0.3, 5)},
                 exhaustive=True)
    assert raced.recommended["label"] == grid.recommended["label"] == "chain_of_thought"
    status = {c["label"]: c for c in raced.candidates}
    assert "cannot beat greedy significantly on dev" in status["same"]["reason"]
    assert status["same"]["dropped_after"] < len(raced.split["dev"])
    assert [row["label"] for row in raced.held_out] == ["chain_of_thought"]
    assert raced.tune_tokens < grid.tune_tokens


def test_a_selection_that_would_see_an_inputs_default_is_skipped_before_the_race(tmp_path: Path) -> None:
    service, data = _setup(tmp_path, {"chain_of_thought": (0.3, 5), "good": (0.9, 5)})
    shipped = Path(__file__).resolve().parents[2] / "workflows" / "instruction_best_of_n.yaml"
    (tmp_path / "examples" / "instruction_best_of_n.yaml").write_text(shipped.read_text())
    seen: list[list[str]] = []
    try:
        result = service.tune(TuneOptions(data=str(data), metric="number", budget_tokens=200,
                                          out=str(tmp_path / "o.yaml")),
                              on_progress=lambda p: seen.append([r["label"] for r in p.rows
                                                                 if r["status"] == "skipped"]))
    finally:
        service.close()
    skipped = {c["label"]: c["reason"] for c in result.candidates if c["status"] == "skipped"}
    assert "would select every item with the input's default" in skipped["instruction_best_of_n"]
    assert seen[0] == ["instruction_best_of_n"]  # listed with the first progress, before any run ended
    assert not result.warnings and result.recommended["label"] == "good"


def test_the_race_log_prints_the_plans_warnings_before_the_race_and_not_again(capsys) -> None:
    from app.cli.tune import _RaceLog, format_result
    from app.eval.tune.api import TuneProgress

    log = _RaceLog(quiet=False)
    first = TuneProgress(phase="dev", rows=[], tokens_used=0, eta_s=None, round=1, total=4, warnings=["w1"])
    log(first)
    log(first)
    assert capsys.readouterr().err.count("warning: w1") == 1
    data = {"race": [], "split": {"test": []}, "held_out": [], "comparisons": [], "warnings": ["w1", "w2"],
            "verdict": "v", "recommended": {"path": "p"}, "tune_tokens": 0, "tune_id": "t"}
    text = format_result(data, shown=log.warned)
    assert "warning: w1" not in text and "warning: w2" in text


def test_finalists_whose_samples_came_from_the_shared_pool_are_marked(tmp_path: Path) -> None:
    from app.cli.tune import format_result

    root = Path(__file__).resolve().parents[2]
    service = StudioService(trace_db=tmp_path / "t.db", workflows_dir=tmp_path / "wf", dry_run=True)
    try:  # the grid keeps every candidate to test: n = 2, 4, 8 find their samples in n = 16's pool
        result = service.tune(TuneOptions(data=str(root / "datasets" / "arithmetic.jsonl"), metric="number",
                                          budget_tokens=1500, candidates=["chain_of_thought", "self_consistency"],
                                          limit=8, out=str(tmp_path / "o.yaml"), exhaustive=True))
    finally:
        service.close()
    rows = {r["label"]: r for r in result.to_json()["held_out"]}
    pooled = [label for label, r in rows.items() if r["note"] == "reused from the shared pool"]
    assert pooled and all(rows[label]["reused_tokens_per_item"] > 0 for label in pooled)
    assert rows["chain_of_thought"]["note"] == "" and rows["chain_of_thought"]["reused_tokens_per_item"] == 0
    assert not any("n=16" in label for label in pooled)  # the largest drew the pool itself
    text = format_result(result.to_json())
    assert sum("* reused from the shared pool" in line for line in text.splitlines()) == len(pooled)
    assert "its seconds are only its own share" in text


def _held_out(tmp_path: Path, name: str, **kwargs) -> dict[str, dict]:
    root = Path(__file__).resolve().parents[2]
    service = StudioService(trace_db=tmp_path / f"{name}.db", workflows_dir=tmp_path / "wf", dry_run=True)
    try:
        result = service.tune(TuneOptions(data=str(root / "datasets" / "arithmetic.jsonl"), metric="number",
                                          budget_tokens=1500, candidates=["chain_of_thought", "self_consistency"],
                                          limit=8, out=str(tmp_path / f"{name}.yaml"), exhaustive=True, **kwargs))
    finally:
        service.close()
    return {r["label"]: r for r in result.to_json()["held_out"]}


def test_a_pooled_candidate_costs_what_it_costs_when_it_draws_for_itself(tmp_path: Path) -> None:
    pooled = _held_out(tmp_path, "grid")  # n = 2 finds its samples in n = 16's pool: it evaluates no prompt
    alone = _held_out(tmp_path, "alone", axes=["think.n=2"])  # n = 2 alone draws them, and evaluates its prompt
    label = "self_consistency · think.n=2"
    assert pooled[label]["note"] == "reused from the shared pool" and alone[label]["note"] == ""
    assert pooled[label]["tokens_per_item"] == alone[label]["tokens_per_item"] > 0
    # what it took from the pool: its samples' completion tokens and the prompt it would have evaluated
    assert pooled[label]["reused_tokens_per_item"] == alone[label]["tokens_per_item"]
