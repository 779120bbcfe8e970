"""Benchmark of tool calling (issue 49), side by side in one process, as ratios:
  A. what tools add to a request through the real /v1/chat/completions route (in-process ASGI client, the scripted
     fake model of `--dry-run`): the same request with and without `tools`, interleaved pair by pair, the median of
     the paired differences (target: ≤ 5 ms per request);
  B. constrained decoding's cost per token on the bundled model: the same tool prompt (`tool_choice: required`)
     greedy with the call grammar of backends/tools/grammar.py and without it, runs interleaved, milliseconds per
     completion token (median of --runs);
  C. `tool_self_consistency` with N=8 against a plain sampler with N=8 on the same question and model: the engine's
     mean sequences per decode step (completion tokens / decode calls, from the engine's own counters) say whether
     the tool samples are batched as the sampler's are.
Figures are printed, never asserted. The whole run takes about a minute on two cores.

Usage: python benchmarks/bench_tools.py [--pairs 200] [--runs 5] [--tokens 48] [--skip-model]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from starlette.applications import Starlette  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from app.serve.config import studio_config  # noqa: E402
from app.serve.routes import api_routes  # noqa: E402
from app.service.studio import StudioService  # noqa: E402
from app.service.workflow_api import load_source  # noqa: E402
from app.share.policy import SharePolicy  # noqa: E402
from app.workflow.spec import Workflow  # noqa: E402
from backends.base import ModelSpec, SamplingParams  # noqa: E402
from backends.fake import FakeBackend  # noqa: E402
from backends.llama.models.bundled import bundled_model_path  # noqa: E402
from backends.tools.grammar import tool_call_grammar  # noqa: E402
from backends.tools.types import ToolChoice, ToolRequest, tools_from_openai  # noqa: E402

log = logging.getLogger("bench_tools")

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "description": "The city's name"},
                                            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
           "required": ["city"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The current weather in a city.",
                                           "parameters": WEATHER}}]
QUESTION = "What is the weather like in Paris today, in celsius?"
CALL = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}]}'
REPLY = "It is sunny in Paris today, about 21 degrees."


def _ms(seconds: float) -> float:
    return seconds * 1000.0


# ---------------------------------------------------------------- A. the door's cost of tools (scripted model)


def door_rows(pairs: int) -> None:
    fake = FakeBackend(by_prompt={"get_weather": CALL, QUESTION: REPLY})
    with tempfile.TemporaryDirectory(prefix="bench-tools-") as tmp:
        home = Path(tmp)
        for name in ("wf", "models", "examples"):
            (home / name).mkdir()
        service = StudioService(policy=SharePolicy.local(), provider=lambda spec: fake, workflows_dir=home / "wf",
                                examples_dir=home / "examples", models_dir=home / "models",
                                trace_db=home / "traces.db")
        try:
            client = TestClient(Starlette(routes=api_routes(service, studio_config(service))),
                                client=("127.0.0.1", 5000))
            model = bundled_model_path().name
            plain = {"model": model, "messages": [{"role": "user", "content": QUESTION}], "max_tokens": 32}
            tools = {**plain, "tools": TOOLS}

            def post(body: dict[str, Any], finish: str) -> float:
                started = time.perf_counter()
                reply = client.post("/v1/chat/completions", json=body)
                elapsed = time.perf_counter() - started
                if reply.status_code != 200 or reply.json()["choices"][0]["finish_reason"] != finish:
                    raise RuntimeError(f"unexpected answer {reply.status_code}: {reply.text[:300]}")
                return elapsed

            for _ in range(10):  # warm-up: routes, template compilation, first-request caches
                post(plain, "stop")
                post(tools, "tool_calls")
            without, with_tools = [], []
            for i in range(pairs):  # interleaved, the order alternating, so drifting load hits both alike
                if i % 2 == 0:
                    without.append(post(plain, "stop"))
                    with_tools.append(post(tools, "tool_calls"))
                else:
                    with_tools.append(post(tools, "tool_calls"))
                    without.append(post(plain, "stop"))
        finally:
            service.close()
    added = statistics.median(w - p for w, p in zip(with_tools, without, strict=True))
    base = statistics.median(without)
    print(f"A. /v1/chat/completions on the scripted model (--dry-run), in-process ASGI client, {pairs} pairs")
    print(f"  without tools {_ms(base):6.2f} ms · with tools {_ms(statistics.median(with_tools)):6.2f} ms · "
          f"added {_ms(added):+6.2f} ms per request, median of pairs (target ≤ 5 ms) · "
          f"{statistics.median(with_tools) / base:.2f}× the time", flush=True)


# ---------------------------------------------------------------- B and C: the bundled model


def grammar_rows(backend: Any, runs: int, tokens: int) -> None:
    request = ToolRequest(tools_from_openai(TOOLS), ToolChoice("required"))
    text, family = backend.render_tool_prompt([{"role": "user", "content": QUESTION}], request)
    strict = replace(request, tools=tuple(replace(t, strict=True) for t in request.tools))
    grammar = tool_call_grammar(strict, family)
    free = SamplingParams(max_tokens=tokens, temperature=0.0)
    constrained = replace(free, grammar=grammar)
    sides: dict[str, list[float]] = {"unconstrained": [], "constrained": []}
    counts: dict[str, list[int]] = {"unconstrained": [], "constrained": []}
    for params in (free, constrained):  # warm-up: prompt cache, grammar
        backend.generate(text, params, n=1, seeds=[0])
    for run in range(runs):
        order = [("unconstrained", free), ("constrained", constrained)]
        for name, params in (order if run % 2 == 0 else order[::-1]):
            started = time.perf_counter()
            result = backend.generate(text, params, n=1, seeds=[run])
            elapsed = time.perf_counter() - started
            completion = result.completions[0]
            n = max(1, completion.completion_tokens)
            sides[name].append(elapsed / n)
            counts[name].append(n)
    free_ms, cons_ms = (_ms(statistics.median(sides[k])) for k in ("unconstrained", "constrained"))
    print(f"\nB. constrained decoding on the bundled model ({family} call form, tool_choice required, greedy, "
          f"≤ {tokens} tokens, median of {runs})")
    print(f"  unconstrained {free_ms:6.2f} ms/token ({statistics.median(counts['unconstrained']):.0f} tokens) · "
          f"constrained {cons_ms:6.2f} ms/token ({statistics.median(counts['constrained']):.0f} tokens) · "
          f"{cons_ms / free_ms:.2f}× the cost per token", flush=True)


def _per_step(service: StudioService, backend: Any, wf: Workflow, inputs: dict[str, Any],
              seed: int) -> tuple[float, float, float, int, int]:
    """(wall seconds, completion tokens per decode step, that as a share of the most a step can carry: all the
    tokens over the longest sample's, one token per live sample and step; decode steps, the longest sample's
    tokens)."""
    before = backend.engine_stats()
    started = time.perf_counter()
    result = service.run_workflow(wf, inputs, seed=seed, trace=False)
    wall = time.perf_counter() - started
    after = backend.engine_stats()
    steps = after["decode_calls"] - before["decode_calls"]
    tokens = after["completion_tokens"] - before["completion_tokens"]
    lengths = [c.completion_tokens for c in result.node_outputs["sample"]["candidates"].candidates]
    ideal = sum(lengths) / max(1, max(lengths, default=1))
    per_step = tokens / max(1, steps)
    return wall, per_step, per_step / ideal if ideal else 0.0, steps, max(lengths, default=0)


SAMPLER = """version: 1
name: plain-sampler
description: Eight samples of the question, no tools (the batching a sampler gets).
models:
  main: {source: bundled}
