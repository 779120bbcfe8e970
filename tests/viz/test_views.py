"""Token colours, refinement diffs, run comparison and summary totals, on small known traces."""

from __future__ import annotations

import math
import re
from typing import Any

import app.viz as viz
from app.viz.tokens import prob_color


def test_token_view_colours_each_token_by_probability(logprob_records: list[dict[str, Any]]) -> None:
    record = logprob_records[0]
    call = record["lm_calls"][0]
    html = viz.token_view_html(record, call["call_id"])
    spans = re.findall(r'<span class="mg-tok" style="background:([^"]+)" title="([^"]+)" data-p="([^"]+)">', html)
    assert len(spans) == len(call["logprobs"]) > 0
    for (background, title, p), item in zip(spans, call["logprobs"], strict=True):
        expected = math.exp(item["logprob"])
        assert abs(float(p) - expected) < 1e-4
        assert background == prob_color(expected)
        assert f"logprob {item['logprob']:.4f}" in title
    assert prob_color(1.0).startswith("hsla(120") and prob_color(0.0).startswith("hsla(0")


def test_token_view_without_logprobs_or_call(example_records: dict[str, dict[str, Any]]) -> None:
    record = example_records["chain_of_thought"]
    call = record["lm_calls"][0]
    assert call["logprobs"] is None
    html = viz.token_view_html(record, call["call_id"])
    assert "No per-token log-probabilities" in html and "logprobs" in html
    assert "No LM call nope" in viz.token_view_html(record, "nope")


def test_word_diff_marks_removed_and_added_words() -> None:
    html = viz.word_diff_html("The moon is bright tonight.", "The silver moon is bright.")
    assert "<ins> silver</ins>" in html and "tonight.</del>" in html
    after = re.sub(r"<del>.*?</del>", "", html).replace("<ins>", "").replace("</ins>", "")
    before = re.sub(r"<ins>.*?</ins>", "", html).replace("<del>", "").replace("</del>", "")
    assert (before, after) == ("The moon is bright tonight.", "The silver moon is bright.")
    assert viz.word_diff_html("<b>", "<i>") == "<del>&lt;b&gt;</del><ins>&lt;i&gt;</ins>"


def test_compare_two_seeds_of_one_workflow(logprob_records: list[dict[str, Any]]) -> None:
    a, b = logprob_records
    html = viz.compare_runs_html(a, b)
    assert a["run"]["id"] in html and b["run"]["id"] in html
    params = re.search(r"<table id=mg-compare-params>.*?</table>", html, re.S)
    assert params is not None and "<td>seed</td><td class=mg-text>0</td><td class=mg-text>1</td>" in params.group(0)
    assert "Workflow YAML diff" not in html  # same workflow


def test_compare_different_workflows_shows_the_yaml_diff(example_records: dict[str, dict[str, Any]]) -> None:
    html = viz.compare_runs_html(example_records["best_of_n"], example_records["weighted_vote"])
    assert "Workflow YAML diff" in html
    assert 'class="mg-diffadd"' in html and 'class="mg-diffdel"' in html


def test_summary_counts_prefix_sharing() -> None:
    calls = [  # one request of 3 samples sharing a 10-token prompt, evaluated once; 4 of them were cached
        {"node_id": "s", "purpose": "generate", "start": 1.0, "end": 2.0, "n": 3, "sample_index": i,
         "prompt_hash": "h", "prompt_tokens": 10, "prompt_tokens_evaluated": 6 if i == 0 else 0,
         "prompt_tokens_cached": 4 if i == 0 else 0, "completion_tokens": 5, "model": "m", "finish_reason": "eog"}
        for i in range(3)]
    record = {"run": {"id": "r", "status": "succeeded", "wall_s": 1.5}, "nodes": [], "lm_calls": calls,
              "events": []}
    s = viz.run_summary(record)
    assert (s["lm_calls"], s["requests"], s["prompt_tokens"], s["prompt_tokens_all_samples"]) == (3, 1, 10, 30)
    assert (s["prompt_tokens_evaluated"], s["prompt_tokens_cached"], s["completion_tokens"]) == (6, 4, 15)
    assert s["tokens_saved_by_prefix_sharing"] == 30 - 6
    assert s["wall_s"] == 1.5
