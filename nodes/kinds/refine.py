"""The `refiner` kind: draft -> feedback -> revise, up to max_iters (self-refine, Madaan et al. 2023).

Feedback is the model's own critique (`self`), a verifier's verdict (`verifier`: a failing test, a
regex miss, a judge's P(yes)), or both. The loop stops early when the check score reaches
`pass_threshold`, when the critique says the stop phrase ("No issues"), or when a revision no
longer changes the draft. Every iteration is kept in the outputs and the trace.

Trace event "refine":
    {"iterations": [{"iteration", "draft", "score", "reason", "feedback", "revision"}],
     "stopped": "threshold" | "no_issues" | "unchanged" | "max_iters", "chosen": iteration index,
     "check": method}
`score`/`reason` are null without a check; `feedback`/`revision` are null on the last iteration.

`method: rsa` (Recursive Self-Aggregation) runs in nodes/kinds/refine_rsa.py instead (trace event "rsa").
"""

from __future__ import annotations

from typing import Any

from nodes.algorithms.extract import normalize_text
from nodes.base import (
    CANDIDATES,
    JSON,
    TEXT,
    Candidate,
    CandidateSet,
    NodeContext,
    NodeKind,
    Param,
    Port,
    template_variables,
)
from nodes.decoding import (
    as_text,
    build_prompt,
    decoding_params,
    decoding_problems,
    prompt_params,
    sampling_params,
)
from nodes.kinds.refine_rsa import DEFAULT_AGGREGATE, run_rsa
from nodes.scoring import RESERVED_VARS, Verdict, regex_problems, score_texts, scoring_params

METHODS = ("refine", "rsa")
RSA_VARS = ("solutions",)
"""The variable the aggregation prompt gets (the subset's candidates, numbered)."""
CHECKS = ("none", "exact", "contains", "regex", "python", "llm_judge", "likelihood")
DEFAULT_FEEDBACK = ("Task: {task}\n\nDraft answer:\n{draft}\n\n"
                    "Point out any mistake in the draft in one or two sentences. "
                    "If it is correct and complete, reply exactly: No issues.")
DEFAULT_REVISE = ("Task: {task}\n\nDraft answer:\n{draft}\n\nFeedback:\n{feedback}\n\n"
                  "Write an improved answer to the task that fixes the problems. Reply with the answer only.")
DEFAULT_CHECK_JUDGE = "Task: {task}\nProposed answer: {candidate}\nIs the proposed answer correct? Reply Yes or No."


