"""Benchmark of one model on several servers (`base_url` a list) with stdlib fake servers of a fixed latency, so the
machine's cores do not limit it: an evaluation of --items items on 1 server and on 4, each server taking
--per-server requests at once (the evaluation keeps the sum in flight); and the router's own cost per request
(choosing the server, keeping the run's affinity, the bookkeeping), measured without HTTP.

Targets (issue 31): 4 servers >= 3.5x the throughput of 1; routing overhead < 1 ms per request.
The default latency (1 s, a short LLM answer) keeps the scale of a real request: each run also costs some
milliseconds of this process's CPU (scheduler, trace store, HTTP client), the same however many servers answer, and
with a fixed latency the items start in waves, so that CPU does not overlap the waiting. On a 2-core machine that
is about 0.4 s for 64 items: at --latency 0.2 the ratio is about 3.5x, at 1 s about 3.8x.

Usage: python benchmarks/bench_replicas.py [--items 64] [--latency 1.0] [--per-server 4] [--servers 4]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.eval.plan import WorkflowSource, make_plan  # noqa: E402
from app.eval.results import summarize  # noqa: E402
from app.eval.runner import Evaluation  # noqa: E402
from app.eval.store import EvalStore  # noqa: E402
from app.run.providers import llama_provider  # noqa: E402
from app.run.scheduler import Scheduler  # noqa: E402
from app.traces.store import TraceStore  # noqa: E402
from app.workflow.model_specs import model_spec_from_dict  # noqa: E402
from backends.base import CancelToken  # noqa: E402
from backends.remote.openai_replicas import ReplicaBackend  # noqa: E402
from nodes.registry import default_registry  # noqa: E402
from tests.remote.fake_openai import MODEL, FakeOpenAIServer  # noqa: E402

WF = """version: 1
name: bench-replicas
models:
  main: {{source: openai, base_url: {urls}, model: {model}, timeout_s: 30}}
inputs:
  question: {{type: text, default: "What is 1 + 1?"}}
nodes:
- id: answer
  kind: generator
  model: main
  params: {{prompt: "{{question}}", max_tokens: 8}}
  inputs: {{question: inputs.question}}
outputs: {{answer: answer.text}}
"""


def entry(servers: list[FakeOpenAIServer], per_server: int) -> list[dict[str, object]]:
    return [{"url": s.base_url, "max_concurrency": per_server} for s in servers]


def evaluation_s(folder: Path, servers: list[FakeOpenAIServer], items: int, per_server: int) -> tuple[float, dict]:
    """(seconds, requests served per server) of an evaluation of `items` items on `servers`."""
    urls = entry(servers, per_server)
    wf_path = folder / f"wf{len(servers)}.yaml"
    wf_path.write_text(WF.format(urls=json.dumps(urls), model=MODEL), encoding="utf-8")
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps({"question": f"q{i}", "answer": "42"}) + "\n" for i in range(items)),
                    encoding="utf-8")
    registry = default_registry()
    plan = make_plan([WorkflowSource(path=wf_path)], data, registry=registry, metric="exact")
    scheduler = Scheduler(registry, llama_provider())
    backend = scheduler.provider(model_spec_from_dict(plan.workflows[0].workflow.models["main"]))
    assert isinstance(backend, ReplicaBackend)
    with ThreadPoolExecutor() as pool:  # capabilities probed (about ten requests each) before the clock starts
        list(pool.map(lambda replica: replica.backend.caps, backend.replicas))
    traces = TraceStore(folder / f"traces{len(servers)}.db")
    store = EvalStore(traces.engine)
    evaluation = Evaluation(plan, scheduler, store, observers=[traces])
    started = time.perf_counter()
    status = evaluation.run()
    seconds = time.perf_counter() - started
    summary = summarize(store.get(evaluation.eval_id))
    traces.close()
    backend.close()
    if status != "succeeded":
        raise SystemExit(f"the evaluation on {len(servers)} servers ended {status}: {evaluation.error}")
    return seconds, summary["servers"]


def routing_overhead_ms(servers: list[FakeOpenAIServer], calls: int = 20000) -> float:
    """Milliseconds the router adds to one request: pick (affinity or least busy) and the bookkeeping after."""
    spec = model_spec_from_dict({"source": "openai", "model": MODEL, "base_url": entry(servers, 8)})
    backend = ReplicaBackend(spec)
    tokens = [CancelToken() for _ in range(calls // 4)]
    started = time.perf_counter()
    for i in range(calls):
        backend._call(lambda b: None, tokens[i // 4])  # four requests per run: the first places it
    seconds = time.perf_counter() - started
    backend.close()
    return seconds / calls * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds each fake request takes")
    parser.add_argument("--per-server", type=int, default=4, help="max_concurrency of each server")
    parser.add_argument("--servers", type=int, default=4)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    servers = [FakeOpenAIServer(latency_s=args.latency).start() for _ in range(args.servers)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            one_s, one_served = evaluation_s(Path(tmp), servers[:1], args.items, args.per_server)
            all_s, all_served = evaluation_s(Path(tmp), servers, args.items, args.per_server)
        overhead = routing_overhead_ms(servers)
    finally:
        for s in servers:
            s.stop()
    ideal = args.items * args.latency / args.per_server
    print(f"evaluation of {args.items} items, {args.latency:g}s per request, max_concurrency {args.per_server} "
          "per server")
    print(f"  1 server : {one_s:6.2f}s  {args.items / one_s:6.1f} items/s  (ideal {ideal:.2f}s)  served "
          f"{list(one_served.values())}")
    print(f"  {args.servers} servers: {all_s:6.2f}s  {args.items / all_s:6.1f} items/s  (ideal "
          f"{ideal / args.servers:.2f}s)  served {list(all_served.values())}")
    ratio = one_s / all_s
    print(f"  throughput ratio {args.servers} servers / 1: {ratio:.2f}x (target >= 3.5x for 4)  "
          f"{'OK' if ratio >= 3.5 or args.servers != 4 else 'BELOW TARGET'}")
    print(f"routing overhead per request: {overhead * 1000:.1f} us (target < 1 ms)  "
          f"{'OK' if overhead < 1 else 'ABOVE TARGET'}")


if __name__ == "__main__":
    main()
