"""CoT decoding's answer confidence (Wang & Zhou 2024): the mean, over the answer's tokens, of the probability
margin between the two most likely tokens, p(top-1) - p(top-2), on a greedily decoded branch."""

from __future__ import annotations

import math
from collections.abc import Sequence


def token_margin(top: Sequence[tuple[str, float]]) -> float:
    """p(top-1) - p(top-2) from a token's top alternatives (log-probabilities); p(top-1) alone with one."""
    probs = sorted((math.exp(lp) for _, lp in top), reverse=True)
    if not probs:
        return 0.0
    return probs[0] - (probs[1] if len(probs) > 1 else 0.0)


def answer_span(pieces: Sequence[str], answer: str | None) -> list[int]:
    """Indices of the tokens covering the last occurrence of `answer` in the text the pieces spell; every
    token when the answer is missing or not found verbatim (e.g. only its normalized form is)."""
    text = "".join(pieces)
    at = text.rfind(answer) if answer else -1
    if at < 0:
        return list(range(len(pieces)))
    end = at + len(answer)  # type: ignore[arg-type]
    span, pos = [], 0
    for i, piece in enumerate(pieces):
        start, pos = pos, pos + len(piece)
        if pos > at and start < end:
            span.append(i)
    return span


def answer_margin(pieces: Sequence[str], tops: Sequence[Sequence[tuple[str, float]]],
                  answer: str | None) -> tuple[float, list[int]]:
    """The mean top-1/top-2 margin over the answer's tokens, and those token indices (0.0 and [] when the
    branch produced no tokens)."""
    span = answer_span(pieces, answer)
    if not span:
        return 0.0, []
    return sum(token_margin(tops[i]) for i in span) / len(span), span
