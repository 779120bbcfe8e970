"""The Traces tab's "Collapse sub-workflows" control: offered for a run with workflow nodes, and redrawing the
timeline with the nodes inside the chosen ones hidden (the tab's own event handlers, without a browser)."""

from __future__ import annotations

from typing import Any

import gradio as gr
import pytest

from app.service.studio import StudioService
from app.ui.app import build_app
from app.ui.traces_tab import COLLAPSE_ELEM_ID, collapsed_timeline
from app.viz.timeline import collapsible_nodes
from app.workflow.spec import load_workflow
from backends.fake import FakeBackend
from tests.core.test_subworkflows import CHILD, PARENT, write

NESTED = PARENT.replace("outputs: {answer: pick.best}", "outputs: {answer: pick.best, again: twice.answer}").replace(
    "- id: pick\n", "- id: twice\n  kind: workflow\n  params: {workflow: refine}\n"
    "  inputs: {draft: inputs.question}\n- id: pick\n")


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[StudioService, str, str]:
    root = tmp_path_factory.mktemp("traces")
    folder = root / "wf"
    folder.mkdir()
    write(folder, "refine", CHILD)
    write(folder, "parent", NESTED)
    write(folder, "flat", CHILD.replace("name: refine", "name: flat").replace(
        "  draft: {type: text}\n", "  draft: {type: text, default: 'x'}\n"))
    fake = FakeBackend(replies=["Answer: 7"])
    service = StudioService(provider=lambda spec: fake, workflows_dir=folder, examples_dir=root / "none",
                            models_dir=root / "models", trace_db=root / "t.db", dry_run=True)
    ids = []
    for name in ("parent", "flat"):
        started = service.start_run(load_workflow(folder / f"{name}.yaml").to_dict())
        assert service.wait_run(started["run_id"], timeout=30)["status"] == "succeeded"
        ids.append(started["run_id"])
    assert service.trace_store.flush()
    return service, ids[0], ids[1]


def rows(fig: Any) -> list[str]:
    return [r for r in fig.layout.yaxis.categoryarray if " · calls" not in r]


def handlers(demo: gr.Blocks, elem_id: str) -> list[Any]:
    """The functions of the events that `elem_id`'s component triggers."""
    block_id = next(i for i, b in demo.blocks.items() if getattr(b, "elem_id", None) == elem_id)
    return [f.fn for f in demo.fns.values() if any(t[0] == block_id for t in f.targets)]


def test_the_control_lists_the_workflow_nodes_and_redraws_the_timeline(ran: tuple[StudioService, str, str]) -> None:
    service, nested, flat = ran
    record = service.trace_store.get_run(nested)
    assert sorted(collapsible_nodes(record)) == ["refine_each", "twice"]  # in the timeline's row order
    order = rows(collapsed_timeline(service, nested, [], None))
    assert collapsible_nodes(record) == [r for r in order if r in ("refine_each", "twice")]
    assert collapsible_nodes(service.trace_store.get_run(flat)) == []

    demo = build_app(service)
    show_run = handlers(demo, "mg-traces-run")[0]
    shown = {getattr(k, "elem_id", None): v for k, v in show_run(nested).items()}
    choices = [c[0] if isinstance(c, tuple | list) else c for c in shown[COLLAPSE_ELEM_ID]["choices"]]
    assert choices == collapsible_nodes(record)
    assert shown[COLLAPSE_ELEM_ID]["visible"] is True and shown[COLLAPSE_ELEM_ID]["value"] == []
    flat_shown = {getattr(k, "elem_id", None): v for k, v in show_run(flat).items()}
    assert flat_shown[COLLAPSE_ELEM_ID]["visible"] is False  # nothing to collapse: no control

    (redraw,) = handlers(demo, COLLAPSE_ELEM_ID)
    full = rows(redraw(nested, []))
    assert "refine_each/0/critique" in full and "twice/revise" in full
    folded = rows(redraw(nested, ["refine_each"]))
    assert "refine_each" in folded and not [r for r in folded if r.startswith("refine_each/")]
    assert "twice/revise" in folded
    both = rows(redraw(nested, ["refine_each", "twice"]))
    assert not [r for r in both if "/" in r] and {"refine_each", "twice", "sample", "pick"} <= set(both)
    assert redraw(None, ["twice"]) is None


def test_no_timeline_for_a_run_that_is_not_there(ran: tuple[StudioService, str, str]) -> None:
    service, nested, _ = ran
    assert collapsed_timeline(service, nested, ["twice"], None) is not None
    assert collapsed_timeline(service, "no-such-run", ["twice"], None) is None
