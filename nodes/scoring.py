"""Scoring methods shared by the verifier, the refiner and the search: one scorer per method, in a table.

Methods: `exact` / `contains` / `regex` against a reference; `python` (user code in a sandbox);
`llm_judge` (P(yes) / (P(yes) + P(no)) from the next-token distribution, candidates scored
concurrently so the engine can batch them); `likelihood` (mean or sum token log-probability of the
candidate after the prompt, optionally as a probability); `length`; and `combine` (weighted sum,
mean, min or product of scores earlier verifiers left on the candidates, by verifier node id).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from nodes.algorithms.extract import AnswerSpec, answer_params, normalize_answer, normalize_text
from nodes.algorithms.safe_regex import PatternError, compile_pattern, escape, pattern_problem
from nodes.algorithms.sandbox import run_python_verifier
from nodes.base import (
    NodeContext,
    NodeError,
    Param,
    to_jsonable,
)
from nodes.decoding import as_text, render

METHODS = ("exact", "contains", "regex", "python", "llm_judge", "likelihood", "length", "combine", "confidence")
COMBINE_OPS = ("weighted_sum", "mean", "min", "product")
EXTRACTING_METHODS = ("exact", "python", "llm_judge")
"""Methods that extract an answer ({answer} / `answer`) and so show the extraction params."""
RESERVED_VARS = ("candidate", "answer", "reference", "partial", "draft", "problem", "task", "feedback")
"""Variables the scoring methods fill in per candidate; never required as wired inputs."""

DEFAULT_JUDGE_PROMPT = ("Question: {question}\nProposed answer: {candidate}\n"
                        "Is the proposed answer correct? Reply Yes or No.")


@dataclass
class Verdict:
    """One candidate's score under one method."""

    score: float
    reason: str = ""
    answer: str | None = None
    passed: bool = False


def judge_params(prompt_default: str = DEFAULT_JUDGE_PROMPT, show_if: tuple[str, tuple[str, ...]] | None = None,
                 ) -> tuple[Param, ...]:
    """The llm_judge prompt and yes/no tokens (shared with the refiner's and the search's scorers)."""
    return (
        Param("judge_prompt", "text", prompt_default,
              "Yes/no question about {candidate} (also {answer}, {reference} and wired inputs)", show_if=show_if),
        Param("yes", "str", "Yes", "Token meaning yes (first token counts)", show_if=show_if),
        Param("no", "str", "No", "Token meaning no (first token counts)", show_if=show_if),
        Param("judge_mode", "choice", "chat", "Ask the judge through the chat template or as raw text",
              choices=("chat", "raw"), show_if=show_if),
    )


def scoring_params(show_if_method: Callable[[tuple[str, ...]], tuple[str, tuple[str, ...]]],
                   judge_default: str = DEFAULT_JUDGE_PROMPT, methods: Sequence[str] = METHODS,
                   ) -> tuple[Param, ...]:
    """Params of the given scoring methods (combine aside); `show_if_method(methods)` builds each show_if."""
    every = (
        *answer_params("auto", show_if=show_if_method(EXTRACTING_METHODS)),
        Param("regex", "str", "", "Regex the candidate must contain (empty: the reference, literally)",
              show_if=show_if_method(("regex",))),
        Param("code", "str", "answer == reference",
              "Python expression over candidate, answer, reference, inputs — or define "
              "verify(candidate, inputs) — returning a bool, a score, or (score, reason)",
              show_if=show_if_method(("python",))),
        Param("timeout_s", "float", 5.0, "Python verifier: time limit per candidate (seconds)", min=0.1, max=120,
              show_if=show_if_method(("python",))),
        Param("memory_mb", "int", 256, "Python verifier: memory limit per candidate (MB)", min=32, max=8192,
              show_if=show_if_method(("python",))),
        *judge_params(judge_default, show_if=show_if_method(("llm_judge",))),
        Param("prefix", "text", "", "Likelihood: text the candidate continues (empty: the candidates' prompt)",
              show_if=show_if_method(("likelihood",))),
        Param("aggregate", "choice", "mean", "Likelihood: mean or sum of token log-probabilities",
              choices=("mean", "sum"), show_if=show_if_method(("likelihood",))),
        Param("as_probability", "bool", True, "Likelihood: report exp(log-probability), in (0, 1]",
              show_if=show_if_method(("likelihood",))),
        Param("length_unit", "choice", "words", "Length: what to count", choices=("chars", "words", "tokens"),
              show_if=show_if_method(("length",))),
        Param("length_target", "int", 0, "Length: 0 = score is the length; > 0 = 1 - |length - target| / target",
              min=0, show_if=show_if_method(("length",))),
    )
    method_param = show_if_method(())[0]
    return tuple(p for p in every
                 if p.show_if is None or p.show_if[0] != method_param or set(p.show_if[1]) & set(methods))


