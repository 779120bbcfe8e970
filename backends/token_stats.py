"""Per-token confidence statistics read from a logits row the sampler already has (log-probability of the chosen
token, DeepConf token confidence, entropy, self-certainty), the sliding group window of DeepConf's online early stop,
and self-certainty approximated from a remote server's top logprobs."""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from backends.base import CONFIDENCE_TOP_K, TokenLogprob, TokenStats

REMOTE_VOCAB = 128_000
"""The vocabulary size assumed for a remote model's approximate self-certainty (servers do not say it); with the
rest of the mass spread evenly the value is about -log(rest mass) for any large vocabulary, so its exact size
matters little."""
TOP_WINDOW_NATS = 15.0
"""The top-k tokens are looked for among those within this many nats of the most likely one (about a thousand
of a 49k vocabulary), and in the whole row only when fewer than k are that close: exact either way."""


class StatsScratch:
    """Reused buffers for one vocabulary size, so a token's statistics allocate little (engine thread only)."""

    def __init__(self) -> None:
        self.shifted = np.empty(0, dtype=np.float32)
        self.exp = np.empty(0, dtype=np.float32)

    def buffers(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        if self.shifted.shape[0] != n:
            self.shifted = np.empty(n, dtype=np.float32)
            self.exp = np.empty(n, dtype=np.float32)
        return self.shifted, self.exp


def token_statistics(logits: np.ndarray, token: int, k: int = CONFIDENCE_TOP_K,
                     scratch: StatsScratch | None = None) -> tuple[float, float, float, float]:
    """(log p(token), confidence, entropy, self-certainty) of one untempered logits row: confidence is minus the
    mean log-probability of the k most likely tokens (DeepConf), entropy is in nats, self-certainty is
    KL(uniform || p) = -log V - mean_i log p_i over the whole vocabulary (Kang et al. 2025), in nats."""
    shifted, exp = (scratch or StatsScratch()).buffers(logits.shape[0])
    np.subtract(logits, logits.max(), out=shifted)
    np.exp(shifted, out=exp)
    total = float(exp.sum())
    log_total = math.log(total)
    logprob = float(shifted[token]) - log_total
    entropy = log_total - float(np.dot(exp, shifted)) / total
    k = max(1, min(k, shifted.shape[0]))
    near = shifted[shifted > -TOP_WINDOW_NATS]
    top = np.partition(near if near.shape[0] >= k else shifted, -k)[-k:]
    confidence = log_total - float(top.mean(dtype=np.float64))
    mean_shifted = float(shifted.mean(dtype=np.float64))
    if not math.isfinite(mean_shifted):  # a masked (-inf) logit: KL(U || p) is infinite; measure the rest
        finite = shifted[np.isfinite(shifted)]
        mean_shifted = float(finite.mean(dtype=np.float64)) if finite.shape[0] else 0.0
    certainty = log_total - mean_shifted - math.log(shifted.shape[0])
    return logprob, confidence, max(0.0, entropy), max(0.0, certainty)


def approx_self_certainty(top_logprobs: list[float], vocab_size: int) -> float:
    """KL(uniform || p) of one position from its top-k log-probabilities only (a remote server's top logprobs):
    the mass they leave is spread evenly over the other vocab_size - k tokens. Exact when the rest is uniform;
    otherwise an underestimate of the spread tail's share (log is concave), so compare it only with itself."""
    k = len(top_logprobs)
    if k == 0:
        raise ValueError("no top logprobs")
    if vocab_size <= k:
        raise ValueError(f"vocab_size ({vocab_size}) must exceed the top logprobs given ({k})")
    rest = max(1.0 - sum(math.exp(v) for v in top_logprobs), 1e-12)
    log_rest_each = math.log(rest / (vocab_size - k))
    mean_log_p = (sum(top_logprobs) + (vocab_size - k) * log_rest_each) / vocab_size
    return max(0.0, -math.log(vocab_size) - mean_log_p)


class ConfidenceWindow:
    """The mean confidence of the last `group` tokens; `push` says when a full window falls below `threshold`."""

    def __init__(self, group: int, threshold: float) -> None:
        self.group = max(1, int(group))
        self.threshold = float(threshold)
        self._values: deque[float] = deque()
        self._sum = 0.0

    def push(self, confidence: float) -> bool:
        self._values.append(confidence)
        self._sum += confidence
        if len(self._values) > self.group:
            self._sum -= self._values.popleft()
        return len(self._values) == self.group and self._sum / self.group < self.threshold


def approx_token_stats(logprobs: list[TokenLogprob], vocab_size: int = REMOTE_VOCAB) -> TokenStats | None:
    """Token statistics of a remote completion from each token's top logprobs (marked approximate): confidence
    from the top CONFIDENCE_TOP_K given, entropy and self-certainty with the mass they leave spread evenly over
    the rest of the vocabulary. None when a token came without alternatives (the server gave none)."""
    stats = TokenStats(approximate=True)
    for lp in logprobs:
        top = [v for _, v in lp.top[:CONFIDENCE_TOP_K] if math.isfinite(v)]
        if not top:
            return None
        rest = max(1.0 - sum(math.exp(v) for v in top), 0.0)
        spread = vocab_size - len(top)
        entropy = -sum(math.exp(v) * v for v in top)
        if rest > 0 and spread > 0:
            entropy -= rest * math.log(rest / spread)
        stats.add(lp.logprob, -sum(top) / len(top), max(0.0, entropy), approx_self_certainty(top, vocab_size))
    return stats
