"""Scoring methods shared by the verifier, the refiner and the search: one scorer per method, in a table.

Methods: `exact` / `contains` / `regex` against a reference; `python` (user code in a sandbox); `tests` (the
candidate's own code run against tests, confined: nodes.algorithms.code_tests);
`llm_judge` (P(yes) / (P(yes) + P(no)) from the next-token distribution, candidates scored
concurrently so the engine can batch them); `likelihood` (mean or sum token log-probability of the
candidate after the prompt, optionally as a probability); `length`; `prm` (a process reward model's
P(good) after every step, aggregated; every step of every candidate in one batched pass); `reward_model`
(a reranker / reward model's score of each candidate, one batched request); and `combine` (weighted sum,
mean, min or product of scores earlier verifiers left on the candidates, by verifier node id).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from nodes.algorithms import prm
from nodes.algorithms.code_exec import ExecLimits, isolation, isolation_note
from nodes.algorithms.code_tests import PARTIAL_CHOICES, TestReport, run_many
from nodes.algorithms.extract import MATH, AnswerSpec, answer_params, normalize_answer, normalize_text
from nodes.algorithms.math_equiv import default_checker
from nodes.algorithms.safe_regex import PatternError, compile_pattern, escape, pattern_problem
from nodes.algorithms.sandbox import run_python_verifier
from nodes.base import (
    NodeContext,
    NodeError,
    Param,
    to_jsonable,
)
from nodes.decoding import as_text, render

METHODS = ("exact", "contains", "regex", "python", "tests", "llm_judge", "likelihood", "length", "combine",
           "confidence", "self_certainty", "prm", "reward_model")
CODE_LANGUAGES = ("python",)
"""Languages `method: tests` runs (the harness is per language; only Python so far)."""
COMBINE_OPS = ("weighted_sum", "mean", "min", "product")
EXTRACTING_METHODS = ("exact", "python", "llm_judge")
"""Methods that extract an answer ({answer} / `answer`) and so show the extraction params."""
RESERVED_VARS = ("candidate", "answer", "reference", "partial", "draft", "problem", "task", "feedback")
"""Variables the scoring methods fill in per candidate; never required as wired inputs."""

PYTHON_VERIFIERS = 2
"""Python verifier child processes of one scoring node at once (CPU work, not engine requests)."""
LIKELIHOOD_AGGREGATES = ("mean", "sum")
NORMALIZE = ("sigmoid", "none")


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


DEFAULT_JUDGE_PROMPT = ("Question: {question}\nProposed answer: {candidate}\n"
                        "Is the proposed answer correct? Reply Yes or No.")


@dataclass
class Verdict:
    """One candidate's score under one method."""

    score: float
    reason: str = ""
    answer: str | None = None
    passed: bool = False
    step_scores: list[float] | None = None
    """prm: the score of each step, in order."""
    detail: dict[str, Any] | None = None
    """tests: the per-test results (kept on the candidate and in the trace)."""


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
                   query_default: str = "{question}") -> tuple[Param, ...]:
    """Params of the given scoring methods (combine aside); `show_if_method(methods)` builds each show_if.
    `query_default` is the problem text a PRM / reward model sees before the candidate."""
    every = (
        *(_shared_normalize(p, show_if_method)
          for p in answer_params("auto", show_if=show_if_method(EXTRACTING_METHODS))),
        Param("regex", "str", "", "Regex the candidate must contain (empty: the reference, literally)",
              show_if=show_if_method(("regex",))),
        Param("code", "str", "answer == reference",
              "Python expression over candidate, answer, reference, inputs — or define "
              "verify(candidate, inputs) — returning a bool, a score, or (score, reason)",
              show_if=show_if_method(("python",))),
        *code_test_params(show_if_method(("tests",))),
        Param("partial", "choice", "none", "Tests: a failing program's score. none = the stdin/stdout pairs passed; "
              "observed = also each assert run as a confined program of its own (best-of-N then ranks by tests "
              "passed, as AlphaCode and CodeT do; one more run per test)", choices=PARTIAL_CHOICES,
              show_if=show_if_method(("tests",))),
        Param("timeout_s", "float", 5.0, "Python verifier / tests: time limit per candidate (seconds)", min=0.1,
              max=120, show_if=show_if_method(("python", "tests"))),
        Param("memory_mb", "int", 512, "Python verifier / tests: memory limit per candidate (MB)", min=32, max=8192,
              show_if=show_if_method(("python", "tests"))),
        *judge_params(judge_default, show_if=show_if_method(("llm_judge",))),
        Param("prefix", "text", "", "Likelihood: text the candidate continues (empty: the candidates' prompt)",
              show_if=show_if_method(("likelihood",))),
        Param("aggregate", "choice", "mean", "Likelihood: mean or sum of token log-probabilities; prm: the "
              "candidate's score from its step scores (last, min, prod or mean)",
              choices=(*LIKELIHOOD_AGGREGATES, *(a for a in prm.AGGREGATES if a != "mean")),
              show_if=show_if_method(("likelihood", "prm"))),
        Param("as_probability", "bool", True, "Likelihood: report exp(log-probability), in (0, 1]",
              show_if=show_if_method(("likelihood",))),
        Param("query", "text", query_default, "PRM / reward model: the problem the candidate solves "
              "({name} fills in a wired input)", show_if=show_if_method(("prm", "reward_model"))),
        Param("prm_format", "choice", "tagged", "PRM: tagged (steps closed by step_tag, Math-Shepherd) or chat "
              "(each step a user turn, RLHFlow)", choices=prm.PRM_FORMATS, show_if=show_if_method(("prm",))),
        Param("good_token", "str", "+", "PRM: the token meaning a good step (one token of the PRM's vocabulary)",
              show_if=show_if_method(("prm",))),
        Param("bad_token", "str", "-", "PRM: the token meaning a bad step (one token of the PRM's vocabulary)",
              show_if=show_if_method(("prm",))),
        Param("step_tag", "str", prm.DEFAULT_STEP_TAG, "PRM, tagged: text closing each step, where the verdict "
              f"is read (at most {prm.MAX_STEP_TAG_CHARS} characters)", show_if=show_if_method(("prm",))),
        Param("max_steps", "int", prm.DEFAULT_MAX_STEPS, "PRM: the most steps scored per candidate (the rest of "
              "a longer candidate is its last step)", min=1, max=prm.MAX_STEPS, show_if=show_if_method(("prm",))),
        Param("length_unit", "choice", "words", "Length: what to count", choices=("chars", "words", "tokens"),
              show_if=show_if_method(("length",))),
        Param("length_target", "int", 0, "Length: 0 = score is the length; > 0 = 1 - |length - target| / target",
              min=0, show_if=show_if_method(("length",))),
    )
    method_param = show_if_method(())[0]
    return tuple(p for p in every
                 if p.show_if is None or p.show_if[0] != method_param or set(p.show_if[1]) & set(methods))


