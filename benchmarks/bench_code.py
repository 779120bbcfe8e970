"""Running candidate programs: 64 candidates x 3 tests, confined (bubblewrap + limits) against limits-only
subprocesses, both parallel across the cores; prints the wall time of each, the ratio and the per-run overhead; then
the cost of `partial: observed` (each assert of a failing program run as its own program) against the one run.

Usage: python benchmarks/bench_code.py [--candidates 64] [--workers CORES] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nodes.algorithms.code_exec import isolation
from nodes.algorithms.code_tests import run_many

TESTS = ("assert running_sum([1, 2, 3]) == [1, 3, 6]\nassert running_sum([]) == []\n"
         "assert running_sum([5, -5]) == [5, 0]")
PROGRAMS = [
    "def running_sum(xs):\n    out, t = [], 0\n    for x in xs:\n        t += x\n        out.append(t)\n"
    "    return out\n",
    "import itertools\ndef running_sum(xs):\n    return list(itertools.accumulate(xs))\n",
    "def running_sum(xs):\n    return [sum(xs[:i + 1]) for i in range(len(xs))]\n",
    "def running_sum(xs):\n    return xs\n",  # wrong: fails two tests
]


def timed(texts: list[str], workers: int, isolate: bool) -> float:
    started = time.perf_counter()
    reports = run_many(texts, tests=TESTS, workers=workers, isolate=isolate)
    elapsed = time.perf_counter() - started
    assert all(r.total == 3 for r in reports), [r.reason for r in reports if r.total != 3][:3]
    assert all(r.isolated == isolate for r in reports)
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidates", type=int, default=64)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if isolation() != "bwrap":
        print("bubblewrap does not work here: only the limits-only figure can be measured")
    texts = [PROGRAMS[i % len(PROGRAMS)] for i in range(args.candidates)]
    modes = [False] + ([True] if isolation() == "bwrap" else [])
    best = {m: min(timed(texts, args.workers, m) for _ in range(args.repeats)) for m in modes}
    n = args.candidates
    print(f"{n} candidates x 3 tests, {args.workers} workers, best of {args.repeats}, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"  limits only (subprocess, rlimits, own uid): {best[False]:.2f} s  ({best[False] / n * 1000:.0f} ms/run)")
    if True in best:
        over = (best[True] - best[False]) / n * args.workers * 1000
        print(f"  isolated (bubblewrap namespaces + limits):  {best[True]:.2f} s  ({best[True] / n * 1000:.0f} ms/run)")
        print(f"  ratio isolated / limits only: {best[True] / best[False]:.2f}x; isolation costs ~{over:.0f} ms "
              "per run (per worker)")
    observed_cost(texts, args.workers, args.repeats)


def observed_cost(texts: list[str], workers: int, repeats: int) -> None:
    """`partial: observed` against the plain verdict on the same candidates (a quarter of them fail)."""
    def run(partial: str) -> float:
        started = time.perf_counter()
        run_many(texts, tests=TESTS, workers=workers, partial=partial)
        return time.perf_counter() - started

    plain = min(run("none") for _ in range(repeats))
    observed = min(run("observed") for _ in range(repeats))
    failing = sum(1 for t in texts if t == PROGRAMS[-1])
    print(f"  partial: observed: {observed:.2f} s against {plain:.2f} s ({observed / plain:.2f}x; {failing} failing "
          f"candidates run 3 more programs each)")


if __name__ == "__main__":
    main()
