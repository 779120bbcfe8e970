"""Confidence of a sample from its own token statistics (DeepConf, Fu et al. 2025), and DeepConf's filtering.

Per token the engine records the chosen token's log-probability, the token confidence C = -mean log p of the
top-20 tokens, and the entropy H (nats). A sample's confidence under each measure:
- mean_logprob: mean chosen-token log-probability (<= 0);
- lowest_group: the lowest mean C over every window of `group` consecutive tokens (the whole sample when it is
  shorter than one window): the weakest stretch of reasoning;
- tail: mean C over the last `group` tokens (the answer end);
- neg_entropy: minus the mean entropy (<= 0).
Higher is more confident under every measure. Self-certainty (Kang et al. 2025) is the mean over tokens of
KL(uniform || p), recorded per token from the full distribution (`sample_self_certainty`). Filtering keeps the
most confident fraction of samples; the online threshold is the (1 - keep) quantile of the warm-up samples'
confidences.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

MEASURES = ("mean_logprob", "lowest_group", "tail", "neg_entropy")


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def lowest_group(values: Sequence[float], group: int) -> float:
    """The lowest mean over every window of `group` consecutive values (the mean of all when fewer)."""
    if not values:
        raise ValueError("no values")
    group = max(1, group)
    if len(values) <= group:
        return _mean(values)
    window = sum(values[:group])
    lowest = window
    for i in range(group, len(values)):
        window += values[i] - values[i - group]
        lowest = min(lowest, window)
    return lowest / group


def tail(values: Sequence[float], group: int) -> float:
    """The mean of the last `group` values (of all when fewer)."""
    if not values:
        raise ValueError("no values")
    return _mean(values[-max(1, group):])


def sample_confidence(stats: Mapping[str, Sequence[float]], measure: str, group: int) -> float | None:
    """One sample's confidence under `measure` from its token statistics ({"logprob", "confidence",
    "entropy"} lists); None for a sample with no tokens."""
    if measure not in MEASURES:
        raise ValueError(f"unknown confidence measure {measure!r}; one of {', '.join(MEASURES)}")
    key = {"mean_logprob": "logprob", "neg_entropy": "entropy"}.get(measure, "confidence")
    raw = stats.get(key) or ()
    if not isinstance(raw, list | tuple) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in raw):
        raise ValueError(f"the token statistics' {key!r} must be a list of finite numbers")
    values = [float(v) for v in raw]
    if not values:
        return None
    if measure == "mean_logprob":
        return _mean(values)
    if measure == "neg_entropy":
        return -_mean(values)
    if measure == "lowest_group":
        return lowest_group(values, group)
    return tail(values, group)


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) with linear interpolation between order statistics (numpy's default)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    pos = min(max(q, 0.0), 1.0) * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def online_threshold(warmup: Sequence[float], keep: float) -> float:
    """DeepConf online: the confidence below which a later sample is stopped, so that about `keep` of the
    samples (as the warm-up saw them) would run to the end: the (1 - keep) quantile of the warm-up's."""
    return quantile(warmup, 1.0 - keep)


def most_confident(scores: Sequence[float | None], keep: float) -> list[int]:
    """Indices of the ceil(keep x scored) most confident scored samples (at least one), in sampling order;
    among equal scores the earlier sample is kept."""
    scored = [i for i, s in enumerate(scores) if s is not None]
    if not scored:
        return []
    count = max(1, math.ceil(keep * len(scored) - 1e-9))
    ranked = sorted(scored, key=lambda i: (-float(scores[i]), i))  # type: ignore[arg-type]
    return sorted(ranked[:count])


def vote_weights(scores: Sequence[float]) -> list[float]:
    """Weights for a confidence-weighted vote: the confidences themselves when none is negative (DeepConf's C),
    else exp(confidence - the highest) (a mean log-probability becomes a per-token geometric mean probability,
    scaled so the most confident weighs 1: the same vote, and no overflow)."""
    if all(s >= 0 for s in scores):
        return [float(s) for s in scores]
    top = max(float(s) for s in scores)
    return [math.exp(float(s) - top) for s in scores]


SELF_CERTAINTY = "self_certainty"
"""The token statistic holding each token's KL(uniform || p) (backends.token_stats.token_statistics)."""


def sample_self_certainty(stats: Mapping[str, object]) -> float | None:
    """A sample's self-certainty: the mean of its tokens' KL(uniform || p); None for a sample with no tokens.
    KeyError when the statistics carry no self-certainty (an engine that cannot see the distribution)."""
    raw = stats.get(SELF_CERTAINTY)
    if raw is None:
        if not (stats.get("confidence") or stats.get("logprob")):
            return None  # no tokens: a recorder leaves the empty list out
        raise KeyError(SELF_CERTAINTY)
    if not isinstance(raw, list | tuple) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in raw):
        raise ValueError(f"the token statistics' {SELF_CERTAINTY!r} must be a list of finite numbers")
    return _mean([float(v) for v in raw]) if raw else None
