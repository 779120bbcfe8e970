"""Run summaries (issue 32, upkeep): a request's prompt counted once even when its sample 0 came from the sample
cache (DeepConf's stopped samples in the summary: tests/viz/test_deepconf_views.py)."""

from __future__ import annotations

from typing import Any

from app.viz.summary import run_summary


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

