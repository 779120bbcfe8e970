"""The views of a run with sub-workflows: the timeline nests children under their workflow node, one row per
mapped child run, collapsible; samples, votes and tree work on nested node ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.run.scheduler import Scheduler
from app.traces.store import TraceStore
from app.viz.samples import sample_view, vote_histogram
from app.viz.timeline import timeline_figure
from app.viz.tree import search_tree_figure
from app.workflow.spec import load_workflow
from app.workflow.subworkflows import ChildLoader
from backends.fake import FakeBackend
from nodes.registry import default_registry
from tests.core.test_subworkflows import CHILD, PARENT, write

NESTED_SEARCH = """\
version: 1
name: searcher
inputs:
  question: {type: text, default: 'What is 1+1?'}
nodes:
- id: search
  kind: search
  params: {prompt: '{question}', strategy: beam, beam_width: 2, expand_k: 2, max_depth: 2, max_tokens: 8}
  inputs: {question: inputs.question}
- id: vote
  kind: voter
  params: {method: majority}
  inputs: {candidates: search.candidates}
outputs: {answer: vote.answer}
"""


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("wf")
    write(folder, "refine", CHILD)
    write(folder, "searcher", NESTED_SEARCH)
    write(folder, "parent", PARENT.replace("outputs: {answer: pick.best}", "outputs: {answer: pick.best, "
                                           "searched: deep.answer}").replace(
        "- id: pick\n", "- id: deep\n  kind: workflow\n  params: {workflow: searcher}\n"
        "  inputs: {question: inputs.question}\n- id: pick\n"))
    store = TraceStore(Path(folder) / "traces.db")
    try:
        backend = FakeBackend()
        sched = Scheduler(default_registry(), lambda spec: backend, children=ChildLoader((Path(folder),)))
        result = sched.run(load_workflow(Path(folder) / "parent.yaml"), {}, observers=[store])
        assert result.status == "succeeded", result.error
        assert store.flush()
        return store.get_run(result.run_id)
    finally:
        store.close()


def rows(fig: Any) -> list[str]:
    return [r for r in fig.layout.yaxis.categoryarray if " · calls" not in r]


def test_timeline_nests_children_under_their_workflow_node(record: dict[str, Any]) -> None:
    order = rows(timeline_figure(record))
    start = order.index("refine_each")
    assert order[start:start + 4] == ["refine_each", "refine_each/0", "refine_each/0/critique",
                                      "refine_each/0/revise"]
    assert order.index("refine_each/1") < order.index("refine_each/1/revise") < order.index("refine_each/2")
    assert order.index("deep") < order.index("deep/search") < order.index("deep/vote")
    child_runs = [t for t in timeline_figure(record).data if t.type == "bar" and t.y is not None
                  and "refine_each/2" in list(t.y)]
    assert child_runs, "each mapped child run has its own bar"


def test_a_collapsed_workflow_node_hides_its_children(record: dict[str, Any]) -> None:
    order = rows(timeline_figure(record, collapsed={"refine_each"}))
    assert "refine_each" in order and not [r for r in order if r.startswith("refine_each/")]
    assert "deep/search" in order


def test_samples_votes_and_tree_work_on_nested_nodes(record: dict[str, Any]) -> None:
    assert "refine_each/0/revise" in {n["node_id"] for n in record["nodes"]}
    assert sample_view(record, "refine_each") is not None
    assert vote_histogram(record, "deep/vote") is not None
    assert search_tree_figure(record, "deep/search") is not None
