"""The `verifier` kind: score every candidate with one method of nodes.scoring.

Each candidate gets `scores[<node id>]`, `score` (the latest verifier's), and in `meta`
`reasons[<node id>]` and `passed[<node id>]` (score >= pass_threshold). `method: confidence` reads the token
statistics a sampler left on each candidate (`meta["token_stats"]`): no model call (nodes.algorithms.confidence).

`method: self_certainty` reads the same statistics' per-token KL(uniform || p) (Kang et al. 2025): the candidate's
score is their mean, exact from the full distribution on local models; statistics approximated from a remote
server's top logprobs are used with a warning (a "note" event and the reason say so).

`method: tool_schema` checks each candidate's tool calls (answer_json, as a sampler with `tool_calls: true` draws
them) against its tool's JSON schema and the request's tool_choice (nodes.algorithms.tool_calls.check_answer):
score 1 or 0 with the reason, so a threshold voter or best-of-N drops invalid or unwanted calls. The request is the
one the candidates were drawn with (their set's meta) unless `tools` / `tool_choice` are wired. The kind
`tool_schema` is the same check as a node of its own. With tool-call candidates, `llm_judge` and `reward_model`
read the calls as `name(arg=value)` lines, not their JSON.

`method: prm` also leaves each candidate's `step_scores` (and puts them in the trace); `method: tests` leaves
`meta["tests"][<node id>]` (passed/failed per test, stdout/stderr tails) and puts it in the trace too.

Trace event "score":
    {"method", "pass_threshold", "passed_count", "mean",
     "scores": [{"index", "score", "passed", "reason", "answer", "step_scores" (prm), "tests" (tests)}]}
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from backends.tools.types import ToolAnswer, parse_answer_json
from nodes.algorithms.code_tests import tests_problem
from nodes.algorithms.confidence import MEASURES, sample_confidence, sample_self_certainty
from nodes.algorithms.extract import AnswerSpec
from nodes.algorithms.tool_calls import check_answer, readable
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
    template_variables,
)
from nodes.scoring import (
    COMBINE_OPS,
    METHODS,
    RESERVED_VARS,
    Verdict,
    combine_scores,
    method_show,
    prm_problems,
    regex_problems,
    score_texts,
    scoring_params,
)
from nodes.tool_inputs import request_for

log = logging.getLogger(__name__)

VERIFIER_METHODS = (*METHODS, "tool_schema")
READABLE_METHODS = ("llm_judge", "reward_model")
"""Methods that read tool-call candidates as name(args) lines."""
NO_TOKENS_SCORE = -1e9
"""The confidence of a sample with no tokens: below any real one (and finite, so traces stay plain JSON)."""


class Verifier(NodeKind):
    """Scores every candidate; the scored set feeds voters (weighted, best_of_n, threshold)."""

    kind = "verifier"
    reserved_vars = RESERVED_VARS
    title = "Verifier"
    category = "score"
    description = ("Score each candidate: exact/contains/regex against a reference, python code in a sandbox, "
                   "an LLM judge (P(yes)), likelihood, length, the sampler's own confidence (DeepConf) or "
                   "self-certainty (mean KL(uniform || p) of its tokens), or a combination of earlier scores.")
    inputs = (
        Port("candidates", CANDIDATES, "Candidates to score"),
        Port("reference", TEXT, "Reference answer (exact, contains, regex, python)", required=False),
    )
    outputs = (
        Port("candidates", CANDIDATES, "The candidates with this verifier's scores"),
        Port("scores", JSON, "Scores in candidate order"),
    )
    params = (
        Param("method", "choice", "llm_judge", "How to score (tool_schema: tool calls against their tools' JSON "
              "schemas and the tool_choice, 1 or 0)", choices=VERIFIER_METHODS),
        Param("pass_threshold", "float", 0.5, "A score at least this counts as passed"),
        *scoring_params(method_show),
        Param("weights", "json", {}, "Combine: {verifier node id: weight}; empty = every score, equal weight",
              show_if=("method", ("combine",))),
        Param("combine", "choice", "weighted_sum", "Combine: how to merge the scores", choices=COMBINE_OPS,
              show_if=("method", ("combine",))),
        Param("step_delimiter", "str", "\n\n", "PRM: text between the candidate's steps",
              show_if=("method", ("prm",))),
        Param("model", "str", "", "PRM / reward model: its model alias ('' = this node's model)",
              show_if=("method", ("prm", "reward_model"))),
        Param("measure", "choice", "lowest_group",
              "Confidence: mean_logprob, lowest_group (weakest window, DeepConf), tail (last window), neg_entropy",
              choices=MEASURES, show_if=("method", ("confidence",))),
        Param("group_size", "int", 64, "Confidence: tokens per window (lowest_group, tail)", min=1, max=8192,
              show_if=("method", ("confidence",))),
    )
    variadic_inputs = True
    uses_model = True

    @classmethod
    def required_inputs(cls, params: dict[str, Any]) -> list[str]:
        names = [p.name for p in cls.inputs if p.required]
        method = params.get("method")
        if method in ("exact", "contains") or (method == "regex" and not params.get("regex")):
            names.append("reference")
        templates = {"llm_judge": "judge_prompt", "likelihood": "prefix", "prm": "query", "reward_model": "query",
                     "tests": "tests"}
        if isinstance(method, str) and method in templates:  # a wrong `method: [..]` is reported, not hashed
            for var in template_variables(str(params.get(templates[method]) or "")):
                if var not in RESERVED_VARS and var not in names:
                    names.append(var)
        return names

    @classmethod
    def validate_params(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        problems = AnswerSpec.from_params(params).problems() if params.get("method") == "exact" else []
        problems += [p for p in regex_problems(params, params.get("method")) if p not in problems]
        problems += prm_problems(params, params.get("method"))
        if params.get("method") == "tests" and "{" not in str(params.get("tests") or ""):
            problem = tests_problem(str(params.get("tests") or ""))
            if problem:
                problems.append(("tests", problem))
        if params.get("method") == "python" and params.get("code"):
            try:
                compile(str(params["code"]), "<verifier>", "exec")
            except SyntaxError as exc:
                problems.append(("code", f"is not valid Python: {exc.msg} (line {exc.lineno})"))
            except (ValueError, MemoryError, RecursionError):  # how the parser says `- - - ... 1` nests too deep
                problems.append(("code", "is not valid Python: it nests too deeply for Python's parser"))
        weights = params.get("weights")
        if params.get("method") == "combine" and weights not in (None, "", {}) and (
                not isinstance(weights, dict) or not all(isinstance(v, int | float) for v in weights.values())):
            problems.append(("weights", "must map verifier node ids to numbers, e.g. {judge: 0.7, check: 0.3}"))
        return problems

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        source = inputs["candidates"]
        if not isinstance(source, CandidateSet):
            raise NodeError(f"verifier needs a candidate set, got {type(source).__name__}")
        cset = copy.deepcopy(source)
        cands = cset.candidates
        method = params["method"]
        others = {k: v for k, v in inputs.items() if k != "candidates"}
        if method == "tool_schema":
            verdicts = tool_schema_verdicts(cands, cset, others, params["pass_threshold"])
        elif method == "confidence":
            verdicts = confidence_verdicts(cands, params["measure"], params["group_size"], params["pass_threshold"])
        elif method == "self_certainty":
            verdicts, approximate = self_certainty_verdicts(cands, params["pass_threshold"])
            if approximate:
                message = (f"self-certainty of {approximate} candidate(s) approximated from the top logprobs a remote "
                           "server gave (the rest of the distribution taken as even): rank them only against each "
                           "other, and use a local model for the exact score")
                log.warning("%s: %s", ctx.node_id, message)
                ctx.event("note", {"level": "warning", "message": message})
        elif method == "combine":
            weights = params["weights"] or {}  # json: '' and null mean no weights
            op = params["combine"]
            verdicts = []
            for c in cands:
                value = combine_scores(c.scores, weights, op)
                verdicts.append(Verdict(value, f"{op} of {', '.join(weights or sorted(c.scores))}", c.answer,
                                        value >= params["pass_threshold"]))
        else:
            texts = [readable(c.text) if method in READABLE_METHODS else c.text for c in cands]
            verdicts = score_texts(method, texts, params, others, ctx,
                                   upstream_answers=[c.answer for c in cands], prompt=cset.prompt,
                                   model=params["model"] or None)
        for c, v in zip(cands, verdicts, strict=True):
            c.scores[ctx.node_id] = v.score
            c.score = v.score
            if v.answer is not None and method in ("exact",):
                c.answer = v.answer
            c.meta.setdefault("reasons", {})[ctx.node_id] = v.reason
            c.meta.setdefault("passed", {})[ctx.node_id] = v.passed
            if v.step_scores is not None:
                c.step_scores = list(v.step_scores)
            if v.detail is not None:
                c.meta.setdefault("tests", {})[ctx.node_id] = v.detail
        scores = [v.score for v in verdicts]
        ctx.event("score", {
            "method": method, "pass_threshold": params["pass_threshold"],
            "passed_count": sum(v.passed for v in verdicts),
            "mean": sum(scores) / len(scores) if scores else None,
            "scores": [{"index": i, "score": v.score, "passed": v.passed, "reason": v.reason, "answer": v.answer,
                        **({"step_scores": v.step_scores} if v.step_scores is not None else {}),
                        **({"tests": v.detail} if v.detail is not None else {})}
                       for i, v in enumerate(verdicts)],
        })
        ctx.progress(len(cands), len(cands))
        return {"candidates": cset, "scores": scores}


def confidence_verdicts(cands: list[Candidate], measure: str, group: int, threshold: float) -> list[Verdict]:
    """Each candidate's confidence from the token statistics its sampler recorded (no model call)."""
    verdicts = []
    for c in cands:
        stats = c.meta.get("token_stats")
        if not isinstance(stats, dict):
            raise NodeError("confidence needs the token statistics a sampler records on its candidates; wire a "
                            "sampler's candidates (directly or through other verifiers) into this verifier")
        try:
            value = sample_confidence(stats, measure, group)
        except ValueError as exc:
            raise NodeError(f"candidate {c.index}: {exc}; its token statistics are damaged") from exc
        if value is None:  # an empty sample: nothing to be confident about
            verdicts.append(Verdict(NO_TOKENS_SCORE, f"{measure}: no tokens", c.answer, False))
        else:
            verdicts.append(Verdict(value, f"{measure} = {value:.3f}", c.answer, value >= threshold))
    return verdicts


