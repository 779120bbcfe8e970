"""Sub-workflows at run time (fake backend): mapped children at once, node paths, cache, cancel, budgets, traces."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from app.run import events as ev
from app.run.events import EventRecorder
from app.run.scheduler import SUBWORKFLOWS_NOTE, Budget, Scheduler
from app.traces.store import TraceStore
from app.workflow.spec import load_workflow
from app.workflow.subworkflows import ChildLoader
from backends.base import CancelToken
from backends.fake import FakeBackend
from nodes.registry import default_registry
from tests.core.test_subworkflows import CHILD, PARENT, write

REGISTRY = default_registry()


class BarrierBackend(FakeBackend):
    """A fake whose `Revise` requests wait until `parties` of them are in flight together: the mapped children's
    requests only get through when the children run at once (as the engine would batch them)."""

    def __init__(self, parties: int, **kw: Any) -> None:
        super().__init__(**kw)
        self.barrier = threading.Barrier(parties, timeout=10)
        self.together: list[int] = []

    def generate(self, prompt: Any, params: Any, *args: Any, **kw: Any) -> Any:
        if "Revise" in str(prompt):
            self.together.append(self.barrier.wait())
        return super().generate(prompt, params, *args, **kw)


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    write(tmp_path, "refine", CHILD)
    write(tmp_path, "parent", PARENT)
    return tmp_path


def run(folder: Path, backend: FakeBackend, name: str = "parent", sched: Scheduler | None = None,
        **kw: Any) -> tuple[Any, EventRecorder, Scheduler]:
    sched = sched or Scheduler(REGISTRY, lambda spec: backend, children=ChildLoader((folder,)))
    recorder = EventRecorder(skip=(ev.TOKEN,))
    result = sched.run(load_workflow(folder / f"{name}.yaml"), {}, observers=[recorder], **kw)
    return result, recorder, sched


def started(recorder: EventRecorder) -> list[str]:
    return [e.node_id for e in recorder.of_type(ev.NODE_START) if e.node_id]


def test_map_over_three_candidates_runs_three_children_at_once(folder: Path) -> None:
    backend = BarrierBackend(3)
    result, recorder, _ = run(folder, backend)
    assert result.status == "succeeded", result.error
    assert sorted(backend.together) == [0, 1, 2]  # the three Revise requests were in flight together
    ids = started(recorder)
    for i in range(3):
        assert f"refine_each/{i}/critique" in ids and f"refine_each/{i}/revise" in ids
    end = next(e for e in recorder.of_type(ev.NODE_END) if e.node_id == "refine_each")
    cands = end.data["outputs"]["candidates"]["candidates"]
    assert [c["meta"]["run"] for c in cands] == ["refine_each/0", "refine_each/1", "refine_each/2"]
    assert all(c["text"].startswith("echo[") and "Revise" in c["text"] for c in cands)
    assert {e.run_id for e in recorder.events} == {result.run_id}
    calls = [e.node_id for e in recorder.of_type(ev.LM_CALL)]
    assert calls.count("sample") == 3 and sum(1 for c in calls if c and c.startswith("refine_each/")) == 6


def test_same_seed_same_outputs_across_the_tree(folder: Path) -> None:
    backend = FakeBackend()
    a, _, sched = run(folder, backend, seed=3, use_cache=False)
    b, _, _ = run(folder, backend, sched=sched, seed=3, use_cache=False)
    c, _, _ = run(folder, backend, sched=sched, seed=4, use_cache=False)
    assert a.outputs == b.outputs
    assert a.node_outputs["refine_each"] != c.node_outputs["refine_each"]


def test_editing_the_child_reruns_only_the_nodes_that_use_it(folder: Path) -> None:
    backend = FakeBackend()
    first, _, sched = run(folder, backend)
    assert first.status == "succeeded" and first.stats.nodes_cached == 0
    second, rec2, _ = run(folder, backend, sched=sched)
    assert started(rec2) == [] and second.stats.nodes_cached == 3  # sample, refine_each, pick
    write(folder, "refine", CHILD.replace("Revise {draft} using {critique}", "Rewrite {draft} using {critique}"))
    third, rec3, _ = run(folder, backend, sched=sched)
    cached = [e.node_id for e in rec3.of_type(ev.NODE_CACHED)]
    assert "sample" in cached  # the parent's nodes that do not use the child stay cached
    assert [n for n in started(rec3) if "/" not in n] == ["refine_each", "pick"]
    inside = [n for n in started(rec3) if "/" in n]
    assert sorted(inside) == [f"refine_each/{i}/revise" for i in range(3)]  # the unchanged critique: cached
    assert third.stats.nodes_cached == 1 + 3 and third.stats.nodes_run == 1 + 3 + 1


def test_cancel_during_a_mapped_child_cancels_all(folder: Path) -> None:
    cancel = CancelToken()
    backend = FakeBackend(latency_s=0.05)
    entered = threading.Event()  # set once the three children are inside their critique
    inside: list[str] = []

    class Stalling(FakeBackend):
        def generate(self, prompt: Any, params: Any, *args: Any, **kw: Any) -> Any:
            if "Critique" in str(prompt):
                inside.append(str(prompt))
                if len(inside) == 3:
                    entered.set()
                for _ in range(500):
                    kw["cancel"].raise_if_cancelled()
                    threading.Event().wait(0.01)
            return backend.generate(prompt, params, *args, **kw)

    threading.Thread(target=lambda: entered.wait(10) and cancel.cancel("cancelled by the user"), daemon=True).start()
    result, recorder, _ = run(folder, Stalling(), cancel=cancel)
    assert result.status == "cancelled"
    errors = {e.node_id for e in recorder.of_type(ev.NODE_ERROR)}
    assert {f"refine_each/{i}/critique" for i in range(3)} <= errors and "refine_each" in errors
    assert not [e for e in recorder.of_type(ev.NODE_END) if e.node_id and "revise" in e.node_id]
    assert "pick" in {e.node_id for e in recorder.of_type(ev.NODE_SKIPPED)}


def test_budgets_count_the_whole_tree(folder: Path) -> None:
    result, _, _ = run(folder, FakeBackend(), budget=Budget(max_lm_calls=6))
    assert result.status == "budget_exceeded"  # sample 3 + critique 3 = 6; a revise would pass the budget
    assert result.stats.lm_calls <= 6
    unbounded, _, _ = run(folder, FakeBackend())
    assert unbounded.stats.lm_calls == 9 and unbounded.stats.nodes_run == 9


def test_unwired_child_inputs_take_the_childs_default(folder: Path) -> None:
    text = PARENT.replace("inputs: {draft: sample.candidates, question: inputs.question}",
                          "inputs: {draft: sample.candidates}")
    write(folder, "nodefault", text)
    result, recorder, _ = run(folder, FakeBackend(), name="nodefault")
    assert result.status == "succeeded"
    prompts = [e.data["prompt"] for e in recorder.of_type(ev.LM_CALL) if e.node_id == "refine_each/0/critique"]
    assert prompts and "for What is 2+2?" in prompts[0]


def test_a_failing_child_fails_the_parent_naming_the_path(folder: Path) -> None:
    class Failing(FakeBackend):
        def generate(self, prompt: Any, params: Any, *args: Any, **kw: Any) -> Any:
            if "Revise" in str(prompt):
                from backends.base import BackendError

                raise BackendError("the engine fell over")
            return super().generate(prompt, params, *args, **kw)

    result, _, _ = run(folder, Failing())
    assert result.status == "failed"
    assert result.failure is not None and result.failure.node_id == "refine_each"
    assert "refine_each/" in result.failure.message and "/revise" in result.failure.message


def test_trace_export_and_import_keep_the_children(folder: Path, tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "traces.db")
    try:
        sched = Scheduler(REGISTRY, lambda spec: FakeBackend(), children=ChildLoader((folder,)))
        result = sched.run(load_workflow(folder / "parent.yaml"), {}, observers=[store])
        assert store.flush()
        write(folder, "refine", CHILD.replace("Revise", "Changed"))  # the stored run keeps the child as it ran
        document = store.export_run(result.run_id)
        new_id = store.import_run(document)
        record = store.get_run(new_id)
        nodes = {n["node_id"] for n in record["nodes"]}
        assert {"refine_each", "refine_each/2/revise", "pick"} <= nodes
        notes = [e for e in record["events"] if e.get("kind") == SUBWORKFLOWS_NOTE]
        assert len(notes) == 1
        assert "Revise {draft}" in notes[0]["data"]["workflows"]["refine"]
        assert {c["node_id"] for c in record["lm_calls"]} >= {"refine_each/0/critique", "refine_each/1/revise"}
    finally:
        store.close()


def test_the_live_run_shows_children_on_their_workflow_node(folder: Path) -> None:
    from app.run.live_run import LiveRun

    wf = load_workflow(folder / "parent.yaml")
    live = LiveRun("r1", wf.name, [n.id for n in wf.nodes])
    sched = Scheduler(REGISTRY, lambda spec: FakeBackend(), children=ChildLoader((folder,)))
    result = sched.run(wf, {}, observers=[live], run_id="r1")
    assert result.status == "succeeded"
    snap = live.snapshot()
    assert set(snap["nodes"]) == {"sample", "refine_each", "pick"}  # the canvas draws the top-level nodes
    node = snap["nodes"]["refine_each"]
    assert node["message"] == "6 sub-workflow node(s) done" and node["state"] == "done"
    assert node["tokens"] > 0 and node["text"].startswith("[")
    assert live.outputs_of("refine_each/1/revise") is not None


def test_a_stored_run_re_runs_with_its_children_as_they_ran(folder: Path, tmp_path: Path) -> None:
    """The children's YAML kept with a run (the `subworkflows` note) is a loader's `texts`: the run comes back the
    same after the child file changed."""
    from app.workflow.spec import load_workflow_text

    store = TraceStore(tmp_path / "traces.db")
    try:
        first = Scheduler(REGISTRY, lambda spec: FakeBackend(), children=ChildLoader((folder,))).run(
            load_workflow(folder / "parent.yaml"), {}, seed=2, observers=[store])
        assert store.flush()
        record = store.get_run(first.run_id)
    finally:
        store.close()
    write(folder, "refine", CHILD.replace("Revise", "Rewrite"))
    (note,) = [e for e in record["events"] if e.get("kind") == SUBWORKFLOWS_NOTE]
    kept = ChildLoader((), trusted=False, texts=note["data"]["workflows"])
    again = Scheduler(REGISTRY, lambda spec: FakeBackend(), children=kept).run(
        load_workflow_text(record["run"]["workflow_yaml"]), {}, seed=2)
    assert again.outputs == first.outputs
    changed = Scheduler(REGISTRY, lambda spec: FakeBackend(), children=ChildLoader((folder,))).run(
        load_workflow(folder / "parent.yaml"), {}, seed=2)
    assert changed.outputs != first.outputs
