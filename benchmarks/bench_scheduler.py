"""Scheduler overhead on random DAGs (10 / 100 / 1,000 nodes) with a zero-latency fake backend.

Side by side in one process: the full scheduler (validation, graph compile, thread pool, signatures, cache,
events) versus calling the same node functions directly in topological order. The difference divided by
the node count is the per-node scheduling overhead. Target: < 1 ms per node at 1,000 nodes, linear growth.
Run: .venv/bin/python benchmarks/bench_scheduler.py
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import networkx as nx

from app.run.events import Event
from app.run.scheduler import Scheduler
from app.workflow.spec import InputSpec, NodeSpec, Workflow
from app.workflow.validation import build_graph
from backends.base import SamplingParams
from backends.fake import FakeBackend
from nodes.base import TEXT, NodeKind, Param, Port
from nodes.registry import NodeRegistry


class Step(NodeKind):
    kind = "step"
    title = "step"
    category = "text"
    description = "joins its inputs and asks the (zero-latency) fake model once"
    outputs = (Port("text", TEXT),)
    params = (Param("tag", "str", "", description="label"),)
    variadic_inputs = True
    uses_model = True

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: Any) -> dict[str, Any]:
        prompt = params["tag"] + " " + " ".join(str(v)[:20] for v in inputs.values())
        return {"text": ctx.generate(prompt, SamplingParams(max_tokens=4)).completions[0].text}


class _DirectCtx:
    """Just enough context to call node functions without the scheduler."""

    def __init__(self, backend: FakeBackend) -> None:
        self._backend = backend

    def generate(self, prompt: str, params: SamplingParams, **_: Any) -> Any:
        return self._backend.generate(prompt, params)


class _Count:
    def __init__(self) -> None:
        self.n = 0

    def on_event(self, event: Event) -> None:
        self.n += 1


def random_dag(n: int, seed: int) -> Workflow:
    rng = random.Random(seed)
    wf = Workflow(name=f"random-{n}", models={"main": {"source": "fake"}},
                  inputs={"q": InputSpec(type="text", default="x")})
    for i in range(n):
        parents = rng.sample(range(max(0, i - 20), i), k=min(i, rng.randint(1, 3))) if i else []
        wiring = {f"p{j}": f"n{j}.text" for j in parents} or {"q": "inputs.q"}
        wf.nodes.append(NodeSpec(id=f"n{i}", kind="step", params={"tag": f"t{i}"}, inputs=wiring))
    wf.outputs = {"last": f"n{n - 1}.text"}
    return wf


def direct(wf: Workflow, backend: FakeBackend) -> float:
    start = time.perf_counter()
    values: dict[str, Any] = {}
    ctx = _DirectCtx(backend)
    by_id = {node.id: node for node in wf.nodes}
    for node_id in nx.topological_sort(build_graph(wf)):
        node = by_id[node_id]
        got = {p: ("x" if r.startswith("inputs.") else values[r.split(".")[0]]) for p, r in node.inputs.items()}
        values[node_id] = Step().run(got, {"tag": node.params["tag"]}, ctx)["text"]
    return time.perf_counter() - start


def main() -> None:
    registry = NodeRegistry([Step])
    backend = FakeBackend()
    print(f"{'nodes':>6} {'scheduler ms':>13} {'direct ms':>10} {'overhead/node ms':>17} {'ratio':>7} "
          f"{'cached rerun ms':>16} {'events':>7}")
    per_node = {}
    for n in (10, 100, 1000):
        wf = random_dag(n, seed=n)
        sched_times, direct_times, rerun_times = [], [], []
        events = 0
        for rep in range(5):
            scheduler = Scheduler(registry, lambda spec: backend, max_workers=4)
            counter = _Count()
            t0 = time.perf_counter()
            result = scheduler.run(wf, {}, seed=rep, observers=[counter])
            sched_times.append(time.perf_counter() - t0)
            assert result.status == "succeeded", result.error
            events = counter.n
            t0 = time.perf_counter()
            scheduler.run(wf, {}, seed=rep)
            rerun_times.append(time.perf_counter() - t0)
            direct_times.append(direct(wf, backend))
        s, d, r = (statistics.median(x) * 1000 for x in (sched_times, direct_times, rerun_times))
        per_node[n] = (s - d) / n
        print(f"{n:>6} {s:>13.1f} {d:>10.1f} {per_node[n]:>17.3f} {s / d:>6.1f}x {r:>16.1f} {events:>7}")
    growth = per_node[1000] / per_node[100] if per_node[100] > 0 else float("nan")
    print(f"\nper-node overhead at 1,000 nodes: {per_node[1000]:.3f} ms (target < 1 ms); "
          f"1,000 vs 100 nodes per-node ratio {growth:.2f} (1.0 = linear total growth)")


if __name__ == "__main__":
    main()
