"""--share-samples on the bundled model: a second workflow drawing the same prompt and params decodes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.main import main
from tests.eval.test_share_samples import _pair

pytestmark = pytest.mark.model


def test_the_second_strategy_costs_only_its_scoring(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    majority, deepconf = _pair(tmp_path)
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"question": "What is 2 + 3?", "answer": "5"}) + "\n", encoding="utf-8")
    code = main(["eval", majority, deepconf, "--data", str(data), "--metric", "number", "--share-samples",
                 "--bootstrap", "20", "--db", str(tmp_path / "t.db"), "--json", "-q"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    points = {p["workflow"]: p for p in result["points"]}
    assert points["maj"]["completion_tokens"] > 0 and points["conf"]["completion_tokens"] == 0
    assert points["conf"]["cost_tokens"] == points["maj"]["completion_tokens"]
    curves = {c["workflow"]: c for c in result["vote_curves"]}
    assert curves["maj"]["maj_at_k"] == curves["conf"]["maj_at_k"] and len(curves["conf"]["best_at_k"]) == 3
