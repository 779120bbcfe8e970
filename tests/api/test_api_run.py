"""Workflow.run / arun and RunResult on the scripted fake backend: outputs, stats, candidates, events, figures,
traces read back, bad input, and nothing left running after close."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import pytest

import metagen
from app.run import events as ev


def test_run_gives_outputs_stats_candidates_and_events(studio: metagen.Studio) -> None:
    seen: list[Any] = []
    wf = metagen.load("self_consistency").with_params({"think.n": 4})
    result = wf.run({"question": "What is 3 + 4?"}, seed=2, on_event=seen.append, studio=studio)
    assert result.status == "succeeded" and result.ok and result.error is None
    assert set(result.outputs) == {"answer", "votes"}
    assert result.stats.calls == result.stats["lm_calls"] == 4
    assert result.stats.tokens == result.stats.prompt_tokens + result.stats.completion_tokens > 0
    assert result.stats.seconds > 0
    candidates = result.candidates("think")
    assert len(candidates) == 4 and all(c.text for c in candidates)
    assert result.outputs["answer"] in {c.answer for c in candidates}
    types = [e.type for e in result.events]
    assert types[0] == ev.RUN_START and types[-1] == ev.RUN_END and ev.LM_CALL in types
    assert [e.type for e in seen] == [e.type for e in result.events if e.type != ev.TOKEN] or \
        [e.type for e in seen if e.type != ev.TOKEN] == types


def test_same_seed_same_result(studio: metagen.Studio) -> None:
    wf = metagen.load("self_consistency").with_params({"think.n": 4})
    a = wf.run(seed=5, studio=studio, progress=False)
    b = wf.run(seed=5, studio=studio, progress=False)
    assert a.run_id != b.run_id and a.outputs == b.outputs


@pytest.mark.parametrize("view", ["timeline", "samples", "votes", "tree", "tokens"])
def test_figures_of_the_trace_views(studio: metagen.Studio, view: str) -> None:
    result = metagen.load("self_consistency").with_params({"think.n": 4}).run(studio=studio)
    assert isinstance(result.figure(view), go.Figure)


def test_views_without_anything_to_draw_say_why(studio: metagen.Studio) -> None:
    result = metagen.load("self_consistency").with_params({"think.n": 4}).run(studio=studio)
    for view, why in (("tree", "search tree"), ("tokens", "log-probabilities")):
        fig = result.figure(view)
        assert isinstance(fig, go.Figure) and not fig.data
        assert why in fig.layout.annotations[0].text
    with pytest.raises(ValueError, match="view"):
        result.figure("nope")
    with pytest.raises(ValueError, match="node_id"):
        result.candidates("nope")


def test_an_untraced_run_has_no_figures(studio: metagen.Studio) -> None:
    result = metagen.load("self_consistency").run(studio=studio, trace=False)
    assert result.status == "succeeded"
    with pytest.raises(ValueError, match="trace=True"):
        result.figure("timeline")
    with pytest.raises(ValueError, match="no run"):
        metagen.trace(result.run_id, studio=studio)
    assert "Not traced" in result._repr_html_()


def test_traces_and_trace_read_runs_back(studio: metagen.Studio) -> None:
    result = metagen.load("self_consistency").with_params({"think.n": 4}).run(seed=1, studio=studio)
    listed = metagen.traces(limit=5, studio=studio)
    assert listed[0]["id"] == result.run_id
    again = metagen.trace(result.run_id[:8], studio=studio)
    assert again.run_id == result.run_id and again.status == result.status
    assert again.outputs["answer"] == result.outputs["answer"]
    assert [c.text for c in again.candidates("think")] == [c.text for c in result.candidates("think")]
    assert again.stats.calls == result.stats.calls
    assert isinstance(again.figure("timeline"), go.Figure)


def test_arun_in_an_event_loop(studio: metagen.Studio) -> None:
    wf = metagen.load("self_consistency").with_params({"think.n": 2})

    async def both() -> list[metagen.RunResult]:
        return list(await asyncio.gather(wf.arun(seed=1, studio=studio), wf.arun(seed=2, studio=studio)))

    results = asyncio.run(both())
    assert [r.status for r in results] == ["succeeded", "succeeded"]


def test_budget_stops_the_run(studio: metagen.Studio) -> None:
    result = metagen.load("self_consistency").run(budget={"max_lm_calls": 2}, studio=studio)
    assert result.status == "budget_exceeded" and result.error


@pytest.mark.parametrize(("kwargs", "error", "named"), [
    ({"inputs": "What is 3 + 4?"}, TypeError, "inputs"),
    ({"seed": "1"}, TypeError, "seed"),
    ({"seed": True}, TypeError, "seed"),
    ({"budget": 3}, TypeError, "budget"),
    ({"budget": {"max_calls": 3}}, ValueError, "budget"),
    ({"budget": {"max_lm_calls": -1}}, ValueError, "max_lm_calls"),
    ({"trace": "yes"}, TypeError, "trace"),
    ({"on_event": 3}, TypeError, "on_event"),
    ({"studio": "default"}, TypeError, "studio"),
])
def test_bad_run_arguments_name_the_argument(studio: metagen.Studio, kwargs: dict[str, Any],
                                             error: type[Exception], named: str) -> None:
    wf = metagen.load("self_consistency")
    options = {"studio": studio, **kwargs}
    with pytest.raises(error, match=named):
        wf.run(**options)


def test_unknown_or_bad_inputs_raise_workflow_error(studio: metagen.Studio) -> None:
    with pytest.raises(metagen.WorkflowError, match="unknown_input"):
        metagen.load("self_consistency").run({"nope": "x"}, studio=studio)


def test_run_display_is_offline_html(studio: metagen.Studio) -> None:
    result = metagen.load("self_consistency").with_params({"think.n": 2}).run(studio=studio)
    html = result._repr_html_()
    assert result.run_id in html and "plotly" in html.lower()
    assert "<script src=" not in html and 'src="https://' not in html, "plotly.js is inlined, not fetched"
    assert len(html) > 1_000_000  # the bundle itself


def test_close_leaves_no_threads_and_refuses_later_use(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    studio = metagen.Studio(dry_run=True, trace_db=tmp_path / "t.db", workflows_dir=tmp_path / "wf")
    with studio:
        metagen.load("self_consistency").with_params({"think.n": 2}).run(studio=studio)
        metagen.evaluate(metagen.load("self_consistency"), [{"question": "1+1?", "answer": "2"}], metric="number",
                         studio=studio, progress=False)
    assert studio.closed
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == []
    with pytest.raises(ValueError, match="closed"):
        metagen.load("self_consistency").run(studio=studio)
    studio.close()  # idempotent


def test_cancelling_the_arun_task_cancels_the_run(studio: metagen.Studio) -> None:
    from app.run.providers import fake_provider

    studio.service.scheduler.provider = fake_provider(latency_s=0.3)  # a slow model, so the run is still going
    wf = metagen.load("self_consistency").with_params({"think.n": 8, "think.batch_size": 1})

    async def start_then_cancel() -> None:
        task = asyncio.ensure_future(wf.arun(studio=studio, progress=False))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(start_then_cancel())
    assert metagen.traces(limit=1, studio=studio)[0]["status"] == "cancelled"


@pytest.mark.parametrize(("call", "error", "named"), [
    (lambda s: metagen.traces(limit=0, studio=s), ValueError, "limit"),
    (lambda s: metagen.traces(limit="5", studio=s), TypeError, "limit"),
    (lambda s: metagen.trace(5, studio=s), TypeError, "run_id"),
    (lambda s: metagen.trace("nope", studio=s), ValueError, "nope"),
    (lambda s: metagen.nodes(studio="x"), TypeError, "studio"),
    (lambda s: metagen.Studio(dry_run="yes"), TypeError, "dry_run"),
    (lambda s: metagen.Studio(trace_db=3), TypeError, "trace_db"),
])
def test_bad_arguments_of_the_module_functions(studio: metagen.Studio, call: Any, error: type[Exception],
                                                named: str) -> None:
    with pytest.raises(error, match=named):
        call(studio)


def test_tree_and_token_figures_draw_when_the_run_has_them(studio: metagen.Studio) -> None:
    tree = metagen.load("beam_search").run(studio=studio, progress=False).figure("tree")
    assert tree.data and not tree.layout.annotations
    sampled = metagen.load("self_consistency").with_params({"think.n": 2, "think.logprobs": True})
    tokens = sampled.run(studio=studio, progress=False).figure("tokens")
    assert len(tokens.data) == 1 and all(0 <= p <= 1 for p in tokens.data[0].y)


def test_ctrl_c_cancels_the_run_and_leaves_nothing_running(studio: metagen.Studio) -> None:
    import os
    import signal

    from app.run.providers import fake_provider

    studio.service.scheduler.provider = fake_provider(latency_s=0.3)
    wf = metagen.load("self_consistency").with_params({"think.n": 8, "think.batch_size": 1})
    before = set(threading.enumerate())
    threading.Timer(0.6, lambda: os.kill(os.getpid(), signal.SIGINT)).start()  # a notebook's interrupt
    with pytest.raises(KeyboardInterrupt):
        wf.run(studio=studio, progress=False)
    assert [t for t in threading.enumerate() if t not in before and t.name == "run" and t.is_alive()] == []
    assert metagen.traces(limit=1, studio=studio)[0]["status"] == "cancelled"
