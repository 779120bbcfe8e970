"""Measures two weight files of one model on this machine: decode time at batch 1 and batch N, and the mean
next-token log-probability of a fixed English text."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from backends.base import ModelSpec, SamplingParams
from backends.llama.models.quality_text import QUALITY_PASSAGES, QUALITY_PREFIX
from backends.llama.worker_backend import load_llama

log = logging.getLogger(__name__)

PROBE_PROMPT = "Once upon a time, in a small village by the sea,"
PROBE_TOKENS = 16
PROBE_BATCH = 16
PROBE_ROUNDS = 3


@dataclass
class WeightsMeasurement:
    """One weight file's figures: seconds per decode step (the fastest of the rounds) at batch 1 and batch
    `batch`, and the mean log-probability per token of the quality text (deterministic for a file)."""

    step_s_batch1: float
    step_s_batch: float
    batch: int
    mean_logprob: float
    quality_tokens: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def probe_spec(spec: ModelSpec) -> ModelSpec:
    """The spec the probe loads with: the caller's threads and flash-attention settings, a context that
    holds the quality text, and room for `PROBE_BATCH` sequences."""
    return replace(spec, n_ctx=1024, options=(("kv_size", 4096), ("n_seq_max", PROBE_BATCH),
                                              *[(k, v) for k, v in spec.options if k == "flash_attn"]))


def quality_logprob(backend: Any) -> tuple[float, int]:
    """(mean log-probability per token, tokens) of the quality passages after QUALITY_PREFIX."""
    scores = backend.score(QUALITY_PREFIX, ["\n\n" + passage for passage in QUALITY_PASSAGES]).scores
    tokens = sum(s.n_tokens for s in scores)
    return sum(s.logprob for s in scores) / max(1, tokens), tokens


def _step_seconds(backend: Any, n: int, seed: int) -> float:
    params = SamplingParams(max_tokens=PROBE_TOKENS, temperature=0.8, top_k=40, seed=seed)
    started = time.perf_counter()
    result = backend.generate(PROBE_PROMPT, params, n=n)
    elapsed = time.perf_counter() - started
    return elapsed * n / max(1, result.usage.completion_tokens)


def measure_pair(original: Path, candidate: Path, spec: ModelSpec, device: dict[str, Any],
                 together: bool = True, rounds: int = PROBE_ROUNDS) -> tuple[WeightsMeasurement, WeightsMeasurement]:
    """Figures for both files. With `together` both are loaded at once and the rounds alternate between them,
    so a change in the machine's load hits both alike; otherwise one after the other (half the memory)."""
    small = probe_spec(spec)
    device = {**device, "n_ctx": small.n_ctx}
    paths = (original, candidate)
    if together:
        backends = [load_llama(p, small, device) for p in paths]
        try:
            return _measure(backends, rounds)
        finally:
            for backend in backends:
                backend.close()
    results = []
    for path in paths:
        backend = load_llama(path, small, device)
        try:
            results.append(_measure([backend], rounds)[0])
        finally:
            backend.close()
    return results[0], results[1]


def _measure(backends: list[Any], rounds: int) -> tuple[WeightsMeasurement, ...]:
    # The quality text first, on a fresh engine: a score's last digits move a little with what else sits in
    # the KV cache (about 0.002 here), so the cache layout is the same for every file and every machine.
    quality = [quality_logprob(backend) for backend in backends]
    for backend in backends:  # warm up: first decode, prompt into the prefix cache
        backend.generate(PROBE_PROMPT, SamplingParams(max_tokens=2))
    single: list[list[float]] = [[] for _ in backends]
    batched: list[list[float]] = [[] for _ in backends]
    for r in range(rounds):
        for i, backend in enumerate(backends):
            single[i].append(_step_seconds(backend, 1, 1000 + r))
            batched[i].append(_step_seconds(backend, PROBE_BATCH, 2000 + r))
    out = []
    for i, backend in enumerate(backends):
        mean, tokens = quality[i]
        out.append(WeightsMeasurement(min(single[i]), min(batched[i]), PROBE_BATCH, mean, tokens))
        log.info("measured %s: %.1f ms/step at batch 1, %.1f ms/step at batch %d, mean logprob %.4f",
                 backend.path.name, out[-1].step_s_batch1 * 1e3, out[-1].step_s_batch * 1e3, PROBE_BATCH, mean)
    return tuple(out)
