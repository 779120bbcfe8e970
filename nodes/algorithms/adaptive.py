"""Adaptive stopping for majority voting: stop sampling once the leading answer cannot be overtaken.

After each batch the sampler counts answers; with `remaining` samples still allowed, the vote is
decided when leader_count - runner_up_count > remaining (even if every remaining sample went to the
runner-up, it could at best come within one vote). The strict inequality also rules out a tie,
so the outcome equals what sampling all N would have given under majority voting.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StopDecision:
    stop: bool
    leader: str | None
    leader_count: int
    runner_up_count: int
    remaining: int

    @property
    def margin(self) -> int:
        return self.leader_count - self.runner_up_count


def stop_decision(answers: Sequence[str | None], total: int, min_samples: int = 1) -> StopDecision:
    """Whether sampling can stop, given the answers so far and the planned total number of samples.
    No-answer samples (None) count towards the samples drawn but for no answer."""
    drawn = len(answers)
    remaining = max(0, total - drawn)
    counts = Counter(a for a in answers if a is not None)
    ranked = counts.most_common()
    leader, leader_count = ranked[0] if ranked else (None, 0)
    if ranked and len(ranked) > 1:
        # most_common keeps first-seen order among equals: report the first-seen leader
        leader = next(a for a in answers if a is not None and counts[a] == leader_count)
    runner_up = ranked[1][1] if len(ranked) > 1 else 0
    decided = remaining == 0 or (
        drawn >= min_samples and leader is not None and leader_count - runner_up > remaining)
    return StopDecision(decided, leader, leader_count, runner_up, remaining)


def batch_plan(total: int, batch_size: int, min_samples: int) -> list[int]:
    """Sizes of the successive sampling batches: the first reaches min_samples, then batch_size each."""
    if total <= 0:
        return []
    batch_size = max(1, batch_size)
    first = min(total, max(min_samples, batch_size))
    sizes = [first]
    left = total - first
    while left > 0:
        sizes.append(min(batch_size, left))
        left -= sizes[-1]
    return sizes
