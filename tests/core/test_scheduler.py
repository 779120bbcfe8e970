"""Scheduler: concurrency, caching, cancel, budgets, seeds, failures and events (fake backend)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from app.run import events as ev
from app.run.events import EventRecorder
from app.run.scheduler import Budget, Scheduler, derive_seed
from app.workflow.problems import WorkflowError
from app.workflow.spec import load_workflow_text
from backends.base import CancelToken, ModelSpec, SamplingParams
from backends.fake import FakeBackend
from nodes.base import CANDIDATES, TEXT, Candidate, CandidateSet, NodeError, NodeKind, Param, Port, render_template
from nodes.registry import NodeRegistry


class Gen(NodeKind):
    kind = "t_gen"
    title = "gen"
    category = "generate"
    description = "one completion of its prompt"
    outputs = (Port("text", TEXT),)
    params = (Param("prompt", "text", "{q}"), Param("n", "int", 1, min=1))
    variadic_inputs = True
    uses_model = True

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: Any) -> dict[str, Any]:
        prompt = render_template(params["prompt"], inputs)
        result = ctx.generate(prompt, SamplingParams(temperature=0.7, seed=ctx.seed), n=params["n"])
        return {"text": " | ".join(c.text for c in result.completions)}


class Sample(NodeKind):
    kind = "t_sample"
    title = "sample"
    category = "generate"
    description = "n seeded completions"
    outputs = (Port("candidates", CANDIDATES),)
    params = (Param("prompt", "text", "{q}"), Param("n", "int", 4, min=1))
    variadic_inputs = True
    uses_model = True

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: Any) -> dict[str, Any]:
        n = params["n"]
        result = ctx.generate(render_template(params["prompt"], inputs), SamplingParams(temperature=1.0),
                              n=n, seeds=[ctx.seed + i for i in range(n)])
        return {"candidates": CandidateSet([Candidate(c.text, i, seed=c.seed) for i, c in
                                            enumerate(result.completions)])}


class Boom(NodeKind):
    kind = "t_boom"
    title = "boom"
    category = "text"
    description = "always fails"
    inputs = (Port("x", TEXT),)
    outputs = (Port("text", TEXT),)

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: Any) -> dict[str, Any]:
        raise NodeError(f"cannot handle {inputs['x'][:10]!r}")


class Slow(NodeKind):
    kind = "t_slow"
    title = "slow"
    category = "text"
    description = "loops until cancelled"
    outputs = (Port("text", TEXT),)
    started = threading.Event()

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: Any) -> dict[str, Any]:
        Slow.started.set()
        for _ in range(1000):
            ctx.cancel.raise_if_cancelled()
            time.sleep(0.01)
        return {"text": "finished"}


REGISTRY = NodeRegistry([Gen, Sample, Boom, Slow])

TWO_BRANCHES = """
version: 1
name: branches
models:
  main: {source: fake}
inputs:
  q: {type: text, default: question}
nodes:
- id: left
  kind: t_gen
  params: {prompt: 'L {q}'}
  inputs: {q: inputs.q}
- id: right
  kind: t_gen
  params: {prompt: 'R {q}'}
  inputs: {q: inputs.q}
- id: join
  kind: t_gen
  params: {prompt: '{a} + {b}'}
  inputs: {a: left.text, b: right.text}
outputs: {answer: join.text}
"""


def scheduler(backend: FakeBackend | None = None, **kw: Any) -> tuple[Scheduler, FakeBackend]:
    backend = backend or FakeBackend()
    return Scheduler(REGISTRY, lambda spec: backend, **kw), backend


def test_independent_branches_overlap_in_time() -> None:
    sched, backend = scheduler(FakeBackend(latency_s=0.3))
    result = sched.run(load_workflow_text(TWO_BRANCHES), {})
    assert result.status == "succeeded"
    calls = {c["prompt"][:1]: c for c in backend.calls}
    left, right = calls["L"], calls["R"]
    assert left["start"] < right["end"] and right["start"] < left["end"], "branches did not run concurrently"
    join = next(c for c in backend.calls if "+" in c["prompt"])
    assert join["start"] >= max(left["end"], right["end"])


def test_same_seed_same_outputs_and_different_seed_differs() -> None:
    wf = load_workflow_text(TWO_BRANCHES.replace("params: {prompt: 'L {q}'}", "params: {prompt: 'L {q}', n: 6}"))
    sched, _ = scheduler()
    a = sched.run(wf, {}, seed=5, use_cache=False)
    b = sched.run(wf, {}, seed=5, use_cache=False)
    c = sched.run(wf, {}, seed=6, use_cache=False)
    assert a.outputs == b.outputs
    assert a.outputs != c.outputs
    assert derive_seed(5, "left") != derive_seed(5, "right")


def test_editing_one_node_reruns_only_its_descendants() -> None:
    sched, _ = scheduler()
    wf = load_workflow_text(TWO_BRANCHES)
    first = sched.run(wf, {}, seed=1)
    assert first.stats.nodes_run == 3
    rec = EventRecorder()
    edited = load_workflow_text(TWO_BRANCHES.replace("R {q}", "R2 {q}"))
    second = sched.run(edited, {}, seed=1, observers=[rec])
    ran = {e.node_id for e in rec.of_type(ev.NODE_START)}
    cached = {e.node_id for e in rec.of_type(ev.NODE_CACHED)}
    assert ran == {"right", "join"}
    assert cached == {"left"}
    assert second.stats.nodes_cached == 1
    # a changed input value invalidates everything that reads it
    rec = EventRecorder()
    sched.run(edited, {"q": "other"}, seed=1, observers=[rec])
    assert {e.node_id for e in rec.of_type(ev.NODE_START)} == {"left", "right", "join"}


def test_failing_node_fails_run_with_node_id_kind_and_inputs() -> None:
    text = TWO_BRANCHES.replace("""- id: join
  kind: t_gen
  params: {prompt: '{a} + {b}'}
  inputs: {a: left.text, b: right.text}""", """- id: join
  kind: t_boom
  inputs: {x: left.text}""")
    sched, _ = scheduler()
    rec = EventRecorder()
    result = sched.run(load_workflow_text(text), {}, observers=[rec])
    assert result.status == "failed"
    assert result.failure is not None
    assert result.failure.node_id == "join" and result.failure.kind == "t_boom"
    assert "cannot handle" in result.error and "inputs" in result.error
    assert [e.node_id for e in rec.of_type(ev.NODE_ERROR)] == ["join"]
    assert rec.of_type(ev.RUN_END)[0].data["status"] == "failed"


def test_cancel_stops_a_running_node() -> None:
    text = """
