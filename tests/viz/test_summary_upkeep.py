"""Run summaries (issue 32, upkeep): a request's prompt counted once even when its sample 0 came from the sample
cache, and DeepConf's stopped samples and tokens saved shown in the Traces tab's summary, not only as events."""

from __future__ import annotations

from typing import Any

from app.viz.summary import run_summary, summary_body


def _call(index: int, **extra: Any) -> dict[str, Any]:
    return {"node_id": "s", "purpose": "generate", "start": 1.0, "n": 3, "prompt_hash": "h", "sample_index": index,
            "prompt_tokens": 20, "prompt_tokens_evaluated": 20 if index == 1 else 0, "completion_tokens": 5,
            **extra}


def _record(calls: list[dict[str, Any]], events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"run": {"id": "r", "workflow": "w", "status": "succeeded"}, "lm_calls": calls, "nodes": [],
            "events": events or []}


def test_a_request_whose_sample_0_was_cached_keeps_its_prompt_tokens() -> None:
    summary = run_summary(_record([_call(1), _call(2)]))  # sample 0 came from the sample cache
    assert summary["prompt_tokens"] == 20 and summary["prompt_tokens_evaluated"] == 20


def test_deepconf_stops_are_in_the_summary_cards() -> None:
    event = {"kind": "adaptive_stop", "node_id": "s",
             "data": {"mode": "confidence", "n": 8, "drawn": 8, "saved": 0, "stopped_count": 3,
                      "tokens_saved_est": 140}}
    record = _record([_call(0), _call(1)], [event])
    summary = run_summary(record)
    assert (summary["samples_stopped_by_confidence"], summary["tokens_saved_by_confidence"]) == (3, 140)
    html = summary_body(record)
    assert "samples stopped for low confidence" in html and "<b>140</b>" in html
    assert "low confidence" not in summary_body(_record([_call(0)]))
