"""Thinking tokens apart from answer tokens in an evaluation (fake model): per point in --json and the table, and
the accuracy-against-tokens figure on either."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.main import main
from app.eval.results import summarize
from app.eval.store import EvalStore
from app.service.views import evaluation_figure
from app.traces.store import TraceStore
from app.viz.evaluation import evaluation_report_html

ROOT = Path(__file__).resolve().parents[2]


def test_thinking_and_answer_tokens_per_point(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"question": "What is 2 + 3?", "answer": "5"}) + "\n", encoding="utf-8")
    db = tmp_path / "t.db"
    args = ["eval", str(ROOT / "workflows" / "thinking_budget.yaml"), str(ROOT / "workflows" / "chain_of_thought.yaml"),
            "--data", str(data), "--metric", "number", "--dry-run", "--db", str(db)]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    think, cot = out["points"]
    assert think["thinking_tokens"] > 0 and cot["thinking_tokens"] == 0
    for p in out["points"]:
        assert p["thinking_tokens"] + p["answer_tokens"] == p["completion_tokens"]
    assert main([*args, "-q"]) == 0
    assert "THINKING/ANSWER TOK" in capsys.readouterr().out
    traces = TraceStore(db)
    try:
        summary = summarize(EvalStore(traces.engine).get(out["eval_id"]))
    finally:
        traces.close()
    thinking = evaluation_figure(summary, "tokens-thinking")
    assert list(thinking.data[0].x) == [think["thinking_tokens"]]  # one item: per item = the total
    answer = evaluation_figure(summary, "tokens-answer")
    assert "answer tokens" in answer.layout.title.text
    assert "of them thinking / answer" in evaluation_report_html(summary)
