"""Speculative decoding on this machine: what verifying k draft tokens in one decode costs, and what n-gram
speculation saves (or costs) on a copy-heavy greedy revision and on best-of-8 sampling.

1. Verify cost: the median time of one llama_decode of 1 + k tokens of one sequence behind a 300-token prompt,
   as a multiple of a 1-token decode (k = 1, 2, 4, 8), on the low-level API: the hardware's price of drafting.
2. Revision: greedy, a ~300-token draft in the prompt, "rewrite it with the typos fixed"; decode time of
   `speculative: {method: ngram}` vs plain (target <= 0.75x).
3. Best-of-8 on arithmetic prompts, temperature 0.7, `ngram` + `adaptive` vs plain (target <= 1.02x).
4. `draft` on the same revision: the model drafting for itself (`speculative: {method: draft}` naming the same
   file; cpu_weights offers no q4_0 copy and the bundled file is already Q4_1, so the self-draft is the model
   itself: an upper bound on acceptance and the full price of a draft model as large as the target).

Runs alternate plain and speculative, median of --repeats (3). Decode time is the engine's own (Usage.decode_s:
sampling included, prompt evaluation excluded); wall time is printed beside it.

Usage: python benchmarks/bench_speculative.py [--repeats 3] [--threads N] [--model PATH]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends.base import ModelSpec, SamplingParams, SpeculativeSpec
from backends.llama.devices import default_threads
from backends.llama.models.bundled import bundled_model_path
from backends.llama.worker.llama_model import LlamaModel, llama_lib

DRAFT = (
    "The old lighthouse stood at the edge of the cliff for more than two hundred years. Every night its keeper "
    "climbed the narrow stairs, cleaned the great lens and lit the lamp, so that ships passing in the dark would "
    "know where the rocks were. In the winter the wind was so strong that the whole tower seemed to shake, and "
    "the keeper wrote in his diary that he could hear the sea even in his dreams. When the village below grew "
    "into a small town, people began to visit the lighthouse on sunday afternoons. Children ran up the stairs "
    "to count the steps, and there were always one hundred and twelve of them, no matter how many times they "
    "counted. The keeper liked the visitors, but he liked the quiet evenings better, when the last boat had "
    "come home and the harbour lights went out one by one. Years later an automatic lamp replaced him, and the "
    "town turned the keeper's house into a museum. His diary is still there, open on the table by the window, "
    "and anyone who reads it learns that a lighthouse is not only a building but a promise kept every night."
)
REVISION = [{"role": "user", "content": f"Here is a draft:\n\n{DRAFT}\n\nRewrite the draft exactly as it is, "
                                        "only capitalising 'sunday'. Write nothing else."}]
ARITHMETIC = ["What is 23 + 58?", "What is 17 * 6?", "What is 144 - 67?"]


def verify_costs(threads: int, ks: tuple[int, ...], context: int = 300, reps: int = 15) -> dict[int, float]:
    """Median decode time of 1 + k tokens of one sequence over that of 1 token, behind a `context` prompt."""
    lib = llama_lib()
    model = LlamaModel(bundled_model_path())
    params = lib.llama_context_default_params()
    params.n_ctx, params.n_batch, params.n_ubatch, params.n_seq_max = 1024, 512, 512, 1
    params.n_threads = params.n_threads_batch = threads
    ctx = lib.llama_init_from_model(model.ptr, params)
    mem = lib.llama_get_memory(ctx)
    batch = lib.llama_batch_init(512, 0, 1)

    def decode(tokens: list[int], start: int, logits_all: bool) -> float:
        batch.n_tokens = len(tokens)
        for i, token in enumerate(tokens):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, start + i, 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1 if logits_all or i == len(tokens) - 1 else 0
        started = time.perf_counter()
        lib.llama_decode(ctx, batch)
        lib.llama_synchronize(ctx)
        return time.perf_counter() - started

    prompt = model.tokenize(DRAFT * 2)[:context]
    decode(prompt, 0, False)
    sizes = (1, *(k + 1 for k in ks))
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for rep in range(reps + 1):  # sizes interleaved; the first round warms each shape up and is dropped
        for n in sizes:
            took = decode([200 + (rep + i) % 500 for i in range(n)], context, True)
            lib.llama_memory_seq_rm(mem, 0, context, -1)
            if rep:
                times[n].append(took)
    medians = {n: statistics.median(t) for n, t in times.items()}
    lib.llama_batch_free(batch)
    lib.llama_free(ctx)
    model.close()
    return {k: medians[k + 1] / medians[1] for k in ks}


def backend(speculative: SpeculativeSpec | None, threads: int, model: Path):  # type: ignore[no-untyped-def]
    from backends.llama.worker.llama_backend import LlamaBackend

    options = (("kv_size", 8192), ("n_seq_max", 16), ("prefix_cache_tokens", 0))
    return LlamaBackend(model, ModelSpec(source="path", path=str(model), device="cpu", n_ctx=2048, threads=threads,
                                         options=options, speculative=speculative))


def timed(engine, prompts: list, params: SamplingParams, n: int) -> tuple[float, float, int, int, int]:  # type: ignore[no-untyped-def]
    """(decode seconds, wall seconds, completion tokens, drafted, accepted) over the prompts, one after another."""
    decode = wall = 0.0
    tokens = drafted = accepted = 0
    for prompt in prompts:
        started = time.perf_counter()
        result = engine.generate(prompt, params, n=n)
        wall += time.perf_counter() - started
        decode += result.usage.decode_s
        tokens += result.usage.completion_tokens
        drafted += result.usage.draft_tokens
        accepted += result.usage.draft_accepted
    return decode, wall, tokens, drafted, accepted


def compare(name: str, plain, spec, prompts: list, params: SamplingParams, n: int, repeats: int,  # type: ignore[no-untyped-def]
            label: str = "ngram") -> None:
    rows: dict[str, list[tuple[float, float, int, int, int]]] = {"plain": [], label: []}
    for _ in range(repeats):  # alternating, so drift on a shared machine hits both alike
        rows["plain"].append(timed(plain, prompts, params, n))
        rows[label].append(timed(spec, prompts, params, n))
    med = {key: (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), runs[-1][2:])
           for key, runs in rows.items()}
    (p_dec, p_wall, (p_tok, _, _)), (s_dec, s_wall, (s_tok, drafted, accepted)) = med["plain"], med[label]
    rate = f"{accepted / drafted:.0%}" if drafted else "-"
    per_token = (s_dec / max(s_tok, 1)) / (p_dec / max(p_tok, 1))
    print(f"{name}: plain decode {p_dec:.2f} s ({p_tok} tokens), {label} decode {s_dec:.2f} s ({s_tok} tokens, "
          f"{accepted} of {drafted} drafts accepted, {rate}) -> decode {s_dec / p_dec:.2f}x "
          f"(per token {per_token:.2f}x), wall {s_wall / p_wall:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--model", type=Path, default=None, help="a GGUF file (default: the bundled model)")
    args = parser.parse_args()
    model = args.model or bundled_model_path()
    print(f"model {model.name}, {args.threads} threads")
    costs = verify_costs(args.threads, (1, 2, 4, 8))
    print("verify cost of k draft tokens (one decode of 1 + k tokens vs 1 token): " +
          ", ".join(f"k={k}: {c:.2f}x" for k, c in costs.items()))
    plain = backend(None, args.threads, model)
    copy_spec = backend(SpeculativeSpec(method="ngram", k=8, ngram=3, adaptive=True), args.threads, model)
    try:
        compare("revision of a 300-token draft, greedy (target <= 0.75x)", plain, copy_spec, [REVISION],
                SamplingParams(max_tokens=320), 1, args.repeats)
    finally:
        copy_spec.close()
    sample_spec = backend(SpeculativeSpec(method="ngram", k=4, ngram=3, adaptive=True), args.threads, model)
    try:
        prompts = [[{"role": "user", "content": f"{q} Think step by step, then write 'Answer: <number>'."}]
                   for q in ARITHMETIC]
        compare("best-of-8 arithmetic, temperature 0.7 (target <= 1.02x)", plain, sample_spec, prompts,
                SamplingParams(max_tokens=96, temperature=0.7), 8, args.repeats)
    finally:
        sample_spec.close()
    draft_spec = backend(self_draft(model), args.threads, model)
    try:
        compare("revision of a 300-token draft, greedy, the model as its own draft (reported)", plain, draft_spec,
                [REVISION], SamplingParams(max_tokens=320), 1, args.repeats, label="draft")
    finally:
        draft_spec.close()
        plain.close()


def self_draft(model: Path, k: int = 4) -> SpeculativeSpec:
    """`speculative: {method: draft}` with the model file itself as the draft (decode time includes drafting)."""
    return SpeculativeSpec(method="draft", k=k, adaptive=True, draft_alias="self",
                           draft=ModelSpec(source="path", path=str(model), device="cpu"))


if __name__ == "__main__":
    main()
