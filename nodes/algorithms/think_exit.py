"""Pure parts of early exit from thinking (DEER): the reflection points, the trial answer's confidence, the savings."""

from __future__ import annotations

import math
from collections.abc import Sequence

REFLECTION_STOPS = ("\nWait", "\nAlternatively")
"""A line starting with one of these words is a reflection point (the model is about to reconsider)."""
TRIAL_PREFIX = "Final answer:"
"""What the probe forces after the close tag; the trial answer is what the model writes after it."""
PROBE_TOKENS = 16
"""Most tokens of a trial answer."""


def reflection_stops(delimiter: str = "") -> tuple[str, ...]:
    """The stop strings that end a thinking segment at a reflection point (plus the model's step delimiter)."""
    return REFLECTION_STOPS + ((delimiter,) if delimiter and delimiter not in REFLECTION_STOPS else ())


def trial_confidence(logprobs: Sequence[float]) -> float:
    """The trial answer's mean token probability (mean of exp(logprob)); 0 for an empty answer."""
    if not logprobs:
        return 0.0
    return sum(math.exp(lp) for lp in logprobs) / len(logprobs)


PROBE_FINISHES = ("stop", "eog")
"""How a trial answer that finished ends: its line's end (the probe's stop) or the end of generation. One cut off at
PROBE_TOKENS ("length") or stopped otherwise is a fragment, however confident its tokens."""


def probe_finished(finish_reason: str) -> bool:
    """Whether a probe's trial answer finished (may end thinking), rather than being cut off."""
    return finish_reason in PROBE_FINISHES


def confidence_problem(value: object) -> str | None:
    """Why `value` cannot be think_early_exit_confidence (a number in (0, 1]), or None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 < float(value) <= 1.0:
        return (f"must be a number in (0, 1], got {value!r}: the mean token probability of a trial answer at which "
                "thinking stops, e.g. 0.95")
    return None


def saved_estimate(exit_tokens: Sequence[int], full_tokens: Sequence[int], budget: int) -> tuple[int, float]:
    """(thinking tokens saved, the reference length): each exited sample saves the reference minus what it thought,
    the reference being the mean thinking length of the samples that thought to the end (their close tag or the
    budget), or the budget when every sample exited early. An estimate: the exited samples' own ends are unknown."""
    reference = sum(full_tokens) / len(full_tokens) if full_tokens else float(budget)
    return round(sum(max(0.0, reference - t) for t in exit_tokens)), reference
