"""Thinking budgets of the generating kinds: the think params, and budget forcing as two-phase generation.

Phase 1 writes the thinking: the prompt as the model sees it (chat template applied) plus the open tag, with the
close tag as the only stop string and `think_budget` as max_tokens (grammar and the node's stops apply to the
answer only). A sample that closes (or ends its turn) before `think_min` tokens gets "Wait" instead and goes on
thinking with the budget left (s1); one that reaches the budget (or ends generation inside the block) gets the close
tag forced in. Phase 2 writes the answer after `prompt + open + thinking + close`, every sample's request in flight
at once; the engine's prefix cache serves the prompt and the thinking it has already seen. Phase 1 calls have the
purpose "think", so the node context counts their tokens as thinking_tokens.

Remote engines (source: openai) run one request: a server that separates reasoning (reasoning_content) fills the
thinking; otherwise a thinking block at the start of the text is split off. No budget is forced there.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any

from backends.base import Completion, LLMBackend, Prompt, SamplingParams
from nodes.algorithms.thinking import (
    DEFAULT_THINK_TAGS,
    split_thinking,
    tags_problem,
    with_wait,
    without_stray_tags,
)
from nodes.base import NodeContext, Param, yaml_switch

THINK_PURPOSE = "think"
"""The purpose of a generate call that writes thinking (the node context counts its tokens as thinking)."""
THINK_MODES = ("off", "auto", "on")
MAX_WAITS = 8
"""Most early closes replaced by "Wait" per sample (the model may keep closing at once)."""
MAX_PARALLEL = 32


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
    )


def think_mode(params: dict[str, Any]) -> str:
    """The think param as its word ("off", "auto", "on"), an unquoted YAML on/off included."""
    return str(yaml_switch(params.get("think", "off"), THINK_MODES))


def think_problems(params: dict[str, Any]) -> list[tuple[str, str]]:
    """Cross-param checks of the think params."""
    if think_mode(params) == "off":
        return []
    out: list[tuple[str, str]] = []
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

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> ThinkSettings:
        mode = think_mode(params)
        if mode == "off":  # the other think params are not checked then: never read them
            return cls()
        tags = list(params.get("think_tags") or DEFAULT_THINK_TAGS)
        return cls(mode, tags[0], tags[1], int(params.get("think_budget") or 256),
                   int(params.get("think_min") or 0))

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

    def meta(self) -> dict[str, Any]:
        return {"thinking": self.text, "thinking_tokens": self.tokens, "think_forced": self.forced,
                "think_waits": self.waits}


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
        return _one_phase(ctx, prompt, sp, n, seeds, settings, tag, model, opened=False)
    rendered = backend.render_prompt(prompt) if not isinstance(prompt, str) else prompt
    opened = rendered.rstrip().endswith(settings.open_tag)
    if not opened and settings.mode == "auto":
        return _one_phase(ctx, prompt, sp, n, seeds, settings, tag, model, opened=False)
    head = rendered if opened else rendered + settings.open_tag
    think_sp = replace(sp, max_tokens=settings.budget, stop=(settings.close_tag,), grammar=None, json_schema=None)
    first = ctx.generate(head, think_sp, n=n, seeds=seeds, model=model, purpose=THINK_PURPOSE,
                         tag={**(tag or {}), "phase": "think"})
    thoughts = [Thought(c.text, c.completion_tokens) for c in first.completions]
    finishes = [c.finish_reason for c in first.completions]
    _waits(ctx, head, think_sp, seeds, settings, thoughts, finishes, tag, model)
    for t, finish in zip(thoughts, finishes, strict=True):
        t.forced = finish != "stop"  # the budget ran out (or generation ended) inside the block
    prompts = [head + t.text + settings.close_tag + "\n" for t in thoughts]

    def answer(i: int) -> Completion:
        where = {**(tag or {}), "phase": "answer", "sample": i}
        result = ctx.generate(prompts[i], sp, n=1, seeds=[seeds[i]], model=model, tag=where)
        return result.completions[0]

    with ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL, n))) as pool:
        answers = [_clean(c, settings) for c in pool.map(answer, range(n))]
    for t in thoughts:
        t.text = t.text.strip()
    return ThinkingResult(prompt_text=head, answers=answers, thoughts=thoughts)


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
        with ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL, len(todo)))) as pool:
            list(pool.map(go_on, todo))


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