def regex_problems(params: dict[str, Any], method: Any) -> list[tuple[str, str]]:
    """(param, message) for the user patterns a scorer of `method` would compile and the safe (RE2) engine
    cannot run: the `regex` of the regex method, the extraction `pattern` (answers are extracted for every
    method). Each message carries the hint."""
    out: list[tuple[str, str]] = []
    if method == "regex" and params.get("regex"):
        problem = pattern_problem(str(params["regex"]), multiline=True)
        if problem:
            out.append(("regex", problem))
    if params.get("extract") == "regex" and params.get("pattern"):
        problem = pattern_problem(str(params["pattern"]), multiline=True)
        if problem:
            out.append(("pattern", problem))
    return out


def method_show(methods: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    return ("method", methods)


def judge_probability(logprobs: dict[str, float], yes: str, no: str) -> float:
    """P(yes) / (P(yes) + P(no)), computed stably from two log-probabilities."""
    ly, ln = logprobs.get(yes, -math.inf), logprobs.get(no, -math.inf)
    if ly == -math.inf and ln == -math.inf:
        return 0.5
    top = max(ly, ln)
    py, pn = math.exp(ly - top), math.exp(ln - top)
    return py / (py + pn)


def _judge_prompt(params: dict[str, Any], values: dict[str, Any]) -> Any:
    text = render(str(params["judge_prompt"]), values)
    if params["judge_mode"] == "raw":
        return text
    return [{"role": "user", "content": text}]


def length_score(n: int, target: int) -> float:
    return float(n) if target <= 0 else max(0.0, 1.0 - abs(n - target) / target)


def _reference(inputs: dict[str, Any]) -> str | None:
    ref = inputs.get("reference")
    return None if ref is None else as_text(ref)


@dataclass
class ScoringJob:
    """What a scorer gets: the texts with their extracted answers, and where they come from."""

    method: str
    texts: Sequence[str]
    answers: list[str | None]
    spec: AnswerSpec
    reference: str | None
    extras: list[dict[str, Any]]
    """Per-text template variables (e.g. {partial} in the search)."""
    threshold: float
    params: dict[str, Any]
    inputs: dict[str, Any]
    ctx: NodeContext
    prompt: str
    model: str | None

    def need_reference(self) -> str:
        if self.reference is None:
            raise NodeError(f"method {self.method} compares with a reference: wire the `reference` input")
        return self.reference


Scorer = Callable[[ScoringJob], list[Verdict]]


def _score_exact(job: ScoringJob) -> list[Verdict]:
    ref = normalize_answer(job.need_reference(), job.spec.normalize)
    out = []
    for a in job.answers:
        if a is None:
            out.append(Verdict(0.0, f"no answer found (extract: {job.spec.extract})", a))
        elif a == ref:
            out.append(Verdict(1.0, f"answer {a!r} matches the reference", a))
        else:
            out.append(Verdict(0.0, f"answer {a!r} does not match the reference {ref!r}", a))
    return out


def _score_contains(job: ScoringJob) -> list[Verdict]:
    reference = job.need_reference()
    ref_norm = normalize_text(reference)
    return [Verdict(1.0, f"contains {reference!r}", a) if ref_norm in normalize_text(t)
            else Verdict(0.0, f"does not contain {reference!r}", a)
            for t, a in zip(job.texts, job.answers, strict=True)]


def _score_regex(job: ScoringJob) -> list[Verdict]:
    pattern = job.params["regex"]
    if not pattern:
        if job.reference is None:
            raise NodeError("method regex needs the `regex` param or a wired `reference`")
        pattern = escape(job.reference)
    try:  # RE2: linear time, so a pattern such as (a+)+$ cannot hang the run
        compiled = compile_pattern(pattern, multiline=True)
    except PatternError as exc:
        raise NodeError(str(exc)) from None
    return [Verdict(1.0, f"matches /{pattern}/", a) if compiled.search(t)
            else Verdict(0.0, f"no match for /{pattern}/", a)
            for t, a in zip(job.texts, job.answers, strict=True)]


def _score_python(job: ScoringJob) -> list[Verdict]:
    ctx, params = job.ctx, job.params
    if not ctx.allow_python():
        raise NodeError("the python verifier is disabled here (shared mode); the owner can allow it, "
                        "or use another verifier method")
    data_inputs = to_jsonable({k: v for k, v in job.inputs.items()})
    # the casts stay at the sandbox's door: a null (None) limit or code must not reach it as None
    timeout, memory = float(params["timeout_s"]), int(params["memory_mb"])

    def run_one(i: int) -> Verdict:
        ctx.cancel.raise_if_cancelled()
        res = run_python_verifier(str(params["code"]), job.texts[i], answer=job.answers[i],
                                  reference=job.reference, inputs=data_inputs, timeout_s=timeout,
                                  memory_mb=memory, pass_threshold=job.threshold)
        reason = res.reason or ("passed" if res.passed else "failed")
        return Verdict(res.score, reason if res.ok else f"error: {reason}", job.answers[i])

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(run_one, range(len(job.texts))))


