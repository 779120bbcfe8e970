"""The Traces tab's tree view per search strategy: DVTS subtrees coloured, particle copies and MCTS visits shown."""

from __future__ import annotations

from typing import Any

from app import viz
from app.run.providers import fake_provider
from app.run.scheduler import Scheduler
from app.traces import TraceStore
from app.viz.tree import SUBTREE_COLORS, marker_label, strategy_note
from app.workflow.spec import workflow_from_dict
from nodes.registry import default_registry


def stepper(prompt: str, seed: int) -> str:
    done = prompt.count("step ")
    return f"Answer: {7 + seed % 2}\n" if done >= 2 else f"step {seed % 5} of {done}\nmore"


def record_of(trace_store: TraceStore, **params: Any) -> dict[str, Any]:
    wf = workflow_from_dict({
        "version": 1, "name": "t", "inputs": {"question": {"type": "text", "default": "What is 3 + 4?"}},
        "nodes": [{"id": "search", "kind": "search", "inputs": {"question": "inputs.question"},
                   "params": {"prompt": "{question}", "step_delimiter": "\n", "max_depth": 3,
                              "scorer": "likelihood", **params}}],
        "outputs": {"text": "search.text"}})
    result = Scheduler(default_registry(), fake_provider(reply_fn=stepper)).run(wf, observers=[trace_store])
    return trace_store.get_run(result.run_id)


def traces_named(fig: Any) -> dict[str, Any]:
    return {t.name: t for t in fig.data}


def test_dvts_subtrees_get_their_own_colours(trace_store: TraceStore) -> None:
    record = record_of(trace_store, strategy="dvts", beam_width=2, expand_k=2, subtrees=2)
    fig = viz.search_tree_figure(record)
    named = traces_named(fig)
    # every subtree's branches are drawn in its colour (the chosen subtree's kept ones are the chosen path)
    colors = {name.split()[1]: t.line.color for name, t in named.items() if name.startswith("subtree")}
    assert set(colors) == {"0", "1"} and set(colors.values()) <= set(SUBTREE_COLORS)
    assert colors["0"] != colors["1"]
    assert "2 subtrees" in fig.layout.title.text
    assert "subtree 1" in viz.tree_html(record)


def test_particles_show_generations_and_copies(trace_store: TraceStore) -> None:
    record = record_of(trace_store, strategy="particles", particles=4)
    fig = viz.search_tree_figure(record)
    kept = traces_named(fig)["kept"]
    assert any(label.startswith("×") for label in kept.text)
    assert "resampling generations" in fig.layout.title.text
    assert "generation 1" in viz.tree_html(record)


def test_mcts_shows_visit_counts(trace_store: TraceStore) -> None:
    record = record_of(trace_store, strategy="mcts", simulations=3, expand_k=2)
    fig = viz.search_tree_figure(record)
    kept = traces_named(fig)["kept"]
    assert all(label.isdigit() for label in kept.text if label)
    assert "simulation values at the root" in fig.layout.title.text
    assert "visits · mean value" in viz.tree_html(record)


def test_notes_and_labels_by_hand() -> None:
    assert strategy_note({"subtree": 2}) == "subtree 2"
    assert strategy_note({"generation": 3, "copies": 1}) == "generation 3 · 1 copy"
    assert strategy_note({"visits": 4, "value": 2.0, "rollout": True}) == "4 visits · mean value 0.500 · rollout"
    assert strategy_note({"id": 1}) == ""
    assert marker_label({"visits": 4}) == "4" and marker_label({"copies": 2}) == "×2"
    assert marker_label({"copies": 0}) == ""


def test_the_run_summary_counts_thinking_tokens_apart(trace_store: TraceStore) -> None:
    wf = workflow_from_dict({
        "version": 1, "name": "t", "inputs": {"question": {"type": "text", "default": "3 + 4?"}},
        "nodes": [{"id": "g", "kind": "generator", "inputs": {"question": "inputs.question"},
                   "params": {"prompt": "{question}", "think": "on"}}],
        "outputs": {"text": "g.text"}})

    def reply(prompt: str, seed: int) -> str:
        return "a b c</think>" if prompt.endswith("<think>") else "Answer: 7"

    result = Scheduler(default_registry(), fake_provider(reply_fn=reply)).run(wf, observers=[trace_store])
    record = trace_store.get_run(result.run_id)
    summary = viz.run_summary(record)
    assert (summary["thinking_tokens"], summary["completion_tokens"]) == (3, 5)
    assert "of them thinking tokens" in viz.summary_html(record)
    plain = record_of(trace_store, strategy="beam")
    assert viz.run_summary(plain)["thinking_tokens"] == 0 and "thinking tokens" not in viz.summary_html(plain)


def test_ab_mcts_marks_wider_and_deeper_steps(trace_store: TraceStore) -> None:
    record = record_of(trace_store, strategy="ab_mcts", max_expansions=8, expand_k=2)
    fig = viz.search_tree_figure(record)
    named = traces_named(fig)
    kept = named["kept"]
    assert kept.text[0] == "8"  # the root: its visits (every step made below it)
    assert set(kept.text[1:]) <= {"wider", "deeper"} and {"wider", "deeper"} <= set(kept.text)
    assert named["wider branch"].line.color != named["deeper branch"].line.color
    assert "wider" in fig.layout.title.text and "deeper" in fig.layout.title.text
    assert "wider" in viz.tree_html(record)
    assert strategy_note({"branch": "deeper", "visits": 2, "value": 1.0}).startswith("deeper · 2 visits")
    assert marker_label({"branch": "wider", "visits": 3}) == "wider"
