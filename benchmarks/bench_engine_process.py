"""Benchmark of the engine worker process against the engine in this process, side by side in one run.

Rows (medians of --runs runs; in-process and worker interleaved run by run so drifting machine load hits them alike):
  A. best-of-16 × 64 tokens (`generate(n=16)`) against 16 sequential calls: the per-token ratio, for each;
  B. one greedy stream (tokens streamed through on_token): tokens/s, for each;
  C. the latency to the first token (one greedy token streamed, the prompt in the prefix cache): the worker's
     added latency is its median minus the in-process median.
Both backends load the bundled model with the same settings; the worker is the model pool's default.

Usage: python benchmarks/bench_engine_process.py [--runs 3] [--threads N] [--tokens 64] [--samples 16]
                                                 [--first-token-repeats 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends.base import ModelSpec, SamplingParams
from backends.llama.devices import default_threads
from backends.llama.models.bundled import bundled_model_path
from backends.llama.worker.llama_backend import LlamaBackend
from backends.llama.worker_backend import WorkerBackend

PROMPT = "Once upon a time, in a small village by the sea,"


def best_of(backend: Any, n: int, tokens: int, seed: int) -> tuple[float, int]:
    params = SamplingParams(max_tokens=tokens, temperature=0.8, top_k=40, seed=seed)
    started = time.perf_counter()
    result = backend.generate(PROMPT, params, n=n)
    return time.perf_counter() - started, result.usage.completion_tokens


def sequential(backend: Any, n: int, tokens: int, seed: int) -> tuple[float, int]:
    produced = 0
    started = time.perf_counter()
    for i in range(n):
        params = SamplingParams(max_tokens=tokens, temperature=0.8, top_k=40, seed=seed + i)
        produced += backend.generate(PROMPT, params).usage.completion_tokens
    return time.perf_counter() - started, produced


def greedy_stream(backend: Any, tokens: int) -> tuple[float, int]:
    pieces: list[str] = []
    started = time.perf_counter()
    result = backend.generate(PROMPT, SamplingParams(max_tokens=tokens), on_token=lambda i, t: pieces.append(t))
    seconds = time.perf_counter() - started
    return seconds, result.usage.completion_tokens


def first_token(backend: Any) -> float:
    seen: list[float] = []
    started = time.perf_counter()
    backend.generate(PROMPT, SamplingParams(max_tokens=1), on_token=lambda i, t: seen.append(time.perf_counter()))
    return (seen[0] if seen else time.perf_counter()) - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--first-token-repeats", type=int, default=30)
    args = parser.parse_args()
    n, tokens = args.samples, args.tokens
    path = bundled_model_path()
    spec = ModelSpec(device="cpu", n_ctx=2048, threads=args.threads)
    print(f"model {path.name}, {args.threads} threads, best-of-{n} x {tokens} tokens, median of {args.runs} runs")
    print(f"machine load average at start: {os.getloadavg()[0]:.2f}")
    backends = {"in-process": LlamaBackend(path, spec), "worker": WorkerBackend(path, spec)}
    for backend in backends.values():
        backend.generate(PROMPT, SamplingParams(max_tokens=4))  # warm: the prompt in the prefix cache
    times: dict[tuple[str, str], list[float]] = {(k, case): [] for k in backends
                                                 for case in ("batch", "seq", "stream", "first")}
    counts: dict[tuple[str, str], int] = {}
    for run in range(args.runs):
        for name, backend in backends.items():
            seconds, produced = best_of(backend, n, tokens, 1000 + run)
            times[(name, "batch")].append(seconds / produced)
            counts[(name, "batch")] = produced
            seconds, produced = sequential(backend, n, tokens, 2000 + run * n)
            times[(name, "seq")].append(seconds / produced)
            counts[(name, "seq")] = produced
            seconds, produced = greedy_stream(backend, tokens)
            times[(name, "stream")].append(produced / seconds)
            counts[(name, "stream")] = produced
        for _ in range(max(1, args.first_token_repeats // args.runs)):
            for name, backend in backends.items():
                times[(name, "first")].append(first_token(backend))
        last = {key: v[-1] for key, v in times.items() if v}
        print(f"  run {run + 1}/{args.runs}: best-of-{n} s/token in-process {last[('in-process', 'batch')]:.5f} worker "
              f"{last[('worker', 'batch')]:.5f}; sequential in-process {last[('in-process', 'seq')]:.5f} worker "
              f"{last[('worker', 'seq')]:.5f}; stream tok/s in-process {last[('in-process', 'stream')]:.1f} worker "
              f"{last[('worker', 'stream')]:.1f}; first token ms in-process {last[('in-process', 'first')] * 1e3:.2f} "
              f"worker {last[('worker', 'first')] * 1e3:.2f}", flush=True)
    for backend in backends.values():
        backend.close()

    med = {key: statistics.median(v) for key, v in times.items()}
    print()
    print(f"{'':44} {'in-process':>12} {'worker':>12} {'worker/in-process':>18}")
    for case, label, fmt, scale in [
        ("batch", f"A  best-of-{n}: s per token", "{:12.5f}", 1.0),
        ("seq", f"A  {n} sequential calls: s per token", "{:12.5f}", 1.0),
        ("stream", f"B  one greedy stream ({tokens} tokens): tokens/s", "{:12.1f}", 1.0),
        ("first", "C  first token latency: ms", "{:12.2f}", 1000.0),
    ]:
        a, b = med[("in-process", case)] * scale, med[("worker", case)] * scale
        print(f"{label:44} {fmt.format(a)} {fmt.format(b)} {b / a:17.3f}x")
    ratios = {name: med[(name, "batch")] / med[(name, "seq")] for name in backends}
    print(f"{'A  per-token ratio best-of / sequential':44} {ratios['in-process']:12.3f} {ratios['worker']:12.3f} "
          f"{ratios['worker'] / ratios['in-process']:17.3f}x")
    # the same ratios run by run (both sides measured minutes apart at most), then their median: drift in the
    # machine's load between runs cancels within a run
    paired = {case: statistics.median(w / i for w, i in zip(times[("worker", case)], times[("in-process", case)],
                                                             strict=True))
              for case in ("batch", "seq", "stream")}
    print(f"paired by run (median of per-run worker/in-process): best-of-{n} s/token {paired['batch']:.3f}x, "
          f"sequential {paired['seq']:.3f}x, stream tokens/s {paired['stream']:.3f}x")
    added = (med[("worker", "first")] - med[("in-process", "first")]) * 1000
    print(f"C  added latency to the first token: {added:.2f} ms "
          f"({len(times[('worker', 'first')])} requests each)")
    print(f"machine load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
