"""How llama.cpp's decode step time grows with the batch on this machine: the bound on what batching
concurrent requests can save (engine-free, on the low-level API, one process).

For each batch size B: B sequences share a prompt of --context tokens, then the median time of one
llama_decode of B tokens (one per sequence) is printed, with and without flash attention. If a 16-token step
costs about twice an 8-token step, two 8-sample requests cannot finish much sooner together than apart.

Usage: python benchmarks/bench_batch_scaling.py [--context 0] [--batches 1,2,4,8,16,32] [--steps 24]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends.llama.devices import default_threads
from backends.llama.models.bundled import bundled_model_path
from backends.llama.worker.llama_model import llama_lib


def step_time(lib: object, model: object, batch_size: int, context: int, flash: bool, threads: int,
              steps: int) -> float:
    """Median seconds of one decode step of `batch_size` sequences behind a shared `context`-token prompt."""
    params = lib.llama_context_default_params()
    params.n_ctx = context + 8 + batch_size * steps + 256
    params.n_batch = params.n_ubatch = 512
    params.n_seq_max = max(batch_size, 1)
    params.kv_unified = True
    params.n_threads = params.n_threads_batch = threads
    params.flash_attn_type = 1 if flash else 0
    ctx = lib.llama_init_from_model(model, params)
    batch = lib.llama_batch_init(512, 0, batch_size)
    n_prompt, fed = context + 8, 0
    while fed < n_prompt:  # the shared prompt, in chunks of 512
        take = min(512, n_prompt - fed)
        batch.n_tokens = take
        for i in range(take):
            batch.token[i], batch.pos[i] = 100 + (fed + i) % 1000, fed + i
            batch.n_seq_id[i], batch.logits[i] = batch_size, 0
            for s in range(batch_size):
                batch.seq_id[i][s] = s
        batch.logits[take - 1] = 1
        lib.llama_decode(ctx, batch)
        fed += take
    times = []
    for step in range(steps):
        batch.n_tokens = batch_size
        for s in range(batch_size):
            batch.token[s], batch.pos[s], batch.n_seq_id[s], batch.logits[s] = 200 + s + step, n_prompt + step, 1, 1
            batch.seq_id[s][0] = s
        started = time.perf_counter()
        lib.llama_decode(ctx, batch)
        lib.llama_synchronize(ctx)
        times.append(time.perf_counter() - started)
    lib.llama_batch_free(batch)
    lib.llama_free(ctx)
    return statistics.median(times[min(4, steps - 1):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", type=int, default=0, help="tokens of shared prompt before decoding")
    parser.add_argument("--batches", default="1,2,4,8,16,32")
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--threads", type=int, default=default_threads())
    args = parser.parse_args()
    sizes = [int(b) for b in args.batches.split(",")]
    lib = llama_lib()
    path = bundled_model_path()
    model = lib.llama_model_load_from_file(str(path).encode(), lib.llama_model_default_params())
    print(f"model {path.name}, {args.threads} threads, shared prompt {args.context} tokens, median of "
          f"{args.steps} steps")
    print(f"{'batch':>5} {'flash ms':>9} {'tok/s':>7} {'no-flash ms':>12} {'tok/s':>7}  step / 2 half-size steps")
    results: dict[int, dict[bool, float]] = {}
    for size in sizes:
        row = {flash: step_time(lib, model, size, args.context, flash, args.threads, args.steps)
               for flash in (True, False)}
        results[size] = row
        half = results.get(size // 2) if size > 1 else None
        ratio = "  ".join(f"{'flash' if f else 'no-flash'} {row[f] / (2 * half[f]):.2f}x" for f in (True, False)
                          ) if half else ""
        print(f"{size:5d} {row[True] * 1000:9.1f} {size / row[True]:7.0f} {row[False] * 1000:12.1f} "
              f"{size / row[False]:7.0f}  {ratio}")
    lib.llama_model_free(model)


if __name__ == "__main__":
    main()
