"""Token-level beam search on this machine: what the engine's KV forks cost.

1. beam: n=4 beams over 64 tokens (length_penalty 0 and no end token in reach, so all 64 steps run), one request.
2. sampling: n=4 samples at temperature 0.8 with the same number of tokens, one request (the same batch shape:
   4 sequences behind one shared prompt, no forks).
3. naive: 4 sequential greedy runs that re-evaluate their whole prefix for every token (what a beam search without
   KV forks, driving a server one token at a time, costs): the beam's 4 hypotheses replayed token by token with
   the prefix cache off.

Prints wall times (median of --repeats) and the ratios beam / sampling (target <= 1.5) and naive / beam.

Usage: python benchmarks/bench_beam.py [--repeats 3] [--tokens 64] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends.base import ModelSpec, SamplingParams
from backends.beam_search import BeamSettings
from backends.llama.devices import default_threads
from backends.llama.models.bundled import bundled_model_path

PROMPT = "Once upon a time, in a small village at the edge of a great forest, there lived"


def timed(fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=default_threads())
    args = parser.parse_args()
    from backends.llama.worker.llama_backend import LlamaBackend

    spec = ModelSpec(device="cpu", n_ctx=1024, threads=args.threads, options=(("kv_size", 4096),))
    backend = LlamaBackend(bundled_model_path(), spec)
    naive_backend = LlamaBackend(bundled_model_path(), ModelSpec(
        device="cpu", n_ctx=1024, threads=args.threads, options=(("kv_size", 2048), ("prefix_cache_tokens", 0))))
    params = SamplingParams(max_tokens=args.tokens)
    settings = BeamSettings(n=4, length_penalty=0.0)
    backend.generate(PROMPT, SamplingParams(max_tokens=1))  # warm up; the prompt is cached for both from here
    beam_s, sample_s, hyps = [], [], None
    for _ in range(args.repeats):
        seconds, result = timed(lambda: backend.beam_search(PROMPT, params, settings))
        beam_s.append(seconds)
        hyps = result.hypotheses
        seconds, samples = timed(lambda: backend.generate(PROMPT, SamplingParams(max_tokens=args.tokens,
                                                                                 temperature=0.8), n=4))
        sample_s.append(seconds)
    assert hyps is not None
    beam_tokens = [len(h.tokens) for h in hyps]
    sample_tokens = [c.completion_tokens for c in samples.completions]
    naive_s, _ = timed(lambda: [naive_backend.generate(PROMPT + naive_backend.model.detokenize(h.tokens[:t]),
                                                       SamplingParams(max_tokens=1))
                                for h in hyps for t in range(len(h.tokens))])
    beam, sample = statistics.median(beam_s), statistics.median(sample_s)
    print(f"threads {args.threads}; tokens per sequence: beam {beam_tokens}, sampling {sample_tokens}")
    print(f"beam n=4      {beam:7.3f} s  (runs {', '.join(f'{s:.3f}' for s in beam_s)})")
    print(f"sampling n=4  {sample:7.3f} s  (runs {', '.join(f'{s:.3f}' for s in sample_s)})")
    print(f"naive 4 x greedy re-evaluating prefixes {naive_s:7.3f} s (one run)")
    per_beam = beam / max(1, sum(beam_tokens))
    per_sample = sample / max(1, sum(sample_tokens))
    print(f"beam / sampling: {beam / sample:.2f}x wall, {per_beam / per_sample:.2f}x per generated token "
          "(target <= 1.5x)")
    print(f"naive / beam: {naive_s / beam:.1f}x")
    backend.close()
    naive_backend.close()


if __name__ == "__main__":
    main()
