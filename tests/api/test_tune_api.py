"""`metagen.tune` (dry run): the same result as the CLI's, with `.recommended`, `.front`, `.figure()` and `.html()`;
bad arguments name themselves."""

from __future__ import annotations

from pathlib import Path

import pytest

import metagen

ROOT = Path(__file__).resolve().parents[2]


def test_tune_returns_the_result_with_its_figure_and_report(tmp_path: Path) -> None:
    with metagen.Studio(dry_run=True, trace_db=tmp_path / "t.db", workflows_dir=tmp_path / "wf") as studio:
        result = metagen.tune(ROOT / "datasets" / "arithmetic.jsonl", budget_tokens=600, limit=8, progress=False,
                              candidates=["chain_of_thought", "self_consistency"], axes=["think.n=2,4"],
                              studio=studio)
    assert result.recommended["label"] in {c["label"] for c in result.candidates}
    assert Path(result.recommended["path"]).is_file()
    assert Path(result.recommended["path"]).parent == tmp_path / "wf" / "tuned"
    assert {f["label"] for f in result.front} <= {r["label"] for r in result.held_out}
    figure = result.figure()
    assert figure.data and figure.layout.xaxis.title.text == "tokens per item"
    page = result.html()
    assert page.startswith("<!doctype html>") and "Held-out test" in page
    assert metagen.tune is not None and "tune" in metagen.__all__


def test_bad_arguments_name_themselves() -> None:
    with pytest.raises(ValueError, match="budget_tokens"):
        metagen.tune("datasets/arithmetic.jsonl", budget_tokens=0)
    with pytest.raises(TypeError, match="dev_fraction"):
        metagen.tune("datasets/arithmetic.jsonl", budget_tokens=10, dev_fraction="half")


def test_tune_adaptive_returns_the_policy_written_beside_the_recommended_one(tmp_path: Path) -> None:
    with metagen.Studio(dry_run=True, trace_db=tmp_path / "t.db", workflows_dir=tmp_path / "wf") as studio:
        result = metagen.tune(ROOT / "datasets" / "arithmetic.jsonl", budget_tokens=2000, limit=8, progress=False,
                              candidates=["chain_of_thought", "self_consistency"], axes=["think.n=2"],
                              adaptive=True, studio=studio)
    assert result.adaptive is not None and result.adaptive["status"] == "built", result.adaptive
    assert Path(result.adaptive["path"]).parent == Path(result.recommended["path"]).parent
    assert result.to_json()["adaptive"] == result.adaptive
    with pytest.raises(TypeError, match="adaptive"):
        metagen.tune("datasets/arithmetic.jsonl", budget_tokens=10, adaptive="yes")
