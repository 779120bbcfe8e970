"""Thinking budgets of the generating kinds: the think params, and budget forcing as two-phase generation.

Phase 1 writes the thinking: the prompt as the model sees it (chat template applied) plus the open tag, with the
close tag as the only stop string and `think_budget` as max_tokens (grammar and the node's stops apply to the
answer only). A sample that closes (or ends its turn) before `think_min` tokens gets "Wait" instead and goes on
thinking with the budget left (s1); one that reaches the budget (or ends generation inside the block) gets the close
tag forced in. Phase 2 writes the answer after `prompt + open + thinking + close`, every sample's request in flight
at once; the engine's prefix cache serves the prompt and the thinking it has already seen. Phase 1 calls have the
purpose "think", so the node context counts their tokens as thinking_tokens.

Early exit (DEER, `think_early_exit`): phase 1 also stops at each reflection point (a line starting "Wait" or
"Alternatively", or `think_early_exit_delimiter`) after some thinking; there a probe forces the close tag and
"Final answer:" and reads the trial answer greedily with its log-probabilities. When its mean token probability reaches
`think_early_exit_confidence` the sample stops thinking and keeps that answer; otherwise thinking goes on from the
same text. Probes and continuations are new requests whose prompts the prefix cache already holds (the fork is made
in this node, not in the engine), so a probe costs its trial tokens plus a cache lookup. Trace event
"think_early_exit": {"confidence", "samples": [{"index", "exited", "thinking_tokens", "probe_tokens",
"probes": [{"at_tokens", "confidence", "answer"}]}], "exited_count", "thinking_tokens", "probe_tokens",
"thinking_tokens_saved_est", "reference_tokens"}.

Remote engines (source: openai) run one request: a server that separates reasoning (reasoning_content) fills the
thinking; otherwise a thinking block at the start of the text is split off. No budget is forced there.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, replace
from typing import Any

from backends.base import Completion, LLMBackend, Prompt, SamplingParams
from nodes.algorithms.think_exit import (
    PROBE_TOKENS,
    TRIAL_PREFIX,
    confidence_problem,
    probe_finished,
    reflection_stops,
    saved_estimate,
    trial_confidence,
)
from nodes.algorithms.thinking import (
    DEFAULT_THINK_TAGS,
    split_thinking,
    tags_problem,
    with_wait,
    without_stray_tags,
)
from nodes.base import NodeContext, Param, yaml_switch

logger = logging.getLogger(__name__)

PROBE_PURPOSE = "think_probe"
"""The purpose of an early-exit probe (its trial answer's tokens are not thinking)."""
THINK_PURPOSE = "think"
"""The purpose of a generate call that writes thinking (the node context counts its tokens as thinking)."""
THINK_MODES = ("off", "auto", "on")
MAX_WAITS = 8
"""Most early closes replaced by "Wait" per sample (the model may keep closing at once)."""
MAX_SEGMENTS = 64
"""Early exit: most thinking segments (reflection points) per sample, whatever the budget left."""


def think_params() -> tuple[Param, ...]:
    """The thinking params of generator and sampler."""
    shown = ("think", ("auto", "on"))
    return (
        Param("think", "choice", "off", "Thinking block before the answer: off; on = the answer turn starts with "
              "the open tag (any model); auto = only where the chat template opens one (or the output starts with "
              "it). The thinking goes to the `thinking` port, never into the answer", choices=THINK_MODES),
        Param("think_tags", "list", list(DEFAULT_THINK_TAGS), "The open and close tag of a thinking block (plain "
              "text)", show_if=shown),
        Param("think_budget", "int", 256, "Most thinking tokens; at the budget the close tag is forced in and the "
              "answer follows (budget forcing)", min=1, max=32768, show_if=shown),
        Param("think_min", "int", 0, "Fewest thinking tokens: an earlier close is replaced by 'Wait' and thinking "
              "goes on (s1); 0 = off", min=0, max=32768, show_if=shown),
        Param("think_early_exit", "bool", False, "Early exit (DEER): at each reflection point of the thinking (a "
              "line starting 'Wait' or 'Alternatively', or think_early_exit_delimiter) force the close tag and "
              "'Final answer:'; when that trial answer's mean token probability reaches think_early_exit_confidence, "
              "stop thinking and keep it (local engines)", show_if=shown),
        Param("think_early_exit_confidence", "float", 0.95, "Early exit: the trial answer's mean token probability "
              "that ends thinking, in (0, 1]", show_if=shown),
        Param("think_early_exit_delimiter", "str", "", "Early exit: another text that marks a reflection point, "
              "e.g. the model's step delimiter '\\n\\n' ('' = only Wait / Alternatively lines)", show_if=shown),
    )


def think_mode(params: dict[str, Any]) -> str:
    """The think param as its word ("off", "auto", "on"), an unquoted YAML on/off included."""
    return str(yaml_switch(params.get("think", "off"), THINK_MODES))


def think_problems(params: dict[str, Any]) -> list[tuple[str, str]]:
    """Cross-param checks of the think params."""
    out: list[tuple[str, str]] = []
    if params.get("think_early_exit"):
        problem = confidence_problem(params.get("think_early_exit_confidence", 0.95))
        if problem:
            out.append(("think_early_exit_confidence", problem))
        if think_mode(params) == "off":
            out.append(("think_early_exit", "early exit stops a thinking block, and think is off: set think: on "
                                            "(or auto), or think_early_exit: false"))
    if think_mode(params) == "off":
        return out
    problem = tags_problem(params.get("think_tags", list(DEFAULT_THINK_TAGS)))
    if problem:
        out.append(("think_tags", problem))
    budget, minimum = params.get("think_budget"), params.get("think_min")
    if isinstance(budget, int) and isinstance(minimum, int) and minimum > budget:
        out.append(("think_min", f"{minimum} is more than think_budget ({budget}): thinking could never reach it; "
                                 "lower think_min or raise think_budget"))
    return out


@dataclass(frozen=True)
class ThinkSettings:
    mode: str = "off"
    open_tag: str = DEFAULT_THINK_TAGS[0]
    close_tag: str = DEFAULT_THINK_TAGS[1]
    budget: int = 256
    minimum: int = 0
    early_exit: bool = False
    exit_confidence: float = 0.95
    exit_delimiter: str = ""

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> ThinkSettings:
        mode = think_mode(params)
        if mode == "off":  # the other think params are not checked then: never read them
            return cls()
        tags = list(params.get("think_tags") or DEFAULT_THINK_TAGS)
        return cls(mode, tags[0], tags[1], int(params.get("think_budget") or 256),
                   int(params.get("think_min") or 0), bool(params.get("think_early_exit")),
                   float(params.get("think_early_exit_confidence") or 0.95),
                   str(params.get("think_early_exit_delimiter") or ""))

    @property
    def on(self) -> bool:
        return self.mode != "off"


@dataclass
class Thought:
    """One sample's thinking: its text, tokens, whether the close tag was forced at the budget, the Waits."""

    text: str = ""
    tokens: int = 0
    forced: bool = False
    waits: int = 0
    exited: bool = False
    """Early exit: a probe's trial answer was confident enough, and thinking stopped there."""
    probes: list[dict[str, Any]] | None = None
    """Early exit: each probe's {"at_tokens", "confidence", "answer", "tokens"} (None without early exit)."""

    def meta(self) -> dict[str, Any]:
        out = {"thinking": self.text, "thinking_tokens": self.tokens, "think_forced": self.forced,
               "think_waits": self.waits}
        if self.probes is not None:
            out.update({"think_exited": self.exited, "think_probes": len(self.probes)})
        return out


@dataclass
class ThinkingResult:
    prompt_text: str
    answers: list[Completion]
    """The answers alone (thinking never in their text)."""
    thoughts: list[Thought]

    def to_json(self) -> list[dict[str, Any]]:
        return [asdict(t) for t in self.thoughts]


def _is_remote(backend: LLMBackend) -> bool:
    return str(backend.info().get("backend", "")) == "openai"


def generate_thinking(ctx: NodeContext, prompt: Prompt, sp: SamplingParams, n: int, seeds: list[int],
                      settings: ThinkSettings, tag: dict[str, Any] | None = None,
                      model: str | None = None) -> ThinkingResult:
    """N samples that think (within the budget) and then answer; see the module docstring."""
    backend = ctx.backend(model)
    if _is_remote(backend):
        if settings.early_exit:
            logger.warning("think_early_exit needs a local engine (it probes the thinking as it grows); a remote "
                           "server thinks in one request, so this node thinks without early exit")
        return _one_phase(ctx, prompt, sp, n, seeds, settings, tag, model, opened=False)
    rendered = backend.render_prompt(prompt) if not isinstance(prompt, str) else prompt
    opened = rendered.rstrip().endswith(settings.open_tag)
    if not opened and settings.mode == "auto":
        return _one_phase(ctx, prompt, sp, n, seeds, settings, tag, model, opened=False)
    head = rendered if opened else rendered + settings.open_tag
    think_sp = replace(sp, max_tokens=settings.budget, stop=(settings.close_tag,), grammar=None, json_schema=None)
    exits: dict[int, Completion] = {}
    if settings.early_exit:
        thoughts, finishes, exits = _think_with_exits(ctx, head, think_sp, seeds, settings, tag, model)
    else:
        first = ctx.generate(head, think_sp, n=n, seeds=seeds, model=model, purpose=THINK_PURPOSE,
                             tag={**(tag or {}), "phase": "think"})
        thoughts = [Thought(c.text, c.completion_tokens) for c in first.completions]
        finishes = [c.finish_reason for c in first.completions]
    _waits(ctx, head, think_sp, seeds, settings, thoughts, finishes, tag, model)
    for t, finish in zip(thoughts, finishes, strict=True):
        t.forced = finish not in ("stop", EXITED)  # the budget ran out (or generation ended) inside the block
    prompts = [head + t.text + settings.close_tag + "\n" for t in thoughts]

    def answer(i: int) -> Completion:
        if i in exits:  # early exit: the confident trial answer is kept
            return exits[i]
        where = {**(tag or {}), "phase": "answer", "sample": i}
        result = ctx.generate(prompts[i], sp, n=1, seeds=[seeds[i]], model=model, tag=where)
        return result.completions[0]

    answers = [_clean(c, settings) for c in ctx.map(answer, range(n))]
    for t in thoughts:
        t.text = t.text.strip()
    if settings.early_exit:
        _exit_event(ctx, settings, thoughts)
    return ThinkingResult(prompt_text=head, answers=answers, thoughts=thoughts)


EXITED = "early_exit"
"""Phase 1's finish of a sample whose thinking an early-exit probe ended."""


def _think_with_exits(ctx: NodeContext, head: str, think_sp: SamplingParams, seeds: list[int],
                      settings: ThinkSettings, tag: dict[str, Any] | None, model: str | None,
                      ) -> tuple[list[Thought], list[str], dict[int, Completion]]:
    """Phase 1 with early exit: every sample thinks segment by segment (all samples' requests in flight at once),
    probing at each reflection point; (thoughts, finishes, the kept trial answers by sample)."""
    points = reflection_stops(settings.exit_delimiter)
    segment_sp = replace(think_sp, stop=(settings.close_tag, *points))
    probe_sp = replace(think_sp, temperature=0.0, max_tokens=PROBE_TOKENS, stop=("\n",), logprobs=0,
                       token_stats=False, confidence_stop=None)
    exits: dict[int, Completion] = {}

    def one(i: int) -> tuple[Thought, str]:
        thought = Thought(probes=[])
        for _ in range(MAX_SEGMENTS):
            left = settings.budget - thought.tokens
            if left <= 0:
                return thought, "length"
            result = ctx.generate(head + thought.text, replace(segment_sp, max_tokens=left), n=1, seeds=[seeds[i]],
                                  model=model, purpose=THINK_PURPOSE,
                                  tag={**(tag or {}), "phase": "think", "sample": i,
                                       "segment": len(thought.probes or [])})
            c = result.completions[0]
            thought.text += c.text
            thought.tokens += c.completion_tokens
            if c.finish_reason != "stop" or c.stop not in points:
                return thought, c.finish_reason  # the close tag, the end of generation or the budget
            if not thought.text.strip():  # nothing thought yet: no answer to try
                thought.text += c.stop
                continue
            trial = ctx.generate(head + thought.text + settings.close_tag + "\n" + TRIAL_PREFIX, probe_sp, n=1,
                                 seeds=[seeds[i]], model=model, purpose=PROBE_PURPOSE,
                                 tag={**(tag or {}), "phase": "probe", "sample": i, "at_tokens": thought.tokens})
            answer = trial.completions[0]
            confidence = trial_confidence([lp.logprob for lp in answer.logprobs or []])
            assert thought.probes is not None
            thought.probes.append({"at_tokens": thought.tokens, "confidence": round(confidence, 4),
                                   "answer": answer.text.strip(), "tokens": answer.completion_tokens})
            finished = probe_finished(answer.finish_reason)  # a trial cut off at PROBE_TOKENS is no answer
            if answer.text.strip() and finished and confidence >= settings.exit_confidence:
                thought.exited = True
                exits[i] = replace(answer, text=f"{TRIAL_PREFIX} {answer.text.strip()}")
                return thought, EXITED
            thought.text += c.stop  # no confident answer yet: think on from the reflection point
        return thought, "length"  # as many segments as MAX_SEGMENTS: the close tag is forced in, as at the budget

    done = ctx.map(one, range(len(seeds)))
    return [t for t, _ in done], [f for _, f in done], exits


def _exit_event(ctx: NodeContext, settings: ThinkSettings, thoughts: list[Thought]) -> None:
    """The "think_early_exit" trace event: per sample its probes and whether it exited, and the tokens saved."""
    exited = [t.tokens for t in thoughts if t.exited]
    saved, reference = saved_estimate(exited, [t.tokens for t in thoughts if not t.exited], settings.budget)
    probe_tokens = [sum(p["tokens"] for p in t.probes or []) for t in thoughts]
    ctx.event("think_early_exit", {
        "confidence": settings.exit_confidence,
        "samples": [{"index": i, "exited": t.exited, "thinking_tokens": t.tokens, "probe_tokens": probe_tokens[i],
                     "probes": [{k: p[k] for k in ("at_tokens", "confidence", "answer")} for p in t.probes or []]}
                    for i, t in enumerate(thoughts)],
        "exited_count": len(exited), "thinking_tokens": sum(t.tokens for t in thoughts),
        "probe_tokens": sum(probe_tokens), "thinking_tokens_saved_est": saved,
        "reference_tokens": round(reference, 1)})


def _clean(c: Completion, settings: ThinkSettings) -> Completion:
    """The answer without stray think tags: voters, verifiers and metrics never see them."""
    text = without_stray_tags(c.text, settings.open_tag, settings.close_tag)
    return c if text == c.text else replace(c, text=text)


def _waits(ctx: NodeContext, head: str, think_sp: SamplingParams, seeds: list[int], settings: ThinkSettings,
           thoughts: list[Thought], finishes: list[str], tag: dict[str, Any] | None, model: str | None) -> None:
    """Replace each early close (before think_min tokens) with "Wait" and continue, all such samples at once."""
    if settings.minimum <= 0:
        return

    def early(i: int) -> bool:
        t = thoughts[i]
        # a close tag or an end of turn before think_min: either way the model stopped thinking too soon
        return finishes[i] in ("stop", "eog") and t.tokens < settings.minimum and t.waits < MAX_WAITS \
            and t.tokens < settings.budget

    def go_on(i: int) -> None:
        t = thoughts[i]
        t.text, t.waits = with_wait(t.text), t.waits + 1
        sp = replace(think_sp, max_tokens=max(1, settings.budget - t.tokens))
        result = ctx.generate(head + t.text, sp, n=1, seeds=[seeds[i]], model=model, purpose=THINK_PURPOSE,
                              tag={**(tag or {}), "phase": "think", "sample": i, "wait": t.waits})
        c = result.completions[0]
        t.text += c.text
        t.tokens += c.completion_tokens
        finishes[i] = c.finish_reason

    while True:
        todo = [i for i in range(len(thoughts)) if early(i)]
        if not todo:
            return
        ctx.map(go_on, todo)


def _one_phase(ctx: NodeContext, prompt: Prompt, sp: SamplingParams, n: int, seeds: list[int],
               settings: ThinkSettings, tag: dict[str, Any] | None, model: str | None,
               opened: bool) -> ThinkingResult:
    """One request; the thinking is the server's reasoning text, or a thinking block the answer starts with."""
    result = ctx.generate(prompt, sp, n=n, seeds=seeds, model=model, tag=tag)
    answers: list[Completion] = []
    thoughts: list[Thought] = []
    for c in result.completions:
        if c.thinking:
            thoughts.append(Thought(c.thinking.strip(), c.thinking_tokens))
            answers.append(_clean(c, settings))
            continue
        thinking, text = split_thinking(c.text, settings.open_tag, settings.close_tag, opened=opened)
        tokens = len(ctx.backend(model).tokenize(thinking)) if thinking else 0
        thoughts.append(Thought(thinking, tokens))
        answers.append(_clean(replace(c, text=text, completion_tokens=max(0, c.completion_tokens - tokens))
                              if thinking else c, settings))
    return ThinkingResult(prompt_text=result.prompt_text, answers=answers, thoughts=thoughts)