def _score_llm_judge(job: ScoringJob) -> list[Verdict]:
    params = job.params
    yes, no = str(params["yes"]), str(params["no"])  # str(): a null token reads "None", as ever

    def judge_one(i: int) -> Verdict:
        values = {**job.inputs, "candidate": job.texts[i], "answer": job.answers[i] or "",
                  "reference": job.reference or "", **job.extras[i]}
        result = job.ctx.choice_logprobs(_judge_prompt(params, values), [yes, no], model=job.model)
        p = judge_probability(result.logprobs, yes, no)
        return Verdict(p, f"P({yes}) = {p:.3f}", job.answers[i])

    # concurrent requests, so the engine can batch them
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(job.texts)))) as pool:
        return list(pool.map(judge_one, range(len(job.texts))))


def _score_likelihood(job: ScoringJob) -> list[Verdict]:
    params = job.params
    prefix_tpl = params["prefix"]
    prefix = render(prefix_tpl, {**job.inputs, "reference": job.reference or ""}) if prefix_tpl else job.prompt
    if not job.texts:
        return []
    result = job.ctx.score(prefix, list(job.texts), model=job.model)
    aggregate = params["aggregate"]
    out = []
    for sc, a in zip(result.scores, job.answers, strict=True):
        value = sc.mean_logprob if aggregate == "mean" else sc.logprob
        score = math.exp(value) if params["as_probability"] else value
        out.append(Verdict(score, f"{aggregate} log-prob {value:.3f} over {sc.n_tokens} tokens", a))
    return out


def _score_length(job: ScoringJob) -> list[Verdict]:
    unit, target = job.params["length_unit"], job.params["length_target"]
    out = []
    for t, a in zip(job.texts, job.answers, strict=True):
        n = len(t) if unit == "chars" else len(t.split()) if unit == "words" else len(
            job.ctx.backend(job.model).tokenize(t))
        out.append(Verdict(length_score(n, target), f"{n} {unit}", a))
    return out


SCORERS: dict[str, Scorer] = {
    "exact": _score_exact,
    "contains": _score_contains,
    "regex": _score_regex,
    "python": _score_python,
    "llm_judge": _score_llm_judge,
    "likelihood": _score_likelihood,
    "length": _score_length,
}
"""One scorer per method of METHODS but `combine` (which merges scores already on the candidates) and `confidence`
(which reads the token statistics the sampler left on the candidates)."""


def score_texts(method: str, texts: Sequence[str], params: dict[str, Any], inputs: dict[str, Any],
                ctx: NodeContext, *, upstream_answers: Sequence[str | None] | None = None,
                prompt: str = "", model: str | None = None, extra: Sequence[dict[str, Any]] | None = None,
                ) -> list[Verdict]:
    """Score each text with one method (not combine). `extra[i]` adds per-text template variables
    (e.g. {partial} in the search); `prompt` is what the texts continue (likelihood's default prefix)."""
    upstream = list(upstream_answers) if upstream_answers is not None else [None] * len(texts)
    spec = AnswerSpec.from_params(params)
    job = ScoringJob(
        method=method, texts=texts, answers=[spec.answer(t, u) for t, u in zip(texts, upstream, strict=True)],
        spec=spec, reference=_reference(inputs), extras=list(extra) if extra is not None else [{} for _ in texts],
        threshold=params["pass_threshold"], params=params, inputs=inputs, ctx=ctx,
        prompt=prompt, model=model,
    )
    scorer = SCORERS.get(method)
    if scorer is None:
        raise NodeError(f"unknown verifier method {method!r}; use one of {', '.join(METHODS)}")
    verdicts = scorer(job)
    for v in verdicts:
        v.passed = v.score >= job.threshold
    return verdicts


def combine_scores(scores: dict[str, float], weights: dict[str, float], op: str) -> float:
    """Combine named scores; with weights, only the weighted names take part."""
    names = list(weights) if weights else sorted(scores)
    missing = [n for n in names if n not in scores]
    if missing:
        raise NodeError(f"combine needs score {missing[0]!r} but the candidates carry "
                        f"{', '.join(sorted(scores)) or 'no scores'}; name verifier node ids in `weights`")
    values = [float(scores[n]) * (float(weights[n]) if weights and op == "weighted_sum" else 1.0) for n in names]
    if not values:
        raise NodeError("combine found no scores on the candidates; put verifiers before it")
    if op == "weighted_sum":
        return sum(values)
    if op == "mean":
        return sum(values) / len(values)
    if op == "min":
        return min(values)
    return math.prod(values)
