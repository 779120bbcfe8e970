"""Generating kinds: `generator` (one completion, or one per candidate) and `sampler` (N completions).

Trace events: every completion is an LM call traced by the context. The sampler with
`adaptive: majority` also emits "adaptive_stop":
    {"n": planned samples, "drawn": samples drawn, "saved": n - drawn, "batches": [sizes],
     "leader": answer, "leader_count": int, "runner_up_count": int, "no_answer_count": int}
`adaptive: confidence` (DeepConf online) emits "adaptive_stop" with "mode": "confidence" and also
    {"threshold", "group_size", "keep", "warmup": [confidences], "stopped": [{"index", "seed", "tokens"}],
     "stopped_count", "tokens_generated", "tokens_saved_est"}
`method: beam` emits "beam_tree" (backends.beam_search.BeamResult.tree: nodes with parent, step, group, token,
text, logprob, score, status kept / finished / pruned), and `method: cot_decoding` emits "cot_decoding":
    {"first_tokens": [{"token", "logprob"}], "branches": [{"index", "first_token", "answer", "margin",
     "answer_tokens"}], "winner": index | None}
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from backends.base import Completion, GenerateResult, SamplingParams
from nodes.algorithms.adaptive import batch_plan, stop_decision
from nodes.algorithms.confidence import online_threshold, sample_confidence
from nodes.algorithms.cot_decoding import answer_margin
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
from nodes.beam_decoding import BEAM_PARAMS, beam_problems, beam_settings
from nodes.decoding import (
    ECHO_PARAM,
    build_prompt,
    completion_text,
    decoding_params,
    decoding_problems,
    prompt_params,
    sampling_params,
)
from nodes.seeds import sample_seeds
from nodes.thinking import (
    ThinkingResult,
    ThinkSettings,
    generate_thinking,
    think_mode,
    think_params,
    think_problems,
)
from nodes.tool_inputs import TOOL_PARAMS, TOOLS_INPUT, ToolPrompt, tool_mode, tool_problems

STATS_DIGITS = 4
"""Token statistics kept on candidates are rounded to this many decimals (they travel in traces)."""
COT_MAX_BRANCHES = 20
"""cot_decoding reads the first tokens from the engine's top-k log-probabilities, which stop at 20."""


def candidate_from(c: Completion, index: int, source: str, spec: AnswerSpec | None = None, *,
                   verbatim: bool = False, prefix: str = "") -> Candidate:
    """A traced completion as a candidate (text stripped, or kept verbatim: a raw completion continues its prompt,
    so its first line's indentation is part of it; after `prefix`, the echoed prompt, when given; answer extracted
    when a spec is given; the token statistics, when recorded, in meta["token_stats"] for the confidence
    verifier)."""
    text = prefix + c.text if verbatim else c.text.strip()
    cand = Candidate(
        text=text,
        index=index,
        source=source,
        seed=c.seed,
        answer=spec.answer(text) if spec is not None else None,
        finish_reason=c.finish_reason,
        completion_tokens=c.completion_tokens,
        logprobs=[{"token": lp.token, "logprob": lp.logprob} for lp in c.logprobs] if c.logprobs else None,
    )
    if c.thinking:  # a remote server's separate reasoning (reasoning_content), never part of the text
        cand.meta.update({"thinking": c.thinking.strip(), "thinking_tokens": c.thinking_tokens})
    if c.token_stats is not None:
        ts = c.token_stats
        cand.meta["token_stats"] = {name: [round(v, STATS_DIGITS) for v in values] for name, values in
                                    (("logprob", ts.logprob), ("confidence", ts.confidence), ("entropy", ts.entropy),
                                     ("self_certainty", ts.self_certainty)) if values or name != "self_certainty"}
        if ts.approximate:
            cand.meta["token_stats"]["approximate"] = True
    return cand


