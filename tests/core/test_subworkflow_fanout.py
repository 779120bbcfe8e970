"""Mapped sub-workflow fan-out (issue 32, 1): a run holds a bounded number of threads, its child runs are capped,
and a stop (cancel, time cap) ends the run whatever its nodes wait on."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from app.run import events as ev
from app.run.events import Event, EventRecorder
from app.run.scheduler import Budget, Scheduler
from app.workflow.spec import load_workflow
from app.workflow.subworkflows import ChildLoader
from backends.base import CancelToken
from backends.fake import FakeBackend
from nodes.registry import default_registry
from tests.core.subworkflow_trees import fanout_tree
from tests.core.test_subworkflows import CHILD, PARENT, write

REGISTRY = default_registry()


class ThreadPeak:
    """An observer noting the most threads alive at any node start."""

    def __init__(self) -> None:
        self.peak = 0
        self.starts = 0

    def on_event(self, event: Event) -> None:
        if event.type == ev.NODE_START:
            self.starts += 1
            self.peak = max(self.peak, threading.active_count())


def test_a_nested_mapped_fan_out_holds_a_bounded_number_of_threads(tmp_path: Path) -> None:
    top = fanout_tree(tmp_path, width=6, depth=3)  # 6 + 36 + 216 child runs; the old code: a thread per candidate
    sched = Scheduler(REGISTRY, lambda spec: FakeBackend(), children=ChildLoader((tmp_path,)))
    peak = ThreadPeak()
    before = threading.active_count()
    result = sched.run(load_workflow(tmp_path / f"{top}.yaml"), {}, observers=[peak], use_cache=False)
    assert result.status == "succeeded", result.error
    assert peak.starts >= 216 * 1 + 36 + 6  # every leaf's template ran, and every level's nodes
    assert peak.peak - before <= sched.max_workers + 8 + 2  # workers + the run's helpers (+ its timer)
    assert result.outputs["answer"].candidates[0].text == "[x]"


def test_child_runs_past_the_cap_stop_the_run_before_they_start(tmp_path: Path) -> None:
    top = fanout_tree(tmp_path, width=5, depth=3)  # 5 + 25 + 125 child runs
    sched = Scheduler(REGISTRY, lambda spec: FakeBackend(), children=ChildLoader((tmp_path,)))
    recorder = EventRecorder(skip=(ev.TOKEN,))
    result = sched.run(load_workflow(tmp_path / f"{top}.yaml"), {}, observers=[recorder],
                       budget=Budget(max_child_runs=40), use_cache=False)
    assert result.status == "budget_exceeded" and "max_child_runs=40" in (result.error or "")
    leaf_runs = [e for e in recorder.of_type(ev.NODE_START) if e.node_id and e.node_id.endswith("/t")]
    assert len(leaf_runs) <= 40


class Stuck(FakeBackend):
    """A backend whose `Critique` requests wait on an event and never look at the cancel token."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def generate(self, prompt: Any, params: Any, *args: Any, **kw: Any) -> Any:
        if "Critique" in str(prompt):
            self.entered.set()
            self.release.wait(60)
        return super().generate(prompt, params, *args, **kw)


def _run_in_thread(sched: Scheduler, folder: Path, **kw: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def body() -> None:
        out["result"] = sched.run(load_workflow(folder / "parent.yaml"), {}, use_cache=False, **kw)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, out


@pytest.mark.parametrize("stop", ["cancel", "time cap"])
def test_a_stop_ends_the_run_whatever_its_child_waits_on(tmp_path: Path, stop: str) -> None:
    write(tmp_path, "refine", CHILD)
    write(tmp_path, "parent", PARENT)
    backend = Stuck()
    sched = Scheduler(REGISTRY, lambda spec: backend, children=ChildLoader((tmp_path,)))
    sched.stop_grace_s = 0.3
    cancel = CancelToken()
    budget = Budget(max_seconds=0.5) if stop == "time cap" else None
    try:
        thread, out = _run_in_thread(sched, tmp_path, cancel=cancel, budget=budget)
        assert backend.entered.wait(20)
        if stop == "cancel":
            cancel.cancel("cancelled by the user")
        thread.join(30)  # the old code waited on the stuck child for good
        assert not thread.is_alive(), "the run did not end after its stop"
    finally:
        backend.release.set()
    result = out["result"]
    assert result.status == ("cancelled" if stop == "cancel" else "budget_exceeded")
    assert "left behind" not in (result.error or "")
