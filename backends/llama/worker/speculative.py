"""Speculative decoding's drafting side: n-gram prompt lookup over a request's prompt and samples, and the
per-sequence draft length that adapts to how often drafts are accepted (no llama.cpp here)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

ADAPTIVE_MIN_RATE = 0.8
"""Below this running acceptance a sequence stops drafting for a while: on a compute-bound CPU an extra token in a
decode costs most of a decode (0.85 of one for the bundled model on 2 cores: benchmarks/bench_speculative.py), so
drafts accepted less often than that cost more than they save."""
ADAPTIVE_DECAY = 0.7
"""Weight of the past in the running acceptance rate (per verified draft)."""
MAX_PAUSE_STEPS = 32


class NgramPool:
    """Prompt-lookup drafts for the samples of one request: the last `n` tokens of a sample are looked up in
    the sample's own output, then in its siblings' outputs (the samples of one request share the pool), then in
    the prompt; the tokens that followed the latest match are the draft."""

    def __init__(self, prompt: Sequence[int], n: int, n_samples: int) -> None:
        self.n = n
        self.prompt = list(prompt)
        self._prompt_index: dict[tuple[int, ...], int] = {}
        for end in range(n, len(self.prompt)):
            self._prompt_index[tuple(self.prompt[end - n : end])] = end
        self._outputs: list[Sequence[int]] = [() for _ in range(n_samples)]
        self._index: list[dict[tuple[int, ...], int]] = [{} for _ in range(n_samples)]
        self._seen = [0] * n_samples

    def _key_before(self, tokens: Sequence[int], j: int) -> tuple[int, ...] | None:
        """The n tokens before output position j (reaching back into the prompt)."""
        n = self.n
        if j >= n:
            return tuple(tokens[j - n : j])
        need = n - j
        if need > len(self.prompt):
            return None
        return (*self.prompt[len(self.prompt) - need :], *tokens[:j])

    def update(self, index: int, tokens: Sequence[int]) -> None:
        """Index the new tokens of sample `index` (its output so far is `tokens`)."""
        self._outputs[index] = tokens
        own = self._index[index]
        for j in range(self._seen[index], len(tokens)):
            key = self._key_before(tokens, j)
            if key is not None:
                own[key] = j
        self._seen[index] = len(tokens)

    def draft(self, index: int, tokens: Sequence[int], k: int) -> list[int]:
        """Up to `k` tokens predicted to follow `tokens`, the output of sample `index` (empty when no match)."""
        self.update(index, tokens)
        key = self._key_before(tokens, len(tokens))
        if key is None or k <= 0:
            return []
        order = [index] + [i for i in range(len(self._index)) if i != index]
        for i in order:
            at = self._index[i].get(key)
            if at is not None:
                found = list(self._outputs[i][at : at + k])
                if found:
                    return found
        at = self._prompt_index.get(key)
        return list(self.prompt[at : at + k]) if at is not None else []


class DraftLength:
    """How many tokens one sequence drafts next step. Fixed at `k` unless adaptive; adaptive, it starts at one,
    grows by one after a fully accepted draft (up to `k`), falls to one past the accepted part after a failed one,
    and drafting pauses (for 2, 4, 8 ... steps) while the running acceptance rate is below ADAPTIVE_MIN_RATE."""

    def __init__(self, k: int, adaptive: bool) -> None:
        self.k_max = k
        self.k = 1 if adaptive else k
        self.adaptive = adaptive
        self.rate = 1.0
        self._pause = 0
        self._pauses = 0

    def next(self) -> int:
        if not self.adaptive:
            return self.k_max
        if self._pause > 0:
            self._pause -= 1
            return 0
        return self.k

    def update(self, drafted: int, accepted: int) -> None:
        if not self.adaptive or drafted <= 0:
            return
        self.rate = ADAPTIVE_DECAY * self.rate + (1 - ADAPTIVE_DECAY) * accepted / drafted
        self.k = min(self.k_max, self.k + 1) if accepted == drafted else max(1, accepted + 1)
        if self.rate < ADAPTIVE_MIN_RATE:
            self._pauses += 1
            self._pause = min(MAX_PAUSE_STEPS, 2 ** self._pauses)
            self.rate = ADAPTIVE_MIN_RATE  # the probe after the pause decides afresh
        elif accepted:
            self._pauses = 0


def speculation_fields(drafted: int, accepted: list[bool] | None) -> dict[str, Any]:
    """What an LM-call event records of one sample decoded speculatively (nothing for any other sample):
    draft tokens proposed, accepted, the acceptance rate, and per output token whether it was an accepted draft."""
    if accepted is None:
        return {}
    n_accepted = sum(accepted)
    return {"draft_tokens": drafted, "draft_accepted": n_accepted,
            "acceptance_rate": round(n_accepted / drafted, 4) if drafted else None, "accepted_draft": accepted}


def speculation_summary(backend: Any) -> str:
    """A loaded model's speculative option and its running acceptance ('' when it does not speculate), for the
    Models tab: e.g. `ngram k=4 ngram=3 adaptive · 412 of 630 draft tokens accepted (65%)`."""
    spec = getattr(getattr(backend, "spec", None), "speculative", None)
    if spec is None:
        return ""
    option = f"{spec.method} k={spec.k} ngram={spec.ngram}" if spec.method == "ngram" else \
        f"{spec.method} {spec.draft_alias} k={spec.k}"
    option += " adaptive" if spec.adaptive else ""
    engine_stats = getattr(backend, "engine_stats", None)
    stats = engine_stats() if callable(engine_stats) else getattr(getattr(backend, "engine", None), "stats", None) or {}
    drafted, accepted = int(stats.get("draft_tokens", 0)), int(stats.get("draft_accepted", 0))
    if not drafted:
        return f"{option} · nothing drafted yet"
    return f"{option} · {accepted} of {drafted} draft tokens accepted ({accepted / drafted:.0%})"
