"""The refiner's `method: rsa`: Recursive Self-Aggregation (Venkatraman et al. 2025) over a population.

A population of N candidates (the `candidates` input, or N samples of the prompt in one request) is improved
for `rounds` rounds: each round makes N new candidates, each by showing the model a random subset of `subset`
candidates of the last population and asking for one improved solution combining them. A round's N requests are
in flight at once, so the engine decodes them as one batch. The final population is the node's candidate set.

Trace event "rsa":
    {"population": N, "subset": K, "rounds": T, "generations": [[{"id": "g.i", "text", "parents": [ids]}]],
     "final": [ids]}
generation 0 is the first population (no parents); ids are "generation.index".
"""

from __future__ import annotations

import random
from typing import Any

from nodes.algorithms.rsa import draw_subsets, numbered_solutions
from nodes.base import Candidate, CandidateSet, NodeContext, NodeError
from nodes.decoding import build_prompt, sampling_params
from nodes.seeds import sample_seeds

DEFAULT_AGGREGATE = ("Task: {task}\n\nHere are several candidate solutions to the task. Some may be wrong.\n\n"
                     "{solutions}\n\nUse the correct parts and fix the mistakes: write one improved, complete "
                     "solution to the task. Reply with the solution only.")


def run_rsa(inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
    """Run RSA; the refiner's outputs: the final population (its first member as `text`) and the generations."""
    values = {k: v for k, v in inputs.items() if k not in ("draft", "candidates")}
    task_prompt = build_prompt(params, values)
    task = task_prompt if isinstance(task_prompt, str) else task_prompt[-1]["content"]
    n, k, rounds = int(params["population"]), int(params["subset"]), int(params["rounds"])
    wired = inputs.get("candidates")
    if wired is not None:
        if not isinstance(wired, CandidateSet):
            raise NodeError("method: rsa: the `candidates` input must be a candidate set (e.g. a sampler's)")
        texts = [c.text for c in wired.candidates]
        if len(texts) < k:
            raise NodeError(f"method: rsa: the wired population has {len(texts)} candidate(s), fewer than subset "
                            f"= {k}: draw more samples upstream or lower subset")
    else:
        first = sample_seeds(ctx.seed, n)
        result = ctx.generate(task_prompt, sampling_params(params, first[0]), n=n, seeds=first, purpose="rsa",
                              tag={"rsa_round": 0})
        texts = [c.text.strip() for c in result.completions]
    generations: list[list[dict[str, Any]]] = [
        [{"id": f"0.{i}", "text": t, "parents": []} for i, t in enumerate(texts)]]
    ctx.progress(0, rounds)
    for r in range(1, rounds + 1):
        last = generations[-1]
        subsets = draw_subsets(len(last), n, k, random.Random(f"{ctx.seed}:rsa:{r}"))
        made = ctx.map(lambda i, r=r, last=last, subsets=subsets: _aggregate(  # one engine batch per round
            ctx, params, values, task, r, i, [last[j] for j in subsets[i]]), range(n))
        generations.append([{"id": f"{r}.{i}", "text": t, "parents": [last[j]["id"] for j in subsets[i]]}
                            for i, t in enumerate(made)])
        ctx.progress(r, rounds)
    final = generations[-1]
    candidates = [Candidate(text=item["text"], index=i, source=ctx.node_id,
                            meta={"rsa": {"id": item["id"], "round": len(generations) - 1,
                                          "parents": item["parents"]}})
                  for i, item in enumerate(final)]
    ctx.event("rsa", {"population": n, "subset": k, "rounds": rounds, "generations": generations,
                      "final": [item["id"] for item in final]})
    iterations = [{"round": g, "candidates": gen} for g, gen in enumerate(generations)]
    return {"text": final[0]["text"] if final else "", "iterations": iterations,
            "candidates": CandidateSet(candidates, prompt=task, meta={"rsa": {"rounds": rounds, "subset": k}})}


def _aggregate(ctx: NodeContext, params: dict[str, Any], values: dict[str, Any], task: str, round_: int, index: int,
               shown: list[dict[str, Any]]) -> str:
    """One new candidate of round `round_`: the model combines the `shown` candidates (seed + round x N + index)."""
    prompt = build_prompt({**params, "prompt": params["aggregate_prompt"]},
                          {**values, "task": task, "solutions": numbered_solutions([s["text"] for s in shown])})
    seed = sample_seeds(ctx.seed, 1, start=round_ * int(params["population"]) + index)[0]
    result = ctx.generate(prompt, sampling_params(params, seed), n=1, seeds=[seed], purpose="rsa",
                          tag={"rsa_round": round_, "rsa_index": index, "parents": [s["id"] for s in shown]})
    return result.completions[0].text.strip()
