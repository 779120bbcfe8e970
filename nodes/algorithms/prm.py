"""Process reward scoring as plain functions: split a solution into steps, lay the steps out for a PRM
(Math-Shepherd's tagged text or RLHFlow's chat turns), turn good/bad log-probabilities into step scores, and
aggregate step scores into one score (search-and-learn's last / min / prod, plus mean)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

AGGREGATES = ("last", "min", "prod", "mean")
PRM_FORMATS = ("tagged", "chat")
DEFAULT_STEP_TAG = " ки"
"""Math-Shepherd's step tag: the PRM's verdict on a step is read at the tag that closes it."""

MAX_STEPS = 1024
"""The most steps `max_steps` may ask for: each is a read position of one pass, and a chat turn."""
DEFAULT_MAX_STEPS = 64
MAX_STEP_TAG_CHARS = 32
"""The longest `step_tag`: it is repeated after every step of every candidate (Math-Shepherd's is 3 characters)."""
STEP_MARKER = "\u27e6prm-step\u27e7"
"""Stands for a step's text when the chat template's turn around a step is rendered once."""

Renderer = Callable[[list[dict[str, str]], bool], str]
"""render(messages, add_generation_prompt) -> the PRM's chat template applied to the messages."""
Check = Callable[[], None]
"""Called between steps of long work; raises to stop it (a run's cancel)."""


def _go_on() -> None:
    return None


class PrmLayoutError(ValueError):
    """The PRM's chat template does not lay the conversation out turn after turn (each rendering a prefix of
    the next), so the steps cannot be read in one pass."""


def split_steps(text: str, delimiter: str, max_steps: int | None = None) -> list[str]:
    """The non-empty steps of a solution (whitespace around each step dropped); an empty solution is one empty
    step, so every candidate gets a score. Past `max_steps` the rest of the text is the last step."""
    steps = [s.strip() for s in text.split(delimiter)] if delimiter else [text.strip()]
    steps = [s for s in steps if s]
    if max_steps is not None and len(steps) > max(1, max_steps):
        keep = max(1, max_steps) - 1
        steps = [*steps[:keep], delimiter.join(steps[keep:])]
    return steps or [""]


def good_probability(logprobs: dict[str, float], good: str, bad: str) -> float:
    """P(good) / (P(good) + P(bad)) from two log-probabilities (0.5 when both are impossible)."""
    lg, lb = logprobs.get(good, -math.inf), logprobs.get(bad, -math.inf)
    if lg == -math.inf and lb == -math.inf:
        return 0.5
    top = max(lg, lb)
    pg, pb = math.exp(lg - top), math.exp(lb - top)
    return pg / (pg + pb)


def aggregate(scores: Sequence[float], how: str) -> float:
    """One score from step scores: the last step's, the minimum, the product or the mean."""
    if not scores:
        raise ValueError("no step scores to aggregate")
    if how == "last":
        return float(scores[-1])
    if how == "min":
        return float(min(scores))
    if how == "prod":
        return float(math.prod(scores))
    if how == "mean":
        return float(sum(scores) / len(scores))
    raise ValueError(f"unknown aggregate {how!r}; use one of {', '.join(AGGREGATES)}")


def tagged_segments(question: str, steps: Sequence[str], delimiter: str, tag: str) -> list[str]:
    """Math-Shepherd's layout: `question step1<tag><delimiter>step2<tag>...`; one segment per step, each ending
    at its tag (where the PRM's verdict is read)."""
    segments = []
    for i, step in enumerate(steps):
        lead = (question + " " if question else "") if i == 0 else delimiter
        segments.append(lead + step + tag)
    return segments


def chat_segments(question: str, steps: Sequence[str], good: str, render: Renderer,
                  check: Check = _go_on) -> list[str]:
    """RLHFlow's layout: the first user turn is the question and step 1, each further step a user turn, each
    earlier step answered by an assistant turn holding `good`; segment k ends where the assistant's verdict on
    step k would start. Three renderings, whatever the number of steps: the first turn, one more turn around a
    marker (the text every later step adds, the step in the marker's place), and the whole conversation, which
    the segments must spell out; a template that does not lay turns out that way is rendered turn by turn.
    Raises PrmLayoutError when a rendering is not a prefix of the next."""
    first = {"role": "user", "content": f"{question} {steps[0]}".strip() if steps else question}
    head = render([first], True)
    if len(steps) <= 1:
        return [head]
    check()
    turn = render([first, {"role": "assistant", "content": good}, {"role": "user", "content": STEP_MARKER}], True)
    added = turn[len(head):] if turn.startswith(head) else ""
    if added.count(STEP_MARKER) == 1:
        before, _, after = added.partition(STEP_MARKER)
        segments = [head, *(before + step + after for step in steps[1:])]
        check()
        if "".join(segments) == render(_conversation(question, steps, good), True):
            return segments
    return _chat_segments_turn_by_turn(question, steps, good, render, check)


def _conversation(question: str, steps: Sequence[str], good: str) -> list[dict[str, str]]:
    messages: list[dict[str, str]] = []
    for i, step in enumerate(steps):
        if i:
            messages.append({"role": "assistant", "content": good})
        messages.append({"role": "user", "content": f"{question} {step}".strip() if i == 0 else step})
    return messages


def _chat_segments_turn_by_turn(question: str, steps: Sequence[str], good: str, render: Renderer,
                                check: Check) -> list[str]:
    """The layout for a template whose turns differ from one another: the conversation rendered after each step
    (quadratic in the steps, which `max_steps` bounds; `check` between renderings)."""
    messages = _conversation(question, steps, good)
    segments: list[str] = []
    done = ""
    for i in range(len(steps)):
        check()
        text = render(messages[: 2 * i + 1], True)
        if not text.startswith(done):
            raise PrmLayoutError("the PRM's chat template does not render each turn as a prefix of the next")
        segments.append(text[len(done):])
        done = text
    return segments


def step_scores_from(rows: Sequence[dict[str, float]], good: str, bad: str) -> list[float]:
    return [good_probability(row, good, bad) for row in rows]


def describe(steps: Sequence[str], scores: Sequence[float], how: str) -> dict[str, Any]:
    """The trace entry of one candidate: its steps with their scores, and the aggregate."""
    return {"steps": [{"text": s, "score": sc} for s, sc in zip(steps, scores, strict=True)],
            "aggregate": how, "score": aggregate(scores, how)}
