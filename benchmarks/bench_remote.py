"""Benchmark of the remote-engine path: best-of-16 × 64 tokens through `source: openai` against llama-cpp-python's
own OpenAI server, beside the server's own time for the same requests and the embedded engine on the same model.

  A. the server's own time: the 16 requests (one seed each) sent one after another over plain HTTP, not streamed;
  B. Metagen's remote path: OpenAIBackend.generate(n=16) as a run calls it (streamed, token callbacks, cancel token;
     16 requests in flight, which llama_cpp.server answers one at a time) — target: B ≤ 1.10 × A;
  C. the embedded engine (LlamaBackend) on the same GGUF file and thread count, n=16 over one prompt evaluation.
The remote requests use the same sampling fields and seeds as A, so both produce the same texts. Each row is the
median of --runs runs, the rows interleaved run by run so drifting load hits them alike.

Usage: python benchmarks/bench_remote.py [--runs 3] [--n 16] [--tokens 64] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from backends.base import CancelToken, ModelSpec, SamplingParams  # noqa: E402
from backends.llama.devices import default_threads  # noqa: E402
from backends.llama.models.bundled import bundled_model_path  # noqa: E402
from backends.remote.openai_backend import OpenAIBackend  # noqa: E402
from backends.remote.openai_caps import capabilities  # noqa: E402
from backends.remote.openai_request import sampling_fields  # noqa: E402
from tests.remote.conftest import MODEL, start_llama_server  # noqa: E402

PROMPT = "Once upon a time, in a small village by the sea, there lived"


def server_own(base_url: str, params: SamplingParams, n: int, caps: object) -> tuple[float, int, list[str]]:
    """The n requests one after another, not streamed: (seconds, completion tokens, texts)."""
    body = {"model": MODEL, "prompt": PROMPT, **sampling_fields(params, caps)}  # type: ignore[arg-type]
    texts, tokens = [], 0
    with httpx.Client(timeout=600) as client:
        started = time.perf_counter()
        for i in range(n):
            reply = client.post(f"{base_url}/completions", json={**body, "seed": params.seed + i}).json()
            texts.append(reply["choices"][0]["text"])
            tokens += reply["usage"]["completion_tokens"]
        return time.perf_counter() - started, tokens, texts


def remote_path(backend: OpenAIBackend, params: SamplingParams, n: int) -> tuple[float, int, list[str]]:
    started = time.perf_counter()
    result = backend.generate(PROMPT, params, n=n, on_token=lambda i, t: None, cancel=CancelToken())
    return time.perf_counter() - started, result.usage.completion_tokens, [c.text for c in result.completions]


def embedded(backend: object, params: SamplingParams, n: int) -> tuple[float, int, list[str]]:
    started = time.perf_counter()
    result = backend.generate(PROMPT, params, n=n, on_token=lambda i, t: None, cancel=CancelToken())  # type: ignore[attr-defined]
    return time.perf_counter() - started, result.usage.completion_tokens, [c.text for c in result.completions]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=default_threads())
    args = parser.parse_args()
    params = SamplingParams(max_tokens=args.tokens, temperature=0.8, seed=1000)
    print(f"model {bundled_model_path().name}, {args.threads} thread(s) (CPU), best-of-{args.n} × {args.tokens} "
          f"tokens, median of {args.runs} run(s); load before: {os.getloadavg()[0]:.2f}")
    server = start_llama_server(Path(tempfile.mkdtemp(prefix="bench-remote-")), threads=args.threads, api_key=None)
    from backends.llama.worker.llama_backend import LlamaBackend

    local = LlamaBackend(bundled_model_path(), ModelSpec(device="cpu", threads=args.threads, n_ctx=2048))
    remote = OpenAIBackend(ModelSpec(source="openai", base_url=server.base_url, model=MODEL, max_concurrency=args.n))
    try:
        caps = capabilities(remote.http, MODEL)  # the probe, once, outside the timings
        remote.generate(PROMPT, SamplingParams(max_tokens=4), on_token=lambda i, t: None, cancel=CancelToken())
        local.generate(PROMPT, SamplingParams(max_tokens=4))
        rows: dict[str, list[tuple[float, int]]] = {"own": [], "remote": [], "engine": []}
        same = True
        for _ in range(args.runs):
            own = server_own(server.base_url, params, args.n, caps)
            via = remote_path(remote, params, args.n)
            same = same and own[2] == via[2]
            rows["own"].append(own[:2])
            rows["remote"].append(via[:2])
            rows["engine"].append(embedded(local, params, args.n)[:2])
    finally:
        remote.close()
        local.close()
        server.stop()

    def line(name: str, key: str) -> float:
        wall = statistics.median(t for t, _ in rows[key])
        rate = statistics.median(k / t for t, k in rows[key])
        tokens = statistics.median(k for _, k in rows[key])
        print(f"  {name:<58} {wall:7.2f} s  {rate:7.1f} tokens/s  ({tokens:.0f} tokens)")
        return wall

    own_s = line(f"A. llama_cpp.server, its own time ({args.n} sequential requests)", "own")
    via_s = line(f"B. source: openai → llama_cpp.server (n={args.n}, streamed)", "remote")
    eng_s = line(f"C. embedded engine (n={args.n}, one prompt evaluation)", "engine")
    print(f"  remote path / server's own time: {via_s / own_s:.3f} (target ≤ 1.10)"
          f"{'' if same else '  [texts differed from A]'}")
    print(f"  remote path / embedded engine:   {via_s / eng_s:.2f}")
    print(f"  load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
