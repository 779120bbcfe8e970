"""`metagen eval --repeats K --baseline LABEL` on the scripted fake model: K runs per item with derived seeds,
clustered point statistics, and the paired comparisons in --json, the table and `eval show`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from app.cli.main import main
from app.eval.plan import repeat_seed

ROOT = Path(__file__).resolve().parents[2]
SC = str(ROOT / "workflows" / "self_consistency.yaml")
COT = str(ROOT / "workflows" / "chain_of_thought.yaml")


def _data(tmp_path: Path, rows: int = 4) -> str:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"question": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n"
                            for i in range(rows)), encoding="utf-8")
    return str(path)


def test_repeats_run_each_item_k_times_with_derived_seeds(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "t.db"
    code = main(["eval", COT, SC, "--data", _data(tmp_path), "--metric", "number", "--repeats", "3",
                 "--seed", "5", "--dry-run", "--db", str(db), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["repeats"] == 3
    for point in out["points"]:
        assert point["total"] == 12 and point["repeats"] == 3 and point["se"] is not None
        assert 0.0 <= point["ci"][0] <= point["accuracy"] <= point["ci"][1] <= 1.0
    with sqlite3.connect(db) as conn:
        seeds = sorted({row[0] for row in conn.execute("SELECT seed FROM runs")})
    assert seeds == sorted({repeat_seed(5, r) for r in range(3)}) and seeds[0] != seeds[1]
    (comparison,) = out["comparisons"]
    assert set(comparison) == {"a", "b", "n", "diff", "ci", "p_value", "method"}
    assert comparison["n"] == 4 and comparison["method"] == "sign-flip"
    accuracy = {p["workflow"]: p["accuracy"] for p in out["points"]}
    assert comparison["diff"] == pytest.approx(accuracy[comparison["a"]] - accuracy[comparison["b"]])
    assert comparison["diff"] >= 0 and comparison["ci"][0] <= comparison["diff"] <= comparison["ci"][1]


def test_baseline_comparisons_in_table_json_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "t.db")
    args = ["eval", COT, SC, "--data", _data(tmp_path, 5), "--metric", "number", "--sweep", "think.n=1,3",
            "--dry-run", "--db", db, "-q"]
    assert main([*args, "--baseline", "chain-of-thought"]) == 0
    text = capsys.readouterr().out
    assert "paired comparisons" in text and "mcnemar-exact" in text
    assert text.count("chain-of-thought") >= 3  # the point and the baseline of both comparisons
    assert main(["eval", "list", "--db", db, "--json"]) == 0
    eval_id = json.loads(capsys.readouterr().out)[0]["id"]
    assert main(["eval", "show", eval_id, "--db", db, "--json", "--baseline", "chain-of-thought"]) == 0
    shown = json.loads(capsys.readouterr().out)["comparisons"]
    assert {c["b"] for c in shown} == {"chain-of-thought"} and len(shown) == 2
    assert all(c["n"] == 5 and c["method"] == "mcnemar-exact" for c in shown)
    assert main(["eval", "show", eval_id, "--db", db, "--json"]) == 0  # the recorded baseline
    assert json.loads(capsys.readouterr().out)["comparisons"] == shown
    assert main(["eval", "show", eval_id, "--db", db, "--json", "--baseline", "self-consistency · think.n=3"]) == 0
    assert {c["b"] for c in json.loads(capsys.readouterr().out)["comparisons"]} == {"self-consistency · think.n=3"}
    assert main([*args[:-1], "--json"]) == 0  # no baseline: every pair of the 3 points
    assert len(json.loads(capsys.readouterr().out)["comparisons"]) == 3


def test_bad_repeats_and_unknown_baseline_are_refused_before_running(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "t.db"
    base = ["eval", COT, SC, "--data", _data(tmp_path), "--metric", "number", "--dry-run", "--db", str(db)]
    assert main([*base, "--repeats", "0"]) == 2
    assert "--repeats must be" in capsys.readouterr().err
    assert main([*base, "--sweep", "think.n=1,3", "--baseline", "self-consistency"]) == 2
    err = capsys.readouterr().err
    assert "2 sweep points" in err and "self-consistency · think.n=1" in err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