def _check_show(methods: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    return ("check", methods)


class Refiner(NodeKind):
    """Iterative refinement with intrinsic (self-critique) or extrinsic (verifier) feedback."""

    kind = "refiner"
    reserved_vars = RESERVED_VARS + RSA_VARS
    title = "Refiner"
    category = "generate"
    description = ("Self-refine: draft, get feedback (the model's critique or a verifier's verdict), revise; "
                   "repeat up to max_iters, stopping early when a check passes or the draft stops changing. "
                   "method: rsa (recursive self-aggregation): a population of candidates improved for `rounds` "
                   "rounds, each new candidate combining a random subset of the last population.")
    inputs = (
        Port("draft", TEXT, "A first draft (optional: else the refiner writes one from the prompt)",
             required=False),
        Port("reference", TEXT, "Reference answer for exact/contains/regex/python checks", required=False),
        Port("candidates", CANDIDATES, "method: rsa: the first population (optional: else `population` samples "
             "of the prompt)", required=False),
    )
    outputs = (
        Port("text", TEXT, "The final (or best-scoring) draft (rsa: the final population's first candidate)"),
        Port("candidates", CANDIDATES, "Every iteration's draft with its check score; the chosen one wins (rsa: "
             "the final population, for a voter or verifier after)"),
        Port("iterations", JSON, "Per iteration: draft, score, reason, feedback, revision (rsa: per round, its "
             "candidates with the ids of those that fed each)"),
    )
    params = (
        *prompt_params("{question}", description="The task; {name} fills in the input wired as `name`"),
        Param("method", "choice", "refine", "refine: draft, feedback, revise (self-refine); rsa: recursive "
              "self-aggregation of a population of candidates", choices=METHODS),
        Param("population", "int", 4, "rsa: N, the candidates made each round (and drawn first when `candidates` "
              "is not wired)", min=1, max=64, show_if=("method", ("rsa",))),
        Param("subset", "int", 2, "rsa: K, the candidates shown together to make each new one (at most N)",
              min=1, max=16, show_if=("method", ("rsa",))),
        Param("rounds", "int", 2, "rsa: T, the aggregation rounds", min=1, max=10, show_if=("method", ("rsa",))),
        Param("aggregate_prompt", "text", DEFAULT_AGGREGATE, "rsa: the aggregation prompt ({task}, {solutions}: the "
              "subset, numbered)", show_if=("method", ("rsa",))),
        Param("max_iters", "int", 2, "Most revisions", min=1, max=10),
        Param("feedback", "choice", "self", "self: the model critiques its draft; verifier: the check's verdict; "
              "both", choices=("self", "verifier", "both")),
        Param("feedback_prompt", "text", DEFAULT_FEEDBACK, "Critique prompt ({task}, {draft})",
              show_if=("feedback", ("self", "both"))),
        Param("revise_prompt", "text", DEFAULT_REVISE, "Revision prompt ({task}, {draft}, {feedback})"),
        Param("stop_phrase", "str", "No issues", "Stop when the critique contains this ('' = never)",
              show_if=("feedback", ("self", "both"))),
        Param("stop_unchanged", "bool", True, "Stop when a revision equals its draft"),
        Param("keep", "choice", "last", "Output the last draft, or the best-scoring one (needs a check)",
              choices=("last", "best")),
        Param("check", "choice", "none", "Verifier applied to each draft (stops at pass_threshold)", choices=CHECKS),
        Param("pass_threshold", "float", 1.0, "Stop when the check score is at least this",
              show_if=("check", CHECKS[1:])),
        Param("judge_model", "str", "", "Model alias for an llm_judge/likelihood check ('' = this node's model)",
              show_if=("check", ("llm_judge", "likelihood"))),
        *scoring_params(_check_show, DEFAULT_CHECK_JUDGE, CHECKS),
        *decoding_params(temperature=0.0, max_tokens=128),
    )
    variadic_inputs = True
    uses_model = True

    @classmethod
    def required_inputs(cls, params: dict[str, Any]) -> list[str]:
        if params.get("method") == "rsa":
            return cls._template_inputs(params, ["prompt", "system", "aggregate_prompt"])
        keys = ["prompt", "system", "revise_prompt"]
        if params.get("feedback") in ("self", "both"):
            keys.append("feedback_prompt")
        if params.get("check") == "llm_judge":
            keys.append("judge_prompt")
        names = cls._template_inputs(params, keys)
        check = params.get("check")
        if check in ("exact", "contains") or (check == "regex" and not params.get("regex")):
            names.append("reference")
        return names

    @classmethod
    def _template_inputs(cls, params: dict[str, Any], keys: list[str]) -> list[str]:
        names: list[str] = []
        for key in keys:
            for var in template_variables(str(params.get(key) or "")):
                if var not in cls.reserved_vars and var not in names:
                    names.append(var)
        return names

    @classmethod
    def validate_params(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        if params.get("method") == "rsa":
            return decoding_problems(params) + cls._rsa_problems(params)
        problems = decoding_problems(params) + regex_problems(params, params.get("check"))
        if params.get("feedback") in ("verifier", "both") and params.get("check") == "none":
            problems.append(("feedback", "verifier feedback needs a check: set `check` (e.g. regex or python)"))
        if params.get("keep") == "best" and params.get("check") == "none":
            problems.append(("keep", "keep: best needs a check to score the drafts"))
        return problems

    @staticmethod
    def _rsa_problems(params: dict[str, Any]) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        n, k = params.get("population"), params.get("subset")
        if isinstance(n, int) and isinstance(k, int) and not isinstance(n, bool) and not isinstance(k, bool) \
                and k > n:
            out.append(("subset", f"subset ({k}) is more than the population N ({n}): each new candidate combines "
                                  "`subset` distinct candidates of the last round; lower subset or raise population"))
        if params.get("check") not in ("none", None):
            out.append(("check", "method: rsa does not check drafts: set check: none and score the final population "
                                 "with a verifier node after it"))
        if params.get("keep") == "best":
            out.append(("keep", "method: rsa outputs the whole final population: set keep: last and choose with a "
                                "voter after it"))
        return out

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        if params["method"] == "rsa":
            return run_rsa(inputs, params, ctx)
        loop = _RefineLoop(inputs, params, ctx)
        stopped = loop.iterate(loop.first_draft(inputs))
        return _refine_outputs(loop.iterations, stopped, loop.task, params, ctx)


class _RefineLoop:
    """One self-refine run, a method per phase: draft, check, feedback, revise; `iterate` says why it stopped."""

    def __init__(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> None:
        self.params = params
        self.ctx = ctx
        self.values = {k: v for k, v in inputs.items() if k not in ("draft",)}
        self.task_prompt = build_prompt(params, self.values)
        self.task = self.task_prompt if isinstance(self.task_prompt, str) else self.task_prompt[-1]["content"]
        self.calls = 0
        self.iterations: list[dict[str, Any]] = []

    def ask(self, prompt: Any, step: str, iteration: int) -> str:
        """One model call; each call of the run gets the next seed."""
        seed = self.ctx.seed + self.calls
        self.calls += 1
        result = self.ctx.generate(prompt, sampling_params(self.params, seed), n=1, seeds=[seed], purpose=step,
                                   tag={"iteration": iteration, "step": step})
        return result.completions[0].text.strip()

    def prompt_from(self, key: str, extra: dict[str, Any]) -> Any:
        return build_prompt({**self.params, "prompt": self.params[key]}, {**self.values, **extra})

    def first_draft(self, inputs: dict[str, Any]) -> str:
        """The wired draft, else one written from the task prompt."""
        if inputs.get("draft") is not None:
            return as_text(inputs["draft"]).strip()
        return self.ask(self.task_prompt, "draft", 0)

    def iterate(self, draft: str) -> str:
        """Check, critique and revise until a stop rule fires; the rule's name (max_iters when none did)."""
        max_iters = self.params["max_iters"]
        for it in range(max_iters + 1):
            record: dict[str, Any] = {"iteration": it, "draft": draft, "score": None, "reason": None,
                                      "feedback": None, "revision": None}
            self.iterations.append(record)
            verdict = self.check(draft, record)
            if verdict is not None and verdict.score >= self.params["pass_threshold"]:
                return "threshold"
            if it == max_iters:
                break
            self.ctx.progress(it, max_iters)
            critique = self.feedback(draft, verdict, record, it)
            if self.critique_sees_no_issues(critique, verdict):
                return "no_issues"
            revision = self.ask(self.prompt_from("revise_prompt", {"task": self.task, "draft": draft,
                                                                   "feedback": record["feedback"]}), "revise", it)
            record["revision"] = revision
            if self.params["stop_unchanged"] and normalize_text(revision) == normalize_text(draft):
                return "unchanged"
            draft = revision
        return "max_iters"

    def check(self, draft: str, record: dict[str, Any]) -> Verdict | None:
        """The check's verdict on the draft (None without a check), noted in the iteration's record."""
        if self.params["check"] == "none":
            return None
        verdict = score_texts(self.params["check"], [draft], self.params, self.values, self.ctx, prompt=self.task,
                              model=self.params["judge_model"] or None,
                              extra=[{"task": self.task, "draft": draft}])[0]
        record["score"], record["reason"] = verdict.score, verdict.reason
        return verdict

    def feedback(self, draft: str, verdict: Verdict | None, record: dict[str, Any], it: int) -> str:
        """The verifier's reason and/or the model's critique, joined into the record's feedback; the critique."""
        parts = []
        critique = ""
        if self.params["feedback"] in ("verifier", "both") and verdict is not None:
            parts.append(verdict.reason)
        if self.params["feedback"] in ("self", "both"):
            critique = self.ask(self.prompt_from("feedback_prompt", {"task": self.task, "draft": draft}),
                                "feedback", it)
            parts.append(critique)
        record["feedback"] = "\n".join(p for p in parts if p)
        return critique

    def critique_sees_no_issues(self, critique: str, verdict: Verdict | None) -> bool:
        """The critique says the stop phrase, and no verifier verdict outranks it."""
        phrase = self.params["stop_phrase"]
        return bool(critique and phrase and phrase.casefold() in critique.casefold() and (
            verdict is None or self.params["feedback"] == "self"))


def _refine_outputs(iterations: list[dict[str, Any]], stopped: str, task: str, params: dict[str, Any],
                    ctx: NodeContext) -> dict[str, Any]:
    """The refiner's outputs from its iterations: the last draft (or with `keep: best` the best-scored one), every
    draft as a candidate, and the trace event saying why the loop stopped."""
    chosen = len(iterations) - 1
    if params["keep"] == "best" and any(r["score"] is not None for r in iterations):
        chosen = max(range(len(iterations)), key=lambda i: (iterations[i]["score"] or 0.0, -i))
    candidates = [
        Candidate(text=r["draft"], index=i, source=ctx.node_id, score=r["score"],
                  scores={ctx.node_id: r["score"]} if r["score"] is not None else {},
                  meta={"iteration": r["iteration"], "feedback": r["feedback"], "reason": r["reason"]})
        for i, r in enumerate(iterations)
    ]
    ctx.event("refine", {"iterations": iterations, "stopped": stopped, "chosen": chosen, "check": params["check"]})
    ctx.progress(params["max_iters"], params["max_iters"])
    return {"text": iterations[chosen]["draft"], "iterations": iterations,
            "candidates": CandidateSet(candidates, prompt=task, winner=chosen)}