def self_certainty_verdicts(cands: list[Candidate], threshold: float) -> tuple[list[Verdict], int]:
    """Each candidate's self-certainty from the token statistics its sampler recorded (no model call), and how
    many of them were approximated from top logprobs."""
    verdicts, approximate = [], 0
    for c in cands:
        stats = c.meta.get("token_stats")
        if not isinstance(stats, dict):
            raise NodeError("self_certainty needs the token statistics a sampler records on its candidates; wire a "
                            "sampler's candidates (directly or through other verifiers) into this verifier, and on a "
                            "remote server turn on the sampler's `logprobs` (they are approximated from the top "
                            "logprobs)")
        try:
            value = sample_self_certainty(stats)
        except KeyError:
            raise NodeError(f"candidate {c.index} has no self-certainty in its token statistics: its engine did not "
                            "see the next-token distribution. Sample on a local model, or on a remote server turn on "
                            "the sampler's `logprobs` so it is approximated from the top logprobs") from None
        except ValueError as exc:
            raise NodeError(f"candidate {c.index}: {exc}; its token statistics are damaged") from exc
        approx = bool(stats.get("approximate"))
        approximate += approx
        suffix = " (approximated from top logprobs)" if approx else ""
        if value is None:
            verdicts.append(Verdict(NO_TOKENS_SCORE, "self-certainty: no tokens", c.answer, False))
        else:
            verdicts.append(Verdict(value, f"self-certainty = {value:.3f}{suffix}", c.answer, value >= threshold))
    return verdicts, approximate


