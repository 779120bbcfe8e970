"""DeepConf's stopped samples and saved tokens in the Traces tab's run summary and samples view (issue 32), read
from a hand-made trace record."""

from __future__ import annotations

from typing import Any

from app.viz.deepconf import confidence_stops, confidence_totals
from app.viz.samples import samples_html
from app.viz.summary import compare_runs_html, run_summary, summary_body


def _call(index: int, tokens: int, finish: str = "stop") -> dict[str, Any]:
    return {"node_id": "think", "purpose": "generate", "start": 1.0 + (index >= 4), "n": 4, "sample_index": index % 4,
            "prompt_tokens": 20, "prompt_tokens_evaluated": 20 if index % 4 == 0 else 0, "prompt_tokens_cached": 0,
            "completion_tokens": tokens, "finish_reason": finish, "model": "m"}


def deepconf_record() -> dict[str, Any]:
    """A DeepConf sampler: 4 warm-up samples of 30 tokens, then 4 more of which 2 were stopped at 6 and 9 tokens;
    8 of 12 planned drawn."""
    candidates = [{"text": f"Answer: {a}", "answer": a, "completion_tokens": 30, "seed": i}
                  for i, a in enumerate(["42", "42", "41", "42", "42", "42"])]
    calls = [_call(i, 30) for i in range(4)] + [_call(4, 30), _call(5, 6, "low_confidence"),
                                                _call(6, 9, "low_confidence"), _call(7, 30)]
    stop = {"mode": "confidence", "n": 12, "drawn": 8, "saved": 4, "batches": [4, 4], "threshold": 1.25,
            "group_size": 16, "keep": 0.9, "warmup": [2.0, 1.9, 1.3, 2.2],
            "stopped": [{"index": 5, "seed": 105, "tokens": 6}, {"index": 6, "seed": 106, "tokens": "<b>9</b>"}],
            "stopped_count": 2, "tokens_generated": 195, "tokens_saved_est": 165}
    return {
        "run": {"id": "r1", "workflow": "deepconf", "status": "succeeded", "seed": 1, "wall_s": 2.0},
        "nodes": [{"node_id": "think", "kind": "sampler", "status": "succeeded",
                   "outputs": {"candidates": {"__type__": "candidates", "candidates": candidates, "winner": 0}}}],
        "lm_calls": calls,
        "events": [{"kind": "adaptive_stop", "node_id": "think", "data": stop},
                   {"kind": "adaptive_stop", "node_id": "other", "data": {"n": 8, "drawn": 8, "saved": 0}}],
    }


def test_confidence_stops_are_read_from_the_event() -> None:
    record = deepconf_record()
    (stop,) = confidence_stops(record)  # the majority-mode event of node "other" is not DeepConf's
    assert stop["node_id"] == "think" and stop["stopped_count"] == 2 and stop["drawn"] == 8
    assert [s["index"] for s in stop["stopped"]] == [5, 6]
    assert confidence_totals(record) == (2, 165)
    assert confidence_stops(record, "other") == []


def test_the_run_summary_shows_samples_stopped_and_tokens_saved() -> None:
    record = deepconf_record()
    summary = run_summary(record)
    assert summary["samples_stopped_by_confidence"] == 2
    assert summary["samples_saved_by_adaptive_stop"] == 4  # never drawn
    assert summary["tokens_saved_by_adaptive_stop"] == 165  # DeepConf's own estimate, the stopped samples' rest too
    html = summary_body(record)
    assert "samples stopped by confidence (DeepConf)" in html and "<b>2</b>" in html
    assert "samples stopped by confidence" in compare_runs_html(record, record)
    plain = deepconf_record()
    plain["events"] = plain["events"][1:]
    assert run_summary(plain)["samples_stopped_by_confidence"] == 0
    assert "samples stopped by confidence" not in summary_body(plain)


def test_the_samples_view_lists_the_stopped_samples() -> None:
    html = samples_html(deepconf_record(), "think")
    assert "Stopped by the confidence stop (DeepConf) · 2 of 8 drawn" in html
    table = html[html.index("mg-stopped"):]
    assert table.count("<tr>") == 3  # the header and the two stopped samples
    assert ">105<" in table and ">6<" in table
    assert "&lt;b&gt;9&lt;/b&gt;" in table and "<b>9</b>" not in table  # trace values are escaped
    assert "about 165 saved" in html
    record = deepconf_record()
    record["events"] = []
    assert "Stopped by the confidence stop" not in samples_html(record, "think")