inputs:
  question: {type: text}
nodes:
- id: sample
  kind: sampler
  model: main
  params: {prompt: '{question}', n: 8, temperature: 0.7, max_tokens: 48}
  inputs: {question: inputs.question}
outputs: {answer: sample.candidates}
"""


def batching_rows(service: StudioService, backend: Any, runs: int) -> None:
    tool_wf = load_source(ROOT / "workflows" / "tool_self_consistency.yaml")[0]
    plain_wf = load_source(SAMPLER)[0]
    rows: dict[str, list[tuple[float, float, float, int, int]]] = {"sampler N=8": [], "tool_self_consistency N=8": []}
    _per_step(service, backend, tool_wf, {"question": QUESTION}, 99)  # warm-up
    for run in range(runs):
        order = [("sampler N=8", plain_wf), ("tool_self_consistency N=8", tool_wf)]
        for name, wf in (order if run % 2 == 0 else order[::-1]):
            rows[name].append(_per_step(service, backend, wf, {"question": QUESTION}, run))
    print(f"\nC. N=8 samples batched in the engine (bundled model, temperature 0.7, median of {runs})")
    share = {}
    for name, values in rows.items():
        share[name] = statistics.median(v[2] for v in values)
        print(f"  {name:<27} {statistics.median(v[0] for v in values):6.2f} s · mean sequences per decode step "
              f"{statistics.median(v[1] for v in values):5.2f} = {share[name]:.2f} of the most its samples' "
              f"lengths allow ({statistics.median(v[3] for v in values):.0f} decode steps, longest sample "
              f"{statistics.median(v[4] for v in values):.0f} tokens)", flush=True)
    print(f"  → tool_self_consistency / sampler: {share['tool_self_consistency N=8'] / share['sampler N=8']:.2f}× "
          "the batching (target ≈ 1×)")


def model_rows(runs: int, tokens: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-tools-model-") as tmp:
        home = Path(tmp)
        (home / "wf").mkdir()
        service = StudioService(policy=SharePolicy.local(), workflows_dir=home / "wf", trace_db=home / "traces.db")
        try:
            backend = service.scheduler.provider(ModelSpec())
            grammar_rows(backend, runs, tokens)
            batching_rows(service, backend, max(1, runs // 2))
        finally:
            service.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=200, help="request pairs of row A")
    parser.add_argument("--runs", type=int, default=5, help="runs of row B (row C: half as many)")
    parser.add_argument("--tokens", type=int, default=48, help="most tokens per answer of row B")
    parser.add_argument("--skip-model", action="store_true", help="row A only (no model file loaded)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    started = time.perf_counter()
    print(f"load before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    door_rows(args.pairs)
    if not args.skip_model:
        model_rows(args.runs, args.tokens)
    print(f"\n({time.perf_counter() - started:.0f} s in all; load after: {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
