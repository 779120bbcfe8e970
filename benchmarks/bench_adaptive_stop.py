"""Adaptive stopping for self-consistency: samples drawn vs a fixed N, and whether the answer changes.

Simulates answer streams (no model): each sample is the right answer with probability p, else one of
`k` wrong answers, or no answer. Prints, per p, the mean fraction of samples drawn by adaptive
stopping relative to always drawing N, and how often its answer differs from the full-N majority
(it must be 0: the rule only stops once the leader cannot be caught).

    .venv/bin/python benchmarks/bench_adaptive_stop.py [N] [trials]
"""

from __future__ import annotations

import random
import sys

from nodes.algorithms.adaptive import batch_plan, stop_decision
from nodes.algorithms.voting import majority_vote


def simulate(p: float, n: int, batch: int, min_samples: int, rng: random.Random, k: int = 3,
             no_answer: float = 0.05) -> tuple[int, bool]:
    def draw() -> str | None:
        r = rng.random()
        if r < no_answer:
            return None
        return "right" if r < no_answer + p * (1 - no_answer) else f"wrong{rng.randrange(k)}"

    stream = [draw() for _ in range(n)]
    drawn = n
    seen = 0
    for size in batch_plan(n, batch, min_samples):
        seen += size
        if stop_decision(stream[:seen], n, min_samples).stop:
            drawn = seen
            break
    same = majority_vote(stream[:drawn]).answer == majority_vote(stream).answer
    return drawn, same


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    trials = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    rng = random.Random(0)
    print(f"N = {n}, {trials} trials per row; batch = 4, min_samples = 4")
    print(f"{'p(right)':>9} {'drawn/N':>8} {'saved':>6} {'answer changed':>15}")
    for p in (0.3, 0.5, 0.7, 0.9, 1.0):
        drawn_total, changed = 0, 0
        for _ in range(trials):
            drawn, same = simulate(p, n, 4, 4, rng)
            drawn_total += drawn
            changed += not same
        ratio = drawn_total / (trials * n)
        print(f"{p:>9.1f} {ratio:>8.2f} {1 - ratio:>6.0%} {changed / trials:>15.2%}")


if __name__ == "__main__":
    main()
