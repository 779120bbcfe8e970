"""Per-token confidence statistics read from a logits row the sampler already has (log-probability of the chosen
token, DeepConf token confidence, entropy), and the sliding group window of DeepConf's online early stop."""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from backends.base import CONFIDENCE_TOP_K

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
                     scratch: StatsScratch | None = None) -> tuple[float, float, float]:
    """(log p(token), confidence, entropy) of one untempered logits row: confidence is minus the mean
    log-probability of the k most likely tokens (DeepConf), entropy is in nats."""
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
    return logprob, confidence, max(0.0, entropy)


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
