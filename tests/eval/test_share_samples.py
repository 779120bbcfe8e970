"""One sample pool, many strategies: `metagen eval --share-samples` (seeds from the item's prompt, so workflows
drawing the same prompt and params share one draw) and `--bootstrap B` maj@k / best-of-k curves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cli.main import main
from app.eval.vote_curves import best_pick, item_curve, majority_pick, vote_curves

SAMPLER = {"prompt": "{question} Answer with a number.", "n": 6, "temperature": 0.7, "max_tokens": 32,
           "extract": "last_number"}


def _workflow(path: Path, name: str, sampler_id: str, tail: list[dict[str, Any]]) -> str:
    nodes = [{"id": sampler_id, "kind": "sampler", "params": SAMPLER, "inputs": {"question": "inputs.question"}},
             *tail]
    data = {"version": 1, "name": name, "inputs": {"question": {"type": "text", "default": "What is 1 + 1?"}},
            "nodes": nodes, "outputs": {"answer": "vote.answer"}}
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def _pair(tmp_path: Path) -> tuple[str, str]:
    majority = _workflow(tmp_path / "maj.yaml", "maj", "draw", [
        {"id": "vote", "kind": "voter", "params": {"method": "majority"}, "inputs": {"candidates": "draw.candidates"}}])
    deepconf = _workflow(tmp_path / "conf.yaml", "conf", "samples", [
        {"id": "c", "kind": "verifier", "params": {"method": "confidence", "measure": "tail", "group_size": 4},
         "inputs": {"candidates": "samples.candidates"}},
        {"id": "vote", "kind": "voter", "params": {"method": "confidence_filter", "keep": 0.5},
         "inputs": {"candidates": "c.candidates"}}])
    return majority, deepconf


def _data(tmp_path: Path, rows: int = 4) -> str:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"question": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n"
                            for i in range(rows)), encoding="utf-8")
    return str(path)


def _eval(tmp_path: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    majority, deepconf = _pair(tmp_path)
    code = main(["eval", majority, deepconf, "--data", _data(tmp_path), "--metric", "number", "--dry-run",
                 "--db", str(tmp_path / f"t{len(flags)}.db"), "--json", "-q", *flags])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_shared_samples_are_drawn_once_for_every_workflow(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    apart = _eval(tmp_path, capsys)
    shared = _eval(tmp_path, capsys, "--share-samples")
    by_name = {p["workflow"]: p for p in shared["points"]}
    assert by_name["maj"]["completion_tokens"] > 0
    assert by_name["conf"]["completion_tokens"] == 0  # every sample came from the pool the first one drew
    assert by_name["conf"]["cost_tokens"] == by_name["maj"]["completion_tokens"]  # drawn once, costed for both
    apart_by_name = {p["workflow"]: p for p in apart["points"]}
    assert apart_by_name["conf"]["completion_tokens"] > 0  # without the flag each node draws its own seeds
    assert apart_by_name["conf"]["cost_tokens"] == apart_by_name["conf"]["completion_tokens"]


def test_bootstrapped_vote_curves_come_out_of_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = _eval(tmp_path, capsys, "--share-samples", "--bootstrap", "40")
    curves = {c["workflow"]: c for c in result["vote_curves"]}
    assert set(curves) == {"maj", "conf"} and curves["maj"]["k"] == [1, 2, 4]
    assert curves["maj"]["bootstrap"] == 40 and "best_at_k" not in curves["maj"]
    assert len(curves["conf"]["best_at_k"]) == 3  # the confidence verifier scored every sample
    assert all(0.0 <= v <= 1.0 for c in curves.values() for v in c["maj_at_k"])
    # the same samples under both workflows: the same maj@k curve
    assert curves["maj"]["maj_at_k"] == pytest.approx(curves["conf"]["maj_at_k"])


def test_a_negative_bootstrap_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    majority, _ = _pair(tmp_path)
    code = main(["eval", majority, "--data", _data(tmp_path), "--dry-run", "--bootstrap", "-1",
                 "--db", str(tmp_path / "t.db"), "-q"])
    assert code == 2 and "--bootstrap" in capsys.readouterr().err


def test_picks_by_hand() -> None:
    answers = ["a", "b", None, "b", "a"]
    assert majority_pick(answers, [0, 1]) == 0  # a tie: the answer seen first in the subset
    assert majority_pick(answers, [1, 0]) == 1
    assert majority_pick(answers, [0, 1, 3]) == 1
    assert majority_pick(answers, [2]) is None
    assert best_pick([0.1, 0.9, None, 0.9, 0.2], [0, 1, 2, 3]) == 1
    assert best_pick([None, None], [0, 1]) is None


def test_first_k_and_bootstrapped_curves_by_hand() -> None:
    answers, correct, scores = ["a", "b", "a"], [True, False, True], [0.1, 0.9, 0.5]
    first = item_curve(answers, correct, scores, [1, 2, 3], 0, seed=0)
    assert first == {"maj": [1.0, 1.0, 1.0], "best": [1.0, 0.0, 0.0]}
    boot = item_curve(answers, correct, scores, [1, 3], 4000, seed=1)
    assert boot["maj"][0] == pytest.approx(2 / 3, abs=0.03)  # a random single sample is right 2 times in 3
    assert boot["maj"][1] == 1.0 and boot["best"][1] == 0.0  # k = n: every resample is the whole set
    items = [{"workflow_idx": 0, "point_idx": 0, "item_idx": i, "samples": correct,
              "sample_votes": {"answers": answers, "scores": None}} for i in range(2)]
    (curve,) = vote_curves(items, [{"name": "w", "points": [{}]}], bootstrap=0)
    assert curve["k"] == [1, 2] and curve["maj_at_k"] == [1.0, 1.0] and "best_at_k" not in curve