version: 1
name: slow
nodes:
- id: s
  kind: t_slow
outputs: {x: s.text}
"""
    sched, _ = scheduler()
    token = CancelToken()
    Slow.started.clear()
    threading.Thread(target=lambda: (Slow.started.wait(5), token.cancel("user pressed cancel")), daemon=True).start()
    t0 = time.perf_counter()
    result = sched.run(load_workflow_text(text), {}, cancel=token)
    assert result.status == "cancelled"
    assert "user pressed cancel" in result.error
    assert time.perf_counter() - t0 < 5  # it stopped long before the node's 10 s loop


def test_cancel_reaches_backend_requests() -> None:
    sched, _ = scheduler(FakeBackend(latency_s=10))
    token = CancelToken()
    threading.Timer(0.2, token.cancel).start()
    result = sched.run(load_workflow_text(TWO_BRANCHES), {}, cancel=token)
    assert result.status == "cancelled"
    assert result.stats.completion_tokens == 0


def test_budget_max_lm_calls_stops_run() -> None:
    text = TWO_BRANCHES.replace("params: {prompt: '{a} + {b}'}", "params: {prompt: '{a} + {b}', n: 8}")
    wf = load_workflow_text(text)
    sched, _ = scheduler()
    result = sched.run(wf, {}, budget=Budget(max_lm_calls=5))
    assert result.status == "budget_exceeded"
    assert "max_lm_calls=5" in result.error
    assert result.stats.lm_calls <= 5


def test_budget_max_tokens_and_seconds() -> None:
    sched, _ = scheduler()
    result = sched.run(load_workflow_text(TWO_BRANCHES), {}, budget=Budget(max_tokens=3))
    assert result.status == "budget_exceeded" and "max_tokens" in result.error
    sched, _ = scheduler(FakeBackend(latency_s=5))
    result = sched.run(load_workflow_text(TWO_BRANCHES), {}, budget=Budget(max_seconds=0.2))
    assert result.status == "budget_exceeded" and "max_seconds" in result.error


def test_events_cover_run_nodes_and_lm_calls() -> None:
    wf = load_workflow_text(TWO_BRANCHES.replace("params: {prompt: 'L {q}'}", "params: {prompt: 'L {q}', n: 3}"))
    sched, _ = scheduler()
    rec = EventRecorder()
    result = sched.run(wf, {}, observers=[rec])
    types = [e.type for e in rec.events]
    assert types[0] == ev.RUN_START and types[-1] == ev.RUN_END
    calls = rec.of_type(ev.LM_CALL)
    assert len(calls) == result.stats.lm_calls == 5
    assert sum(c.data["completion_tokens"] for c in calls) == result.stats.completion_tokens
    assert {c.data["sample_index"] for c in calls if c.node_id == "left"} == {0, 1, 2}
    start = rec.of_type(ev.RUN_START)[0].data
    assert "workflow_yaml" in start and start["inputs"] == {"q": "question"}


def test_invalid_workflow_or_inputs_refused_before_any_model_call() -> None:
    touched: list[ModelSpec] = []

    def provider(spec: ModelSpec) -> FakeBackend:
        touched.append(spec)
        return FakeBackend()

    sched = Scheduler(REGISTRY, provider)
    with pytest.raises(WorkflowError) as exc:
        sched.run(load_workflow_text(TWO_BRANCHES.replace("left.text", "nowhere.text")), {})
    assert [i.code for i in exc.value.issues] == ["unknown_ref"]
    with pytest.raises(WorkflowError) as exc:
        sched.run(load_workflow_text(TWO_BRANCHES), {"nope": "x"})
    assert exc.value.issues[0].code == "unknown_input"
    assert touched == []


def test_observer_failure_does_not_break_run() -> None:
    class Broken:
        def on_event(self, event: ev.Event) -> None:
            raise RuntimeError("observer bug")

    sched, _ = scheduler()
    assert sched.run(load_workflow_text(TWO_BRANCHES), {}, observers=[Broken()]).status == "succeeded"


def test_candidate_outputs_are_json_round_trippable() -> None:
    from nodes.base import from_jsonable, to_jsonable

    cs = CandidateSet([Candidate("a", 0, answer="1", score=0.5)], prompt="p", winner=0)
    assert from_jsonable(to_jsonable({"c": cs}))["c"] == cs