def tool_answer_of(c: Candidate) -> ToolAnswer:
    """A candidate's tool answer (a candidate not drawn with tools is a text answer)."""
    return parse_answer_json(c.text) or ToolAnswer(c.text)


def tool_schema_verdicts(cands: list[Candidate], cset: CandidateSet, inputs: dict[str, Any],
                         threshold: float) -> list[Verdict]:
    """1 for a candidate whose calls are valid and allowed by the tool_choice, 0 with the reason otherwise."""
    request = request_for(inputs, cset)
    if request is None:
        raise NodeError("tool_schema needs the tools the candidates answer: draw them with a sampler or generator "
                        "set to tool_calls: true, or wire a `tools` input (and `tool_choice`) into this node")
    verdicts = []
    for c in cands:
        verdict = check_answer(tool_answer_of(c), request)
        score = 1.0 if verdict.ok else 0.0
        c.meta["tool_schema"] = {"ok": verdict.ok, "reason": verdict.reason}
        verdicts.append(Verdict(score, verdict.reason, c.answer, score >= threshold))
    return verdicts


class ToolSchema(NodeKind):
    """The `tool_schema` check as a node of its own (a verifier with method: tool_schema)."""

    kind = "tool_schema"
    title = "Tool-call check"
    category = "score"
    description = ("Check each candidate's tool calls against its tool's JSON schema (unknown tools, missing, unknown "
                   "or mistyped arguments, enums) and the request's tool_choice (none: no call; required: one at "
                   "least; a named function: that one): score 1 or 0 with the reason, for rejection sampling.")
    inputs = (
        Port("candidates", CANDIDATES, "Tool-call candidates (a sampler or generator with tool_calls: true)"),
        Port("tools", JSON, "The tools (else those the candidates were drawn with)", required=False),
        Port("tool_choice", JSON, "The tool choice (else the one the candidates were drawn with)", required=False),
    )
    outputs = Verifier.outputs
    params = (Param("pass_threshold", "float", 0.5, "A score at least this counts as passed"),)

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        return Verifier().run(inputs, {**Verifier.typed_params({"method": "tool_schema"}), **params}, ctx)
