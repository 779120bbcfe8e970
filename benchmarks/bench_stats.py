"""What the evaluation statistics cost next to the evaluation: 500 items × 4 workflows × K = 3 repeats of synthetic
graded results (0/1 grades with per-workflow accuracies, 8 graded samples per run), summarised as `metagen eval`
does at the end (points with clustered intervals, every paired comparison, pass@k, maj@k, disagreements), timed,
and set beside the evaluation's own time: measured from a recorded evaluation (--db, --eval-id: its elapsed time
per run) or, without one, a per-run time you give (--per-run-s). The ratio is what the statistics add.

Usage: python benchmarks/bench_stats.py [--items 500] [--workflows 4] [--repeats 3] [--db T.db --eval-id ID]
       [--per-run-s 0.5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.eval.paired import compare_points
from app.eval.results import summarize

SAMPLES = 8


def synthetic_record(items: int, workflows: int, repeats: int, seed: int = 0) -> dict[str, Any]:
    """An evaluation record as EvalStore.get returns it, with random grades (accuracy 40 % + 5 % per workflow)."""
    rng = random.Random(seed)
    rows = []
    for w in range(workflows):
        accuracy = 0.40 + 0.05 * w
        for r in range(repeats):
            for i in range(items):
                easy = (i * 7919) % 100 / 100  # items differ in difficulty: grades correlate across workflows
                p = min(0.98, max(0.02, accuracy + (easy - 0.5) * 0.6))
                samples = [rng.random() < p for _ in range(SAMPLES)]
                rows.append({
                    "workflow_idx": w, "point_idx": 0, "item_idx": i + r * items, "run_id": f"r{w}-{r}-{i}",
                    "status": "succeeded", "score": 0.0, "correct": rng.random() < p, "output": "42", "detail": "",
                    "samples": samples, "prompt_tokens": 60, "prompt_tokens_evaluated": 60,
                    "prompt_tokens_cached": 0, "completion_tokens": 400, "completion_tokens_reused": 0,
                    "lm_calls": 1, "wall_s": 1.0, "thinking_tokens": 0,
                    "sample_votes": {"answers": [str(int(s)) for s in samples], "scores": None}})
    config = {"workflows": [{"name": f"workflow-{w}", "points": [{}], "sampler": "think", "output": "answer"}
                            for w in range(workflows)],
              "items": list(range(items)), "dataset": {"name": "synthetic", "rows": items}, "metric": "exact",
              "repeats": repeats, "seed": 0, "total_tasks": items * workflows * repeats}
    return {"evaluation": {"id": "bench", "name": "bench", "status": "succeeded", "config": config, "estimate": {},
                           "created_at": 0.0, "ended_at": 1.0}, "items": rows}


def _time(fn: Any, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measured_per_run(db: str, eval_id: str) -> tuple[float, str]:
    from app.eval.store import EvalStore
    from app.traces.store import TraceStore

    traces = TraceStore(db)
    try:
        summary = summarize(EvalStore(traces.engine).get(eval_id))
    finally:
        traces.close()
    done, elapsed = summary["done"], summary.get("elapsed_s")
    if not done or not elapsed:
        raise SystemExit(f"evaluation {eval_id} has no finished runs or no elapsed time to measure")
    return elapsed / done, f"measured: evaluation {eval_id}, {done} runs in {elapsed:.0f} s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=500)
    ap.add_argument("--workflows", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--db", default=None)
    ap.add_argument("--eval-id", default=None)
    ap.add_argument("--per-run-s", type=float, default=0.5,
                    help="seconds per run when no recorded evaluation is given (default 0.5: a greedy run of the "
                         "bundled model, faster than any measured here)")
    args = ap.parse_args()
    record = synthetic_record(args.items, args.workflows, args.repeats)
    runs = args.items * args.workflows * args.repeats
    whole = _time(lambda: summarize(record), args.rounds)
    summary = summarize(record)
    by_label: dict[str, dict[int, list[float]]] = {}
    for item in record["items"]:
        by_label.setdefault(f"w{item['workflow_idx']}", {}).setdefault(item["item_idx"] % args.items, []).append(
            1.0 if item["correct"] else 0.0)
    paired = _time(lambda: compare_points(by_label), args.rounds)
    if args.db and args.eval_id:
        per_run, source = measured_per_run(args.db, args.eval_id)
    else:
        per_run, source = args.per_run_s, f"given: --per-run-s {args.per_run_s}"
    evaluation_s = per_run * runs
    print(f"synthetic evaluation: {args.items} items × {args.workflows} workflows × K = {args.repeats} = {runs} runs, "
          f"{SAMPLES} graded samples each; {len(summary['comparisons'])} paired comparisons "
          f"({summary['comparisons'][0]['method']})")
    print(f"{'':34}{'seconds':>10}{'share of the evaluation':>26}")
    print(f"{'evaluation (' + source.split(':')[0] + ')':34}{evaluation_s:>10.1f}{'':>26}   [{source}; "
          f"{per_run:.3f} s per run]")
    print(f"{'paired comparisons alone':34}{paired:>10.3f}{paired / evaluation_s:>25.4%}")
    print(f"{'whole summary (all statistics)':34}{whole:>10.3f}{whole / evaluation_s:>25.4%}")
    print(f"statistics / evaluation = {whole / evaluation_s:.4%} (goal < 1 %: "
          f"{'met' if whole / evaluation_s < 0.01 else 'NOT met'})")


if __name__ == "__main__":
    main()
