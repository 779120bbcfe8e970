"""Every visualisation renders for the trace of every example workflow."""

from __future__ import annotations

import re
from typing import Any

import plotly.graph_objects as go
import pytest

import app.viz as viz
from app.platform.resources import examples_dir

NAMES = sorted(p.stem for p in examples_dir().glob("*.yaml"))


def test_there_are_examples_to_render() -> None:
    assert len(NAMES) >= 5


@pytest.mark.parametrize("name", NAMES)
def test_every_view_renders(name: str, example_records: dict[str, dict[str, Any]]) -> None:
    record = example_records[name]
    assert record["run"]["status"] == "succeeded", record["run"]["error"]

    timeline = viz.timeline_figure(record)
    assert isinstance(timeline, go.Figure)
    bars = [t for t in timeline.data if t.type == "bar"]
    node_rows = {y for t in bars if t.name.startswith("node ") for y in t.y}
    assert node_rows == {n["node_id"] for n in record["nodes"]}
    call_traces = [t for t in bars if t.name == "LM calls"]
    assert sum(len(t.x) for t in call_traces) == len(record["lm_calls"])
    timeline.to_json()

    samples = viz.sample_view(record)
    if viz.candidate_nodes(record):
        assert isinstance(samples, go.Figure)
        table = next(t for t in samples.data if t.type == "table")
        rows = viz.sample_rows(record)
        assert len(table.cells.values[0]) == len(rows)
        counts = viz.vote_counts(record)
        bars = [t for t in samples.data if t.type == "bar"]
        if all(answer == viz.NO_ANSWER for answer, _, _ in counts):
            assert not bars and "no answers extracted" in samples.layout.title.text  # nothing to count
        else:
            assert sum(bars[0].y) == sum(n for _, n, _ in counts)
        samples.to_json()
    else:
        assert isinstance(samples, str) and "no candidate set" in samples

    tree = viz.search_tree_figure(record)
    has_tree = any(e["kind"] in ("tree", "beam_tree") for e in record["events"])
    assert (tree is not None) == has_tree
    if tree is not None:
        tree.to_json()

    refinement = viz.refinement_html(record)
    has_refine = any(e["kind"] in ("refine", "rsa") for e in record["events"])
    assert bool(refinement) == has_refine

    for call in record["lm_calls"][:5]:
        html = viz.token_view_html(record, call["call_id"])
        assert call["call_id"] in html

    summary = viz.run_summary(record)
    assert summary["lm_calls"] == record["run"]["lm_calls"]
    assert summary["completion_tokens"] == record["run"]["completion_tokens"]
    assert summary["prompt_tokens"] == record["run"]["prompt_tokens"]
    assert summary["prompt_tokens_evaluated"] == record["run"]["prompt_tokens_evaluated"]
    assert record["run"]["id"] in viz.summary_html(record)

    page = viz.export_html(record)
    for section in ("mg-summary", "mg-timeline", "mg-samples", "mg-search-tree", "mg-refinement", "mg-tokens",
                    "mg-calls", "mg-workflow"):
        assert f'id="{section}"' in page
    assert not re.search(r"<script[^>]+src=", page), "the page must not load scripts from elsewhere"
    assert page.count("Plotly.newPlot") >= 2


def test_beam_search_tree_shows_chosen_path(example_records: dict[str, dict[str, Any]]) -> None:
    record = example_records["beam_search"]
    tree_event = next(e for e in record["events"] if e["kind"] == "tree")
    fig = viz.search_tree_figure(record)
    assert fig is not None
    chosen = [n for n in tree_event["data"]["nodes"] if n.get("chosen")]
    assert chosen, "the example's search picked no path"
    chosen_edges = next(t for t in fig.data if t.name == "chosen branch")
    assert len([x for x in chosen_edges.x if x is None]) == len(chosen) - 1
    kept = next(t for t in fig.data if t.name == "kept")
    pruned = [t for t in fig.data if t.name == "pruned"]
    n_pruned = sum(1 for n in tree_event["data"]["nodes"] if n.get("pruned"))
    assert len(kept.x) + (len(pruned[0].x) if pruned else 0) == len(tree_event["data"]["nodes"])
    assert (len(pruned[0].x) if pruned else 0) == n_pruned
    outline = viz.tree_html(record)
    assert outline.count("<details") == len(tree_event["data"]["nodes"])


def test_refinement_shows_each_iteration_with_diffs(example_records: dict[str, dict[str, Any]]) -> None:
    record = example_records["self_refine"]
    event = next(e for e in record["events"] if e["kind"] == "refine")
    html = viz.refinement_html(record)
    iterations = event["data"]["iterations"]
    assert html.count("data-iteration=") == len(iterations)
    revised = [it for it in iterations if it.get("revision") is not None]
    assert html.count('class="mg-text mg-diff"') == len(revised)
    assert "stopped: " + event["data"]["stopped"] in html


def test_adaptive_stop_savings_are_counted(example_records: dict[str, dict[str, Any]]) -> None:
    record = example_records["self_consistency"]
    event = next(e for e in record["events"] if e["kind"] == "adaptive_stop")
    summary = viz.run_summary(record)
    assert summary["samples_saved_by_adaptive_stop"] == event["data"]["saved"]
    think_calls = [c for c in record["lm_calls"] if c["node_id"] == "think"]
    mean = sum(c["completion_tokens"] for c in think_calls) / len(think_calls)
    assert summary["tokens_saved_by_adaptive_stop"] == round(event["data"]["saved"] * mean)
