"""--repeats on the bundled model: each repeat of an item draws new samples (its own derived seed), and the
paired comparison of the two sweep points covers every item once."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from app.cli.main import main

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[2]


def test_repeats_draw_new_samples_on_the_real_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n"
                            for q, a in (("What is 12 + 7?", "19"), ("What is 9 times 3?", "27"))), encoding="utf-8")
    db = tmp_path / "t.db"
    code = main(["eval", str(ROOT / "workflows" / "self_consistency.yaml"), "--data", str(data), "--metric", "number",
                 "--sweep", "think.n=1,2", "--repeats", "2", "--db", str(db), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and all(p["total"] == 4 for p in out["points"])
    with sqlite3.connect(db) as conn:
        think = dict(conn.execute(
            "SELECT e.item_idx, n.outputs FROM eval_items e JOIN node_runs n ON n.run_id = e.run_id "
            "WHERE e.point_idx = 1 AND n.node_id = 'think'").fetchall())
    assert sorted(think) == [0, 1, 2, 3]  # rows 0-1; their repeat 1 is stored as keys 2-3
    assert think[0] != think[2] or think[1] != think[3]  # a repeat draws its own samples (another seed)
    (comparison,) = out["comparisons"]
    assert comparison["n"] == 2 and comparison["method"] == "sign-flip"
