"""Generating kinds: `generator` (one completion, or one per candidate) and `sampler` (N completions).

Trace events: every completion is an LM call traced by the context. The sampler with
`adaptive: majority` also emits "adaptive_stop":
    {"n": planned samples, "drawn": samples drawn, "saved": n - drawn, "batches": [sizes],
     "leader": answer, "leader_count": int, "runner_up_count": int, "no_answer_count": int}
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from backends.base import Completion, GenerateResult
from nodes.algorithms.adaptive import batch_plan, stop_decision
from nodes.algorithms.extract import AnswerSpec, answer_params
from nodes.base import (
    CANDIDATES,
    JSON,
    TEXT,
    Candidate,
    CandidateSet,
    NodeContext,
    NodeError,
    NodeKind,
    Param,
    Port,
    format_value,
    template_variables,
)
from nodes.decoding import build_prompt, decoding_params, decoding_problems, prompt_params, sampling_params
from nodes.thinking import ThinkingResult, ThinkSettings, generate_thinking, think_params, think_problems


def candidate_from(c: Completion, index: int, source: str, spec: AnswerSpec | None = None) -> Candidate:
    """A traced completion as a candidate (text stripped; answer extracted when a spec is given)."""
    text = c.text.strip()
    return Candidate(
        text=text,
        index=index,
        source=source,
        seed=c.seed,
        answer=spec.answer(text) if spec is not None else None,
        finish_reason=c.finish_reason,
        completion_tokens=c.completion_tokens,
        logprobs=[{"token": lp.token, "logprob": lp.logprob} for lp in c.logprobs] if c.logprobs else None,
    )


def thinking_candidates(result: ThinkingResult, source: str, spec: AnswerSpec | None = None) -> list[Candidate]:
    """The answers of thinking samples as candidates, each with its thinking (text, tokens, forced, waits) in meta;
    the answer is extracted from the answer alone."""
    out = []
    for i, (c, thought) in enumerate(zip(result.answers, result.thoughts, strict=True)):
        cand = candidate_from(c, i, source, spec)
        cand.meta.update(thought.meta())
        out.append(cand)
    return out


class Generator(NodeKind):
    """One completion of a prompt template, or one per candidate of a wired set (`for_each`)."""

    kind = "generator"
    title = "Generator"
    category = "generate"
    description = ("One completion of a prompt template with {variables} from its inputs (greedy by default). "
                   "Chain generators for chain of thought or draft-then-answer; `for_each` maps the prompt "
                   "over a candidate set (one completion per candidate).")
    outputs = (
        Port("text", TEXT, "The completion, whitespace stripped (for_each: all completions as a numbered list)"),
        Port("candidates", CANDIDATES, "The completion(s) as a candidate set, for verifiers and voters"),
        Port("thinking", TEXT, "think: the thinking before the answer ('' without one); never in `text`"),
    )
    params = (
        *prompt_params("{question}"),
        Param("for_each", "str", "", "Name of an input holding a candidate set: run the prompt once per "
              "candidate, {name} being that candidate's text ('' = one completion)"),
        *decoding_params(temperature=0.0, max_tokens=128),
        *think_params(),
    )
    variadic_inputs = True
    uses_model = True

    @classmethod
    def validate_params(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        problems = decoding_problems(params) + think_problems(params)
        mapped = str(params.get("for_each") or "")
        if mapped and params.get("think", "off") != "off":
            problems.append(("think", "for_each does not think yet: set think: off, or think in a sampler or a "
                                      "generator before it"))
        if mapped and mapped not in template_variables(str(params.get("prompt") or "")):
            problems.append(("for_each", f"the prompt does not use {{{mapped}}}; add it where each "
                                         "candidate's text should go"))
        return problems

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        settings = ThinkSettings.from_params(params)
        if not settings.on:
            return {"thinking": "", **self._complete(inputs, params, ctx)}
        prompt = build_prompt(params, inputs)
        thought = generate_thinking(ctx, prompt, sampling_params(params, ctx.seed), 1, [ctx.seed], settings)
        (candidate,) = thinking_candidates(thought, ctx.node_id)
        return {"text": candidate.text, "thinking": thought.thoughts[0].text,
                "candidates": CandidateSet([candidate], prompt=thought.prompt_text)}

    def _complete(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        mapped = params["for_each"]
        if mapped:
            return self._for_each(mapped, inputs, params, ctx)
        prompt = build_prompt(params, inputs)
        result = ctx.generate(prompt, sampling_params(params, ctx.seed), n=1, seeds=[ctx.seed])
        candidate = candidate_from(result.completions[0], 0, ctx.node_id)
        return {"text": candidate.text,
                "candidates": CandidateSet([candidate], prompt=result.prompt_text)}

    @staticmethod
    def _for_each(mapped: str, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext,
                  ) -> dict[str, Any]:
        source = inputs.get(mapped)
        if not isinstance(source, CandidateSet):
            raise NodeError(f"for_each: input {mapped!r} must be a candidate set (e.g. a sampler's candidates), "
                            f"got {type(source).__name__}")
        total = len(source)

        def one(i: int) -> GenerateResult:
            prompt = build_prompt(params, {**inputs, mapped: source.candidates[i].text})
            seed = ctx.seed + i
            return ctx.generate(prompt, sampling_params(params, seed), n=1, seeds=[seed],
                                tag={"for_each": mapped, "item": i})

        # concurrent requests, so the engine can batch them
        with ThreadPoolExecutor(max_workers=max(1, min(8, total))) as pool:
            results = list(pool.map(one, range(total)))
        candidates = []
        for i, (item, result) in enumerate(zip(source.candidates, results, strict=True)):
            cand = candidate_from(result.completions[0], i, ctx.node_id)
            cand.meta = {"from": {"source": item.source, "index": item.index}}
            candidates.append(cand)
        ctx.progress(total, total)
        out = CandidateSet(candidates, prompt=results[0].prompt_text if results else "")
        return {"text": format_value(out), "candidates": out}


class Sampler(NodeKind):
    """N completions of one prompt: the parallel step of best-of-N, voting and MBR."""

    kind = "sampler"
    title = "Sampler"
    category = "generate"
    description = ("N sampled completions of one prompt (sample i uses seed + i), as a candidate set. "
                   "Optional adaptive stop: quit once the leading answer cannot be overtaken.")
    outputs = (Port("candidates", CANDIDATES, "The N samples with their seeds and extracted answers"),
               Port("thinking", JSON, "think: each sample's thinking, in sample order ([] without thinking)"))
    params = (
        *prompt_params("{question}"),
        Param("n", "int", 8, "Number of samples to draw", min=1, max=256),
        *decoding_params(temperature=0.7, max_tokens=128),
        Param("adaptive", "choice", "off",
              "majority: stop early once the majority answer is decided (needs an answer extractor)",
              choices=("off", "majority")),
        Param("batch_size", "int", 4, "Adaptive stop: samples drawn per round", min=1, max=64,
              show_if=("adaptive", ("majority",))),
        Param("min_samples", "int", 3, "Adaptive stop: never stop before this many samples", min=1, max=256,
              show_if=("adaptive", ("majority",))),
        *answer_params("auto"),
        *think_params(),
    )
    variadic_inputs = True
    uses_model = True

    @classmethod
    def validate_params(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        problems = decoding_problems(params) + AnswerSpec.from_params(params).problems() + think_problems(params)
        if params.get("think", "off") != "off" and (params.get("adaptive", "off") != "off"
                                                    or params.get("method", "sample") != "sample"):
            problems.append(("think", "thinking budgets work with method: sample and adaptive: off; set think: off "
                                      "or draw the samples without adaptive stop"))
        if params.get("adaptive") == "majority" and params.get("extract") == "keep":
            problems.append(("extract", "adaptive stop extracts answers itself: choose a method other than keep"))
        return problems

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        settings = ThinkSettings.from_params(params)
        if not settings.on:
            return {"thinking": [], **self._draw(inputs, params, ctx)}
        n = params["n"]
        spec = AnswerSpec.from_params(params)
        if spec.extract == "keep":
            spec = AnswerSpec("auto", spec.pattern, spec.normalize)
        thought = generate_thinking(ctx, build_prompt(params, inputs), sampling_params(params, ctx.seed), n,
                                    [ctx.seed + i for i in range(n)], settings)
        ctx.progress(n, n)
        return {"candidates": CandidateSet(thinking_candidates(thought, ctx.node_id, spec), prompt=thought.prompt_text),
                "thinking": [t.text for t in thought.thoughts]}

    def _draw(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        n = params["n"]
        spec = AnswerSpec.from_params(params)
        if spec.extract == "keep":
            spec = AnswerSpec("auto", spec.pattern, spec.normalize)
        prompt = build_prompt(params, inputs)
        sp = sampling_params(params, ctx.seed)
        if params["adaptive"] != "majority":
            result = ctx.generate(prompt, sp, n=n, seeds=[ctx.seed + i for i in range(n)])
            candidates = [candidate_from(c, i, ctx.node_id, spec) for i, c in enumerate(result.completions)]
            ctx.progress(n, n)
            return {"candidates": CandidateSet(candidates, prompt=result.prompt_text)}
        return {"candidates": self._adaptive(prompt, sp, n, spec, params, ctx)}

    @staticmethod
    def _adaptive(prompt: Any, sp: Any, n: int, spec: AnswerSpec, params: dict[str, Any],
                  ctx: NodeContext) -> CandidateSet:
        candidates: list[Candidate] = []
        batches: list[int] = []
        result: GenerateResult | None = None
        decision = None
        for size in batch_plan(n, params["batch_size"], params["min_samples"]):
            start = len(candidates)
            result = ctx.generate(prompt, sp, n=size, seeds=[ctx.seed + start + i for i in range(size)],
                                  tag={"adaptive_batch": len(batches)})
            batches.append(size)
            candidates += [candidate_from(c, start + i, ctx.node_id, spec)
                           for i, c in enumerate(result.completions)]
            ctx.progress(len(candidates), n)
            decision = stop_decision([c.answer for c in candidates], n, params["min_samples"])
            if decision.stop:
                break
        drawn = len(candidates)
        ctx.event("adaptive_stop", {
            "n": n, "drawn": drawn, "saved": n - drawn, "batches": batches,
            "leader": decision.leader if decision else None,
            "leader_count": decision.leader_count if decision else 0,
            "runner_up_count": decision.runner_up_count if decision else 0,
            "no_answer_count": sum(1 for c in candidates if c.answer is None),
        })
        return CandidateSet(candidates, prompt=result.prompt_text if result else "",
                            meta={"adaptive": {"n": n, "drawn": drawn, "saved": n - drawn}})
