"""`metagen tune`'s race against the exhaustive grid over the same candidates (issue 41's speed target: the race
reaches the same recommendation at <= 40 % of the grid's tokens), on the bundled code set (public tests select)
and the arithmetic set. Figures are printed; nothing is asserted.

    flock /tmp/metagen-heavy.lock nice .venv/bin/python benchmarks/bench_tune.py [--limit N] [--only code,arithmetic]
        [--model FILE.gguf] [--dry-run]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.eval.tune.api import TuneOptions  # noqa: E402
from app.service.studio import StudioService  # noqa: E402

SETS: dict[str, dict[str, Any]] = {
    "code": {"data": "datasets/code.jsonl", "metric": "tests", "budget": 2000,
             "candidates": ["chain_of_thought", "code_best_of_n", "alphacode", "plan_to_code"]},
    "arithmetic": {"data": "datasets/arithmetic.jsonl", "metric": "number", "budget": 1500,
                   "candidates": ["chain_of_thought", "self_consistency", "best_of_n", "weighted_vote"]},
}


def _tune(folder: Path, spec: dict[str, Any], args: argparse.Namespace, exhaustive: bool) -> tuple[Any, float]:
    """One tune on a studio of its own (a fresh sample cache: neither run reuses the other's draws)."""
    kind = "grid" if exhaustive else "race"
    service = StudioService(trace_db=folder / f"{kind}.db", workflows_dir=folder / "wf", dry_run=args.dry_run)
    out = folder / f"{kind}.yaml"
    options = TuneOptions(data=str(ROOT / spec["data"]), metric=spec["metric"], model=args.model,
                          budget_tokens=spec["budget"], candidates=spec["candidates"], limit=args.limit,
                          seed=args.seed, out=str(out), exhaustive=exhaustive)
    start = time.perf_counter()
    try:
        result = service.tune(options)
    finally:
        service.close()
    return result, time.perf_counter() - start


def _line(name: str, result: Any, seconds: float) -> str:
    rec = result.recommended
    test = rec["test"]
    acc = "–" if test["accuracy"] is None else f"{test['accuracy']:.0%}"
    return (f"  {name:<5} tokens {result.tune_tokens:>8}  {seconds:6.0f} s  recommends {rec['label']:<36} "
            f"test {acc} [{test['ci'][0]:.0%}, {test['ci'][1]:.0%}] n={test['n']}")


def _paired_on_test(folder: Path, grid: Any, a: str, b: str) -> str:
    """The paired comparison of two recommendations on test, from the grid's runs (it ran every candidate there)."""
    from app.eval.paired import compare

    service = StudioService(trace_db=folder / "grid.db", workflows_dir=folder / "wf", dry_run=True)
    try:
        record = service.evaluations.store.get(grid.tune_id)
    finally:
        service.close()
    names = [w["name"] for w in record["evaluation"]["config"]["workflows"]]
    test = set(grid.split["test"])
    runs: dict[str, dict[int, list[float]]] = {a: {}, b: {}}
    for row in record["items"]:
        label = names[row["workflow_idx"]]
        if label in runs and row["item_idx"] in test and row["score"] is not None:
            runs[label][int(row["item_idx"])] = [float(row["score"])]
    return compare(a, b, runs[a], runs[b]).sentence()


def run_set(name: str, args: argparse.Namespace) -> None:
    spec = SETS[name]
    with tempfile.TemporaryDirectory(prefix="bench-tune-") as tmp:
        race, race_s = _tune(Path(tmp), spec, args, False)
        grid, grid_s = _tune(Path(tmp), spec, args, True)
        differ = race.recommended["label"] != grid.recommended["label"]
        paired = _paired_on_test(Path(tmp), grid, race.recommended["label"], grid.recommended["label"]) \
            if differ else ""
    print(f"{name}: {spec['data']} --metric {spec['metric']} --budget-tokens {spec['budget']} "
          f"(limit {args.limit}, {len(race.split['dev'])} dev / {len(race.split['test'])} test)")
    print(_line("race", race, race_s))
    print(_line("grid", grid, grid_s))
    share = race.tune_tokens / grid.tune_tokens if grid.tune_tokens else float("nan")
    same = race.recommended["label"] == grid.recommended["label"]
    print(f"  race/grid tokens {share:.0%} (target <= 40%); same recommendation: {'yes' if same else 'no'}")
    if paired:
        print(f"  the two recommendations on test (paired, the grid's runs): {paired}")
    for entry in race.race:
        dropped = "; ".join(f"{d['label']}: {d['reason']}" for d in entry["dropped"])
        print(f"    round {entry['round']} ({entry['items']} dev items): {len(entry['alive'])} left"
              + (f"; dropped {dropped}" if dropped else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=None, help="items per set (default all)")
    parser.add_argument("--only", default="code,arithmetic", help="sets to run, comma-separated")
    parser.add_argument("--model", default=None, help="a GGUF file (or Hub reference) instead of the bundled model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dry-run", action="store_true", help="the fake backend (checks the script, not figures)")
    args = parser.parse_args()
    for name in [s.strip() for s in args.only.split(",") if s.strip()]:
        run_set(name, args)


if __name__ == "__main__":
    main()
