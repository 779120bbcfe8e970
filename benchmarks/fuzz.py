"""The long fuzz run: each target of tests/fuzz with the `long` hypothesis profile (10,000 examples by default).

Prints per target the examples run, the outcomes by kind (issues, refusals by code, run statuses...), the
failures (must be 0; the first few are shown with their example) and the wall time. Unlike the tests, a
failure does not stop the run: it is counted and the run goes on, so one bug does not hide the next.
Run: nice .venv/bin/python benchmarks/fuzz.py [--examples N] [--target NAME ...] [--seed S]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("METAGEN_HOME", tempfile.mkdtemp(prefix="metagen-fuzz-home-"))  # never the real data folder

from hypothesis import HealthCheck, given, seed, settings

from tests.fuzz.targets import TARGETS, FuzzTarget

SHOWN_FAILURES = 5
SLOW_EXAMPLE_S = 5.0


def fuzz(target: FuzzTarget, examples: int, run_seed: int | None) -> dict[str, Any]:
    """Run one target for `examples` examples; the outcome counts, failures and timings."""
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    slowest = 0.0
    slow = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"metagen-fuzz-{target.name}-") as tmp, target.open(Path(tmp)) as check:

        @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                  suppress_health_check=list(HealthCheck))
        @given(target.strategy())
        def prop(example: Any) -> None:
            nonlocal slowest, slow
            t0 = time.perf_counter()
            try:
                outcomes[check(example)] += 1
            except Exception as exc:  # counted, shown, and the run goes on
                outcomes["FAILURE"] += 1
                if len(failures) < SHOWN_FAILURES:
                    failures.append(f"{type(exc).__name__}: {str(exc)[:300]}\n      example: {example!r:.600}\n"
                                    + "".join(traceback.format_exception(exc)[-5:]))
            spent = time.perf_counter() - t0
            slowest = max(slowest, spent)
            slow += spent > SLOW_EXAMPLE_S

        if run_seed is not None:
            prop = seed(run_seed)(prop)
        prop()
    return {"outcomes": outcomes, "failures": failures, "wall_s": time.perf_counter() - started,
            "slowest_s": slowest, "slow": slow}


def report(target: FuzzTarget, result: dict[str, Any]) -> None:
    outcomes: Counter[str] = result["outcomes"]
    total = sum(outcomes.values())
    print(f"\n== {target.name}: {target.description}")
    print(f"   examples run: {total:,}   failures: {outcomes.get('FAILURE', 0)}   wall time: {result['wall_s']:.1f} s "
          f"({total / max(result['wall_s'], 1e-9):.0f}/s; slowest example {result['slowest_s']:.2f} s, "
          f"{result['slow']} over {SLOW_EXAMPLE_S:g} s)")
    for label, count in sorted(outcomes.items(), key=lambda kv: (-kv[1], kv[0])):
        if label != "FAILURE":
            print(f"     {label:<48} {count:>7,}")
    for failure in result["failures"]:
        print(f"   FAILURE {failure}")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000, help="examples per target (default 10,000)")
    parser.add_argument("--target", action="append", choices=sorted(TARGETS),
                        help="run only this target (repeatable; default: all)")
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: random)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)  # nodes that fail on purpose would log every example
    failed = 0
    for name in args.target or list(TARGETS):
        target = TARGETS[name]
        result = fuzz(target, args.examples, args.seed)
        report(target, result)
        failed += result["outcomes"].get("FAILURE", 0)
    print(f"\ntotal failures: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