def code_test_params(show_if: tuple[str, tuple[str, ...]] | None, tests_default: str = "{tests}",
                     ) -> tuple[Param, ...]:
    """The params of running candidates' code against tests (the `tests` verifier, the `behaviour` voter)."""
    return (
        Param("tests", "text", tests_default, "Python statements run after the candidate's code, each top-level assert "
              "one test (or a HumanEval def check(candidate) with entry_point); {name} fills in a wired input",
              show_if=show_if),
        Param("entry_point", "str", "", "The function the tests call (a check(candidate) gets it as candidate)",
              show_if=show_if),
        Param("language", "choice", "python", "The candidates' language", choices=CODE_LANGUAGES, show_if=show_if),
        Param("io_tests", "json", [], "Stdin/stdout tests: [{input: ..., output: ...}] (or a wired io_tests input)",
              show_if=show_if),
    )


def code_tests_source(params: dict[str, Any], inputs: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The rendered `tests` template and the stdin/stdout pairs (param, else a wired `io_tests`)."""
    template = str(params.get("tests") or "")
    tests = render(template, {k: as_text(v) for k, v in inputs.items()}) if template.strip() else ""
    pairs = params.get("io_tests") or inputs.get("io_tests") or []
    if isinstance(pairs, str):
        import json

        try:
            pairs = json.loads(pairs) if pairs.strip() else []
        except ValueError as exc:
            raise NodeError(f"io_tests is not JSON: {exc}; give a list of {{input, output}}") from None
    if not isinstance(pairs, list) or not all(isinstance(p, dict) and "input" in p for p in pairs):
        raise NodeError("io_tests must be a list of {input: ..., output: ...}")
    return tests, pairs


def code_limits(params: dict[str, Any], ctx: NodeContext | None = None) -> ExecLimits:
    """The run limits of a node's params (cast once, here), lowered to the owner's caps (share mode) and stopped by
    the run's cancel and cap when `ctx` is given."""
    timeout, memory = float(params.get("timeout_s") or 5.0), int(params.get("memory_mb") or 512)
    if ctx is None:
        return ExecLimits(timeout_s=timeout, memory_mb=memory)
    caps_of = getattr(ctx, "code_limit_caps", None)
    caps = caps_of() if callable(caps_of) else None
    if caps is not None:
        timeout, memory = min(timeout, caps[0]), min(memory, caps[1])
    cancel = ctx.cancel
    return ExecLimits(timeout_s=timeout, memory_mb=memory, stop=lambda: cancel.cancelled)


def _shared_normalize(param: Param, show_if_method: Callable[[tuple[str, ...]], tuple[str, tuple[str, ...]]],
                      ) -> Param:
    """The answer's `normalize` param also says how a reward model's raw score is reported (one name, two uses)."""
    if param.name != "normalize":
        return param
    return replace(param, choices=(*param.choices, *(n for n in NORMALIZE if n not in param.choices)),
                   description=param.description + "; reward_model: sigmoid (auto) or none (the raw score)",
                   show_if=show_if_method((*EXTRACTING_METHODS, "reward_model")))


def reward_normalize(value: Any) -> str:
    """How a reward model's score is reported: `auto` (the default) means sigmoid."""
    return "sigmoid" if value in (None, "", "auto") else str(value)


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


def _score_math(job: ScoringJob) -> list[Verdict]:
    """exact with extract: math: mathematical equivalence (math-verify, a time limit per candidate)."""
    reference = job.need_reference()
    out = []
    for a in job.answers:
        if a is None:
            out.append(Verdict(0.0, "no answer found (extract: math)", a))
            continue
        verdict = default_checker().equal(a, reference)
        if verdict.equal:
            out.append(Verdict(1.0, f"answer {a!r} equals the reference {reference!r}", a))
        else:
            why = f": {verdict.problem}" if verdict.problem else ""
            out.append(Verdict(0.0, f"answer {a!r} does not equal the reference {reference!r}{why}", a))
    return out


def _score_exact(job: ScoringJob) -> list[Verdict]:
    if job.spec.extract == MATH:
        return _score_math(job)
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
    caps = ctx.code_limit_caps() if callable(getattr(ctx, "code_limit_caps", None)) else None
    if caps is not None:  # share mode with --allow-python: the owner's caps hold for the verifier too
        timeout, memory = min(timeout, caps[0]), min(memory, caps[1])

    def run_one(i: int) -> Verdict:
        ctx.cancel.raise_if_cancelled()
        res = run_python_verifier(str(params["code"]), job.texts[i], answer=job.answers[i],
                                  reference=job.reference, inputs=data_inputs, timeout_s=timeout,
                                  memory_mb=memory, pass_threshold=job.threshold)
        reason = res.reason or ("passed" if res.passed else "failed")
        return Verdict(res.score, reason if res.ok else f"error: {reason}", job.answers[i])

    return ctx.map(run_one, range(len(job.texts)), limit=PYTHON_VERIFIERS)


def _score_tests(job: ScoringJob) -> list[Verdict]:
    """Run each candidate's code against the tests, confined, in parallel up to the cores."""
    ctx = job.ctx
    if not ctx.allow_code_execution():
        raise NodeError("running candidates' code (method: tests) is disabled here (shared mode); the owner can "
                        "start the app with --allow-code-execution, or use another verifier method")
    tests, pairs = code_tests_source(job.params, job.inputs)
    if not tests.strip() and not pairs:
        raise NodeError("no tests to run: set `tests` (or wire a `tests` input) or `io_tests`")
    limits = code_limits(job.params, ctx)
    ctx.event("code_isolation", {"isolated": isolation() == "bwrap", "note": isolation_note(),
                                 "timeout_s": limits.timeout_s, "memory_mb": limits.memory_mb})
    ctx.cancel.raise_if_cancelled()
    reports = run_many(list(job.texts), tests=tests, entry_point=str(job.params.get("entry_point") or ""),
                       io_tests=pairs, limits=limits, partial=str(job.params.get("partial") or "none"))
    ctx.cancel.raise_if_cancelled()  # programs killed by the stop are no verdict
    return [Verdict(r.score, r.reason, a, detail=test_detail(r)) for r, a in zip(reports, job.answers, strict=True)]


def test_detail(report: TestReport) -> dict[str, Any]:
    """What the trace keeps of one candidate's run: passed/failed per test, output tails."""
    return {"passed": report.passed, "total": report.total, "isolated": report.isolated,
            "tests": [{k: t.get(k) for k in ("index", "source", "passed", "error", "output")} for t in report.tests],
            "stdout_tail": report.stdout[-500:], "stderr_tail": report.stderr[-500:]}


def _score_llm_judge(job: ScoringJob) -> list[Verdict]:
    params = job.params
    yes, no = str(params["yes"]), str(params["no"])  # str(): a null token reads "None", as ever

    def judge_one(i: int) -> Verdict:
        values = {**job.inputs, "candidate": job.texts[i], "answer": job.answers[i] or "",
                  "reference": job.reference or "", **job.extras[i]}
        result = job.ctx.choice_logprobs(_judge_prompt(params, values), [yes, no], model=job.model)
        p = judge_probability(result.logprobs, yes, no)
        return Verdict(p, f"P({yes}) = {p:.3f}", job.answers[i])

    return job.ctx.map(judge_one, range(len(job.texts)))  # concurrent requests, so the engine can batch them


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


def _query(job: ScoringJob, i: int) -> str:
    return render(str(job.params["query"] or ""), {**job.inputs, "reference": job.reference or "", **job.extras[i]})


def _prm_segments(job: ScoringJob, steps: list[list[str]]) -> list[list[str]]:
    """Each candidate's steps laid out for the PRM (Math-Shepherd's tagged text or RLHFlow's chat turns), the
    run's cancel checked between candidates and, in the chat layout, between renderings."""
    params = job.params
    check = job.ctx.cancel.raise_if_cancelled
    out: list[list[str]] = []
    if params["prm_format"] == "tagged":
        for i, s in enumerate(steps):
            check()
            out.append(prm.tagged_segments(_query(job, i), s, str(params["step_delimiter"]), str(params["step_tag"])))
        return out
    backend = job.ctx.backend(job.model)
    try:
        for i, s in enumerate(steps):
            check()
            out.append(prm.chat_segments(_query(job, i), s, str(params["good_token"]),
                                         lambda m, gen: backend.render_prompt(m, add_generation_prompt=gen), check))
    except prm.PrmLayoutError as exc:
        raise NodeError(f"prm_format chat: {exc}; use prm_format: tagged with this model") from None
    return out


def _score_prm(job: ScoringJob) -> list[Verdict]:
    """Every step of every candidate in one batched request: P(good) / (P(good) + P(bad)) read after each step,
    aggregated into the candidate's score."""
    params = job.params
    good, bad, how = str(params["good_token"]), str(params["bad_token"]), str(params["aggregate"])
    if how not in prm.AGGREGATES:
        raise NodeError(f"method prm aggregates step scores with one of {', '.join(prm.AGGREGATES)}, not {how!r}")
    if not job.texts:
        return []
    max_steps = int(params.get("max_steps") or prm.DEFAULT_MAX_STEPS)
    steps = []
    for t in job.texts:
        job.ctx.cancel.raise_if_cancelled()
        steps.append(prm.split_steps(t, str(params["step_delimiter"]), max_steps))
    result = job.ctx.step_logprobs(_prm_segments(job, steps), [good, bad], model=job.model)
    out = []
    for rows, a in zip(result.logprobs, job.answers, strict=True):
        scores = prm.step_scores_from(rows, good, bad)
        value = prm.aggregate(scores, how)
        shown = ", ".join(f"{x:.2f}" for x in scores)
        out.append(Verdict(value, f"{how} of {len(scores)} step scores P({good}) [{shown}] = {value:.3f}", a,
                           step_scores=scores))
    return out


def _score_reward_model(job: ScoringJob) -> list[Verdict]:
    """The reward model's / reranker's score of each candidate against the query, in one batched request."""
    if not job.texts:
        return []
    queries = {_query(job, i) for i in range(len(job.texts))}
    if len(queries) == 1:
        raw = job.ctx.rank(queries.pop(), list(job.texts), model=job.model).scores
    else:  # per-candidate queries (the search's partial solutions): one request per distinct query
        raw = [job.ctx.rank(_query(job, i), [t], model=job.model).scores[0] for i, t in enumerate(job.texts)]
    sigmoid = reward_normalize(job.params["normalize"]) == "sigmoid"
    return [Verdict(_sigmoid(r) if sigmoid else r, f"reward {r:.3f}" + (f" -> sigmoid {_sigmoid(r):.3f}"
                                                                         if sigmoid else ""), a)
            for r, a in zip(raw, job.answers, strict=True)]


def prm_problems(params: dict[str, Any], method: Any) -> list[tuple[str, str]]:
    """(param, message with its hint) for the prm / reward_model / likelihood params that cannot work together."""
    out: list[tuple[str, str]] = []
    how = params.get("aggregate")
    if method == "likelihood" and how not in (None, *LIKELIHOOD_AGGREGATES):
        out.append(("aggregate", f"{how!r} is for method prm; likelihood takes mean or sum"))
    normalize = params.get("normalize")
    if method == "reward_model" and reward_normalize(normalize) not in NORMALIZE:
        out.append(("normalize", f"{normalize!r} is for answers; a reward model's score is sigmoid (auto) or none"))
    elif method != "reward_model" and normalize == "sigmoid":
        out.append(("normalize", "sigmoid is for method reward_model; answers normalize as auto, number, text or none"))
    if method != "prm":
        return out
    if how not in (None, *prm.AGGREGATES):
        out.append(("aggregate", f"{how!r} is for method likelihood; prm takes last, min, prod or mean"))
    good, bad = params.get("good_token"), params.get("bad_token")
    for name, value in (("good_token", good), ("bad_token", bad)):
        if not isinstance(value, str) or not value:
            out.append((name, "must be one token of the PRM's vocabulary, such as '+' / '-' (Math-Shepherd)"))
    if isinstance(good, str) and good and good == bad:
        out.append(("bad_token", f"is the same as good_token {good!r}: a PRM compares two different tokens"))
    if not params.get("step_delimiter"):
        out.append(("step_delimiter", "must not be empty: the PRM scores the steps it separates (e.g. '\\n\\n')"))
    tag = params.get("step_tag")
    if params.get("prm_format") == "tagged" and not tag:
        out.append(("step_tag", "must not be empty with prm_format tagged: the verdict is read at it (' ки')"))
    if isinstance(tag, str) and len(tag) > prm.MAX_STEP_TAG_CHARS:
        out.append(("step_tag", f"has {len(tag):,} characters, more than {prm.MAX_STEP_TAG_CHARS}: it closes every "
                    "step of every candidate; use the PRM's short tag (' ки')"))
    return out


SCORERS: dict[str, Scorer] = {
    "exact": _score_exact,
    "contains": _score_contains,
    "regex": _score_regex,
    "python": _score_python,
    "tests": _score_tests,
    "llm_judge": _score_llm_judge,
    "likelihood": _score_likelihood,
    "length": _score_length,
    "prm": _score_prm,
    "reward_model": _score_reward_model,
}
"""One scorer per method of METHODS but `combine` (which merges scores already on the candidates), `confidence` and
`self_certainty` (which read the token statistics the sampler left on the candidates)."""


def score_texts(method: str, texts: Sequence[str], params: dict[str, Any], inputs: dict[str, Any],
                ctx: NodeContext, *, upstream_answers: Sequence[str | None] | None = None,
                prompt: str = "", model: str | None = None, extra: Sequence[dict[str, Any]] | None = None,
                ) -> list[Verdict]:
    """Score each text with one method (not combine). `extra[i]` adds per-text template variables
    (e.g. {partial} in the search); `prompt` is what the texts continue (likelihood's default prefix)."""
    upstream = list(upstream_answers) if upstream_answers is not None else [None] * len(texts)
    spec = AnswerSpec.from_params({**params, "normalize": "auto"} if params.get("normalize") == "sigmoid" else params)
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