def tool_candidates(tp: ToolPrompt, completions: list[Completion], source: str, start: int = 0) -> list[Candidate]:
    """Tool-calling samples as candidates: each one's text the answer_json of its parsed calls (or text), its answer
    the calls' canonical form, the raw completion and its family in meta["tool_calls"]."""
    out = []
    for i, c in enumerate(completions):
        completion, canonical, meta = tp.parse(c)
        cand = candidate_from(completion, start + i, source)
        cand.answer = canonical
        cand.meta["tool_calls"] = meta
        out.append(cand)
    return out


def with_tools_input(names: list[str], params: dict[str, Any]) -> list[str]:
    """The required inputs, with `tools` among them in tool-calling mode."""
    return [*names, TOOLS_INPUT] if tool_mode(params) and TOOLS_INPUT not in names else names


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
        Port("text", TEXT, "The completion, whitespace stripped in chat mode and verbatim in raw mode (for_each: "
                           "all completions as a numbered list)"),
        Port("candidates", CANDIDATES, "The completion(s) as a candidate set, for verifiers and voters"),
        Port("thinking", TEXT, "think: the thinking before the answer ('' without one); never in `text`"),
    )
    params = (
        *prompt_params("{question}"),
        ECHO_PARAM,
        Param("for_each", "str", "", "Name of an input holding a candidate set: run the prompt once per "
              "candidate, {name} being that candidate's text ('' = one completion)"),
        *decoding_params(temperature=0.0, max_tokens=128),
        *think_params(),
        *TOOL_PARAMS,
    )
    variadic_inputs = True
    uses_model = True

    @classmethod
    def required_inputs(cls, params: dict[str, Any]) -> list[str]:
        return with_tools_input(super().required_inputs(params), params)

    @classmethod
    def validate_params(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        problems = decoding_problems(params) + think_problems(params) + tool_problems(params)
        mapped = str(params.get("for_each") or "")
        if tool_mode(params) and (mapped or think_mode(params) != "off"):
            problems.append(("tool_calls", "tool calls are drawn from one prompt without thinking: set for_each "
                                           "to '' and think: off"))
        if mapped and think_mode(params) != "off":
            problems.append(("think", "for_each does not think yet: set think: off, or think in a sampler or a "
                                      "generator before it"))
        if mapped and mapped not in template_variables(str(params.get("prompt") or "")):
            problems.append(("for_each", f"the prompt does not use {{{mapped}}}; add it where each "
                                         "candidate's text should go"))
        return problems

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        settings = ThinkSettings.from_params(params)
        if not settings.on:
            out = self._complete(inputs, params, ctx)
            first = out["candidates"].candidates[0] if len(out["candidates"]) == 1 else None
            return {"thinking": first.meta.get("thinking", "") if first is not None else "", **out}
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
        if tool_mode(params):
            tp = ToolPrompt(ctx, inputs, params, prompt, sampling_params(params, ctx.seed))
            result = ctx.generate(tp.prompt, tp.params, n=1, seeds=[ctx.seed])
            (candidate,) = tool_candidates(tp, result.completions, ctx.node_id)
            return {"text": candidate.text, "candidates": tp.candidate_set([candidate], result.prompt_text)}
        result = ctx.generate(prompt, sampling_params(params, ctx.seed), n=1, seeds=[ctx.seed])
        candidate = candidate_from(result.completions[0], 0, ctx.node_id, **completion_text(params, prompt))
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
            seed = sample_seeds(ctx.seed, 1, start=i)[0]
            return ctx.generate(prompt, sampling_params(params, seed), n=1, seeds=[seed],
                                tag={"for_each": mapped, "item": i})

        # concurrent requests, so the engine can batch them
        results = ctx.map(one, range(total))
        candidates = []
        for i, (item, result) in enumerate(zip(source.candidates, results, strict=True)):
            text = completion_text(params, result.prompt_text)
            cand = candidate_from(result.completions[0], i, ctx.node_id, **text)
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
    description = ("N sampled completions of one prompt (sample i uses seed + i), as a candidate set, with "
                   "each token's confidence recorded. Optional adaptive stop: quit once the leading answer cannot "
                   "be overtaken, or stop low-confidence samples early (DeepConf). cot_decoding: branch on the n "
                   "most likely first tokens, each continued greedily (CoT decoding). beam: token-level beam "
                   "search (diverse with diverse_groups > 1), the n beams best first.")
    outputs = (Port("candidates", CANDIDATES, "The N samples with their seeds and extracted answers"),
               Port("thinking", JSON, "think: each sample's thinking, in sample order ([] without thinking)"))
    params = (
        *prompt_params("{question}"),
        ECHO_PARAM,
        Param("method", "choice", "sample",
              "sample: n seeded samples; cot_decoding: the n most likely first tokens, each branch continued "
              "greedily and scored by its answer's top-1/top-2 probability margin (the best one is the winner); "
              "beam: token-level beam search of width n (temperature and the other sampling knobs do not apply)",
              choices=("sample", "cot_decoding", "beam")),
        Param("n", "int", 8, "Number of samples to draw (cot_decoding: branches, at most 20)", min=1, max=256),
        *decoding_params(temperature=0.7, max_tokens=128),
        Param("adaptive", "choice", "off",
              "majority: stop early once the majority answer is decided (needs an answer extractor); "
              "confidence: DeepConf online, stop a sample whose group confidence drops below the threshold "
              "calibrated on the first min_samples samples (its tokens are never generated)",
              choices=("off", "majority", "confidence"), show_if=("method", ("sample",))),
        Param("batch_size", "int", 4, "Adaptive stop: samples drawn per round", min=1, max=64,
              show_if=("adaptive", ("majority", "confidence"))),
        Param("min_samples", "int", 3, "Adaptive stop: never stop before this many samples (confidence: the "
              "warm-up samples that calibrate the threshold)", min=1, max=256,
              show_if=("adaptive", ("majority", "confidence"))),
        Param("keep", "float", 0.9, "Adaptive confidence: the share of samples expected to run to the end; the "
              "threshold is the (1 - keep) quantile of the warm-up's lowest group confidences",
              min=0.1, max=1.0, show_if=("adaptive", ("confidence",))),
        Param("group_size", "int", 64, "Adaptive confidence: tokens per sliding window of group confidence",
              min=1, max=8192, show_if=("adaptive", ("confidence",))),
        *BEAM_PARAMS,
        *answer_params("auto"),
        *think_params(),
        *TOOL_PARAMS,
    )
    variadic_inputs = True
    uses_model = True

    @classmethod
    def required_inputs(cls, params: dict[str, Any]) -> list[str]:
        return with_tools_input(super().required_inputs(params), params)

    @classmethod
    def validate_params(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        problems = decoding_problems(params) + AnswerSpec.from_params(params).problems() + think_problems(params)
        problems += tool_problems(params)
        if tool_mode(params) and (params.get("method", "sample") != "sample" or params.get("adaptive", "off")
                                  not in ("off", None) or think_mode(params) != "off"):
            problems.append(("tool_calls", "tool calls are drawn as n plain samples: set method: sample, "
                                           "adaptive: off and think: off"))
        problems += beam_problems({**params, "think": think_mode(params)})
        if think_mode(params) != "off" and params.get("method") != "beam" and (
                params.get("adaptive", "off") != "off" or params.get("method", "sample") != "sample"):
            problems.append(("think", "thinking budgets work with method: sample and adaptive: off; set think: off "
                                      "or draw the samples without adaptive stop"))
        adaptive, method = params.get("adaptive"), params.get("method")
        if adaptive in ("majority", "confidence") and params.get("extract") == "keep":
            problems.append(("extract", "adaptive stop extracts answers itself: choose a method other than keep"))
        if method == "cot_decoding":
            if adaptive not in ("off", None):
                problems.append(("adaptive", "cot_decoding draws its n branches at once: set adaptive: off"))
            n = params.get("n")
            if isinstance(n, int) and n > COT_MAX_BRANCHES:
                problems.append(("n", f"cot_decoding branches on at most {COT_MAX_BRANCHES} first tokens (the "
                                      f"engine's top-k log-probabilities stop there): lower n to {COT_MAX_BRANCHES}"))
        if adaptive == "confidence":
            n, warm = params.get("n"), params.get("min_samples")
            if isinstance(n, int) and isinstance(warm, int) and warm >= n:
                problems.append(("min_samples", f"adaptive confidence calibrates on the first min_samples samples "
                                                f"and may stop the later ones: make it smaller than n ({n})"))
        return problems

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        settings = ThinkSettings.from_params(params)
        if not settings.on:
            out = self._draw(inputs, params, ctx)
            thoughts = [c.meta.get("thinking", "") for c in out["candidates"].candidates]
            return {"thinking": thoughts if any(thoughts) else [], **out}
        n = params["n"]
        spec = AnswerSpec.from_params(params)
        if spec.extract == "keep":
            spec = AnswerSpec("auto", spec.pattern, spec.normalize)
        thought = generate_thinking(ctx, build_prompt(params, inputs), sampling_params(params, ctx.seed), n,
                                    sample_seeds(ctx.seed, n), settings)
        ctx.progress(n, n)
        return {"candidates": CandidateSet(thinking_candidates(thought, ctx.node_id, spec), prompt=thought.prompt_text),
                "thinking": [t.text for t in thought.thoughts]}

    def _draw(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        n = params["n"]
        spec = AnswerSpec.from_params(params)
        if spec.extract == "keep":
            spec = AnswerSpec("auto", spec.pattern, spec.normalize)
        prompt = build_prompt(params, inputs)
        # token statistics are cheap (read from logits the sampler has) and always recorded, so a sample's
        # cache key does not depend on whether a confidence verifier sits downstream
        sp = replace(sampling_params(params, ctx.seed), token_stats=True)
        if tool_mode(params):
            tp = ToolPrompt(ctx, inputs, params, prompt, sp)
            result = ctx.generate(tp.prompt, tp.params, n=n, seeds=sample_seeds(ctx.seed, n))
            ctx.progress(n, n)
            return {"candidates": tp.candidate_set(tool_candidates(tp, result.completions, ctx.node_id),
                                                   result.prompt_text)}
        if params["method"] == "cot_decoding":
            return {"candidates": cot_decoding(prompt, sp, n, spec, ctx)}
        if params["method"] == "beam":
            return {"candidates": beam_decoding(prompt, sp, params, spec, ctx)}
        if params["adaptive"] == "majority":
            return {"candidates": self._adaptive(prompt, sp, n, spec, params, ctx)}
        if params["adaptive"] == "confidence":
            return {"candidates": deepconf_online(prompt, sp, n, spec, params, ctx)}
        result = ctx.generate(prompt, sp, n=n, seeds=sample_seeds(ctx.seed, n))
        text = completion_text(params, prompt)
        candidates = [candidate_from(c, i, ctx.node_id, spec, **text) for i, c in enumerate(result.completions)]
        ctx.progress(n, n)
        return {"candidates": CandidateSet(candidates, prompt=result.prompt_text)}

    @staticmethod
    def _adaptive(prompt: Any, sp: Any, n: int, spec: AnswerSpec, params: dict[str, Any],
                  ctx: NodeContext) -> CandidateSet:
        candidates: list[Candidate] = []
        batches: list[int] = []
        result: GenerateResult | None = None
        decision = None
        for size in batch_plan(n, params["batch_size"], params["min_samples"]):
            start = len(candidates)
            result = ctx.generate(prompt, sp, n=size, seeds=sample_seeds(ctx.seed, size, start=start),
                                  tag={"adaptive_batch": len(batches)})
            batches.append(size)
            candidates += [candidate_from(c, start + i, ctx.node_id, spec, **completion_text(params, prompt))
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


def deepconf_online(prompt: Any, sp: SamplingParams, n: int, spec: AnswerSpec, params: dict[str, Any],
                    ctx: NodeContext) -> CandidateSet:
    """DeepConf online: the first min_samples samples run to the end and calibrate the threshold (the (1 - keep)
    quantile of their lowest group confidences); the rest run with the engine's confidence stop, in rounds of
    batch_size, until the majority over the samples that finished is decided or n were drawn. Stopped samples
    are left out of the candidates (they have no trustworthy answer) and reported in the trace."""
    group, keep = params["group_size"], params["keep"]
    warm = min(params["min_samples"], n)
    first = ctx.generate(prompt, sp, n=warm, seeds=sample_seeds(ctx.seed, warm), tag={"deepconf": "warmup"})
    kept = [candidate_from(c, i, ctx.node_id, spec) for i, c in enumerate(first.completions)]
    warmup = [sample_confidence(c.meta.get("token_stats") or {}, "lowest_group", group) for c in kept]
    confidences = [v for v in warmup if v is not None]
    if not confidences:
        raise NodeError("adaptive: confidence needs each token's confidence, which this model's backend does not "
                        "record (remote servers do not); use adaptive: majority or off with it")
    threshold = online_threshold(confidences, keep)
    stop_sp = replace(sp, confidence_stop=(group, threshold))
    stopped: list[Candidate] = []
    batches = [warm]
    drawn = warm
    ctx.progress(drawn, n)
    decision = stop_decision([c.answer for c in kept], n, warm)
    while drawn < n and not decision.stop:
        size = min(params["batch_size"], n - drawn)
        result = ctx.generate(prompt, stop_sp, n=size, seeds=sample_seeds(ctx.seed, size, start=drawn),
                              tag={"deepconf": "final", "adaptive_batch": len(batches)})
        for i, c in enumerate(result.completions):
            cand = candidate_from(c, drawn + i, ctx.node_id, spec)
            (stopped if c.finish_reason == "low_confidence" else kept).append(cand)
        batches.append(size)
        drawn += size
        ctx.progress(drawn, n)
        # the samples that will never vote are not samples still to come: the leader is decided against those
        decision = stop_decision([c.answer for c in kept], n - len(stopped), warm)
    finished = [c.completion_tokens for c in kept if c.finish_reason != "low_confidence"]
    full_length = sum(finished) / len(finished) if finished else 0.0
    saved = sum(max(0.0, full_length - c.completion_tokens) for c in stopped)
    ctx.event("adaptive_stop", {
        "mode": "confidence", "n": n, "drawn": drawn, "saved": n - drawn, "batches": batches,
        "threshold": threshold, "group_size": group, "keep": keep, "warmup": warmup,
        "stopped": [{"index": c.index, "seed": c.seed, "tokens": c.completion_tokens} for c in stopped],
        "stopped_count": len(stopped),
        "tokens_generated": sum(c.completion_tokens for c in kept + stopped),
        "tokens_saved_est": round(saved + (n - drawn) * full_length),
        "leader": decision.leader, "leader_count": decision.leader_count,
        "runner_up_count": decision.runner_up_count,
        "no_answer_count": sum(1 for c in kept if c.answer is None),
    })
    meta = {"adaptive": {"n": n, "drawn": drawn, "saved": n - drawn, "stopped": len(stopped),
                         "threshold": threshold}}
    return CandidateSet(kept, prompt=first.prompt_text, meta=meta)


def cot_decoding(prompt: Any, sp: SamplingParams, n: int, spec: AnswerSpec, ctx: NodeContext) -> CandidateSet:
    """CoT decoding (Wang & Zhou 2024): the n most likely first tokens of the answer, each branch continued
    greedily (concurrent requests: the engine decodes them in one batch, the prompt's KV shared through the
    prefix cache); each branch is scored by the mean top-1/top-2 probability margin of its answer's tokens, and
    the best-scoring branch is the set's winner (a `weighted` voter may pool the margins instead)."""
    rendered = ctx.backend().render_prompt(prompt)
    greedy = replace(sp, temperature=0.0, token_stats=False, confidence_stop=None)
    head = ctx.generate(rendered, replace(greedy, max_tokens=1, logprobs=min(n, COT_MAX_BRANCHES)), n=1,
                        seeds=[ctx.seed], tag={"cot_decoding": "first_tokens"})
    lps = head.completions[0].logprobs or []
    if not lps:
        raise NodeError("cot_decoding: the model ended its answer before its first token, so there is nothing "
                        "to branch on; check the prompt (or the chat/raw mode)")
    first_top = [(tok, lp) for tok, lp in (lps[0].top or [(lps[0].token, lps[0].logprob)]) if tok][:n]

    def branch(i: int) -> GenerateResult:
        return ctx.generate(rendered + first_top[i][0], replace(greedy, logprobs=2), n=1, seeds=[ctx.seed],
                            tag={"cot_branch": i, "first_token": first_top[i][0]})

    results = ctx.map(branch, range(len(first_top)))
    candidates: list[Candidate] = []
    branches: list[dict[str, Any]] = []
    for i, ((token, logprob), result) in enumerate(zip(first_top, results, strict=True)):
        c = result.completions[0]
        cand = candidate_from(replace(c, text=token + c.text), i, ctx.node_id, spec)
        # the forced first token's margin: its own probability against the likeliest other first token
        first = [(token, logprob), *[(t, lp) for t, lp in first_top if t != token][:1]]
        pieces = [token] + [lp.token for lp in c.logprobs or []]
        tops = [first] + [lp.top or [(lp.token, lp.logprob)] for lp in c.logprobs or []]
        margin, span = answer_margin(pieces, tops, cand.answer)
        cand.score = margin
        cand.scores[ctx.node_id] = margin
        cand.meta["cot"] = {"first_token": token, "first_logprob": logprob, "margin": margin, "answer_tokens": span}
        candidates.append(cand)
        branches.append({"index": i, "first_token": token, "answer": cand.answer, "margin": margin,
                         "answer_tokens": len(span)})
    answered = [c for c in candidates if c.answer is not None] or candidates
    winner = max(answered, key=lambda c: (c.score or 0.0, -c.index)).index if answered else None
    ctx.event("cot_decoding", {"first_tokens": [{"token": t, "logprob": lp} for t, lp in first_top],
                               "branches": branches, "winner": winner})
    ctx.progress(n, n)
    return CandidateSet(candidates, prompt=head.prompt_text, winner=winner,
                        meta={"cot_decoding": {"branches": len(candidates), "winner": winner}})


def beam_decoding(prompt: Any, sp: SamplingParams, params: dict[str, Any], spec: AnswerSpec,
                  ctx: NodeContext) -> CandidateSet:
    """The n hypotheses of one beam request (the engine decodes every beam in one batch), best first; each
    candidate's score is its length-penalised sequence log-probability."""
    settings = beam_settings(params, sp.max_tokens)
    result = ctx.beam_search(prompt, replace(sp, token_stats=False), settings)
    candidates: list[Candidate] = []
    for i, h in enumerate(result.hypotheses):
        completion = Completion(text=h.text, finish_reason=h.finish_reason, tokens=list(h.tokens),
                                completion_tokens=len(h.tokens), prompt_tokens=result.usage.prompt_tokens)
        cand = candidate_from(completion, i, ctx.node_id, spec)
        cand.score = h.score
        cand.scores[ctx.node_id] = h.score
        cand.meta["beam"] = {"group": h.group, "logprob": h.logprob, "score": h.score, "beam_id": h.beam_id}
        candidates.append(cand)
    ctx.progress(len(candidates), settings.n)
    return CandidateSet(candidates, prompt=result.prompt_text,
                        meta={"beam": {"n": settings.n, "groups": settings.groups,
                                       "steps": result.tree.get("steps", 0)}})
