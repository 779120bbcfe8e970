"""LiveRun folds scheduler events into what the canvas shows per node."""

from __future__ import annotations

from app.run import events as ev
from app.run.events import Event
from app.run.live_run import LiveRun


def feed(live: LiveRun, type_: str, node: str | None = None, **data: object) -> None:
    live.on_event(Event(type_, live.run_id, node, dict(data)))


def test_states_progress_and_streamed_text_per_sample() -> None:
    live = LiveRun("r1", "wf", ["think", "vote"])
    assert {n: s["state"] for n, s in live.snapshot()["nodes"].items()} == {"think": "queued", "vote": "queued"}
    feed(live, ev.RUN_START)
    feed(live, ev.NODE_START, "think", kind="sampler", params={"n": 2, "max_tokens": 4})
    for piece in ("The", " answer"):
        feed(live, ev.TOKEN, "think", sample=0, text=piece)
    feed(live, ev.TOKEN, "think", sample=1, text="Seven")
    snap = live.snapshot()
    think = snap["nodes"]["think"]
    assert think["state"] == "running" and think["tokens"] == 3
    assert think["progress"] == 3 / 8
    assert think["text"] == "[sample 2] Seven"
    assert 0 < snap["progress"] < 1 and snap["status"] == "running"
    feed(live, ev.NODE_END, "think", outputs={"candidates": {"__type__": "candidates", "candidates": []}})
    feed(live, ev.PROGRESS, None, done=1, total=2)
    feed(live, ev.NODE_ERROR, "vote", error="no answer could be extracted")
    live.finish("failed", error="node 'vote' failed")
    snap = live.snapshot()
    assert snap["finished"] and snap["status"] == "failed"
    assert snap["nodes"]["think"]["state"] == "done" and snap["nodes"]["think"]["progress"] == 1.0
    assert snap["nodes"]["vote"] == {"state": "error", "progress": 0.0, "tokens": 0, "text": "",
                                     "message": "no answer could be extracted"}
    assert snap["has_outputs"] == ["think"]
    assert live.outputs_of("think") == {"candidates": {"__type__": "candidates", "candidates": []}}


def test_cancel_marks_what_never_ran_as_skipped() -> None:
    live = LiveRun("r2", "wf", ["a", "b"])
    live.mark_running()
    feed(live, ev.NODE_CACHED, "a", outputs={"text": "x"})
    live.finish("cancelled", error="cancelled by the user")
    nodes = live.snapshot()["nodes"]
    assert nodes["a"]["state"] == "cached"
    assert nodes["b"]["state"] == "skipped" and nodes["b"]["message"] == "cancelled"
