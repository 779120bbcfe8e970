"""`metagen tune`: race the strategies on a dev split of the data within a budget per item, report the finalists on
the held-out test split, and write the recommended workflow."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from app.cli.exit_codes import EXIT_FAILED, EXIT_INVALID, EXIT_OK
from app.viz.common import REUSED_FOOTNOTE


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "tune", help="which strategy, with which compute, for this data, model and budget (raced, held out)",
        description="Race every fitting example workflow (or --candidates) on a dev split with successive halving "
                    "and paired tests, report the finalists on the held-out test split, write the recommended one.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  metagen tune --data datasets/code.jsonl --metric tests --budget-tokens 2000\n"
               "  metagen tune --data datasets/arithmetic.jsonl --budget-tokens 1500 --candidates chain_of_thought "
               "self_consistency --axes think.n=2,4,8,16\n  metagen tune --resume TUNE_ID")
    p.add_argument("--data", "-d", default=None, metavar="FILE|hf:...|task:NAME", help="the dataset")
    p.add_argument("--task", default=None, metavar="NAME",
                   help="a task preset (as `metagen eval --task`) whose prompt, reference and metric make the items "
                        "from --data FILE's rows instead of its own Hub dataset")
    p.add_argument("--metric", default=None, help="as `metagen eval --metric` (default: the dataset's own)")
    p.add_argument("--model", default=None, metavar="M",
                   help="replace every candidate's generating model: a .gguf file, OWNER/REPO[:QUANT] (Hub), or "
                        "http(s)://HOST/v1[,URL...][#MODEL] (a remote server or replicas)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--budget-tokens", type=int, default=None, metavar="N",
                        help="the allowed mean tokens per item of the chosen strategy")
    budget.add_argument("--budget-seconds", type=float, default=None, metavar="S",
                        help="the allowed mean seconds per item of the chosen strategy")
    p.add_argument("--candidates", nargs="+", default=[], metavar="FILE",
                   help="workflow files or example names to race (default: every example that fits)")
    p.add_argument("--axes", action="append", default=[], metavar="NODE.PARAM=V1,V2",
                   help="a candidate's compute axis (repeatable; replaces its natural doubling grid)")
    p.add_argument("--dev-fraction", type=float, default=0.5, metavar="F", help="share of items raced on (0.5)")
    p.add_argument("--tune-budget-tokens", type=int, default=None, metavar="T", help="cap the tuning's own tokens")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="at most N items (a seeded shuffle)")
    p.add_argument("--seed", type=int, default=0, help="the split's and runs' seed (default 0)")
    p.add_argument("--out", default=None, metavar="PATH.yaml",
                   help="where the recommended workflow goes (default tuned/<dataset>-<model>.yaml in the "
                        "workflows folder)")
    p.add_argument("--adaptive", action="store_true",
                   help="also a difficulty-adaptive policy: a probe's bins and a strategy per bin, fixed on dev, "
                        "written as a workflow with a route node (<out>-adaptive.yaml) and reported on test")
    p.add_argument("--exhaustive", action="store_true", help="no racing: every candidate on all of dev (the grid)")
    p.add_argument("--resume", default=None, metavar="TUNE_ID", help="finish an interrupted tune")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--html", default=None, metavar="OUT.html", help="also write the offline report")
    p.add_argument("--dry-run", action="store_true", help="the scripted fake backend instead of llama.cpp")
    p.add_argument("--db", default=None, metavar="PATH", help="trace database (default: the user data folder)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=cmd_tune)


def _options(args: argparse.Namespace) -> Any:
    from app.service.tunes import TuneOptions

    return TuneOptions(data=args.data or "", task=args.task, metric=args.metric, model=args.model,
                       budget_tokens=args.budget_tokens,
                       budget_seconds=args.budget_seconds, candidates=list(args.candidates), axes=list(args.axes),
                       dev_fraction=args.dev_fraction, tune_budget_tokens=args.tune_budget_tokens, limit=args.limit,
                       seed=args.seed, out=args.out, adaptive=args.adaptive, resume=args.resume,
                       exhaustive=args.exhaustive)


def cmd_tune(args: argparse.Namespace) -> int:
    from app.service.errors import UserError
    from app.service.studio import StudioService
    from backends.base import CancelToken

    if not args.data and not args.resume:
        print("error: give --data FILE (or --resume TUNE_ID)", file=sys.stderr)
        return EXIT_INVALID
    service = StudioService(trace_db=Path(args.db) if args.db else None, dry_run=args.dry_run)
    cancel = CancelToken()
    printer = _RaceLog(quiet=args.quiet or args.json)
    previous = _cancel_on_sigint(cancel)
    try:
        result = service.tune(_options(args), on_progress=printer, cancel=cancel)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID if not cancel.cancelled else EXIT_FAILED
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        service.close()
    data = result.to_json()
    if args.json:
        print(json.dumps(data, indent=1))
    else:
        print(format_result(data, shown=printer.warned))
    if args.html:
        from app.platform.fileio import atomic_write_text

        atomic_write_text(Path(args.html), result.html())
    return EXIT_OK


def _cancel_on_sigint(cancel: Any) -> Any:
    def handler(_sig: int, _frame: Any) -> None:
        print("\ncancelling: finished runs are kept; `metagen tune --resume ID` goes on", file=sys.stderr)
        cancel.cancel("cancelled (Ctrl+C)")

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, handler)


class _RaceLog:
    """The race on stderr: a line per round's end (who is left, who was dropped and why), progress with an ETA."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self._seen: set[str] = set()
        self._last = 0.0
        self.warned: list[str] = []

    def __call__(self, progress: Any) -> None:
        if self.quiet:
            return
        for warning in progress.warnings:  # known before the race: shown with the skipped list, before it runs
            if warning not in self.warned:
                self.warned.append(warning)
                print(f"warning: {warning}", file=sys.stderr)
        for row in progress.rows:
            key = f"{row['label']}:{row['status']}"
            if row["status"] in ("dropped", "skipped") and key not in self._seen:
                self._seen.add(key)
                print(f"  {row['status']:<8} {row['label']}: {row['reason']}", file=sys.stderr)
        now = time.monotonic()
        if progress.done < progress.total and now - self._last < 10.0:
            return
        self._last = now
        alive = [r for r in progress.rows if r["status"] == "running"]
        eta = f" · ETA {progress.eta_s:.0f}s" if progress.eta_s else ""
        print(f"[{progress.phase} round {progress.round}] {progress.done}/{progress.total} runs · {len(alive)} racing"
              f" · {progress.tokens_used} tokens{eta}", file=sys.stderr)


def _pct(x: Any) -> str:
    return "  –" if x is None else f"{100 * x:3.0f}%"


def format_result(data: dict[str, Any], shown: list[str] | None = None) -> str:
    """The race log, the held-out table, the comparisons and the verdict (and the warnings not `shown` before the
    race)."""
    lines = ["race (dev):"]
    for entry in data["race"]:
        lines.append(f"  round {entry['round']}: {entry['items']} dev items, {len(entry['alive'])} left"
                     + "".join(f"\n    dropped {d['label']}: {d['reason']}" for d in entry["dropped"]))
    lines.append(f"held-out test ({len(data['split']['test'])} items):")
    lines.append(f"  {'finalist':<44} {'acc':>5} {'95% CI':>12} {'tok/item':>9} {'s/item':>7}")
    for r in data["held_out"]:
        ci = f"[{_pct(r['ci'][0]).strip()},{_pct(r['ci'][1]).strip()}]"
        lines.append(f"  {r['label'][:44]:<44} {_pct(r['accuracy']):>5} {ci:>12} {r['tokens_per_item'] or 0:9.0f} "
                     f"{r['seconds_per_item'] or 0:7.2f}" + (f"  * {r['note']}" if r.get("note") else ""))
    if any(r.get("note") for r in data["held_out"]):
        lines.append(f"  * {REUSED_FOOTNOTE}")
    for c in data["comparisons"]:
        lines.append(f"against {c['against']}: {c['sentence']}")
    lines.extend(f"warning: {w}" for w in data.get("warnings", []) if w not in (shown or []))
    lines.append(data["verdict"])
    lines.extend(_adaptive_lines(data.get("adaptive")))
    lines.append(f"wrote {data['recommended']['path']} · tuning used {data['tune_tokens']} tokens · tune "
                 f"{data['tune_id']}")
    return "\n".join(lines)


def _adaptive_lines(adaptive: dict[str, Any] | None) -> list[str]:
    """--adaptive: the bins and their strategies (dev), the policy on test and its paired comparison."""
    if adaptive is None:
        return []
    if adaptive.get("status") != "built":
        return [f"adaptive policy: none ({adaptive.get('reason', '')})"]
    lines = [f"adaptive policy (bins of the probe's agreement, fixed on dev): {adaptive['path']}"]
    for b in adaptive["branches"]:
        low, high = b["range"]
        span = ("any score" if low is None and high is None else
                f"{'' if low is None else f'{low:g} <= '}score{'' if high is None else f' < {high:g}'}")
        lines.append(f"  bin {b['bin']} ({span}, {b['n']} dev items): {b['label']} "
                     f"(dev {_pct(b['accuracy']).strip()}, {b['tokens_per_item'] or 0:.0f} tok/item)")
    test = adaptive["test"]
    lines.append(f"  on test: {_pct(test['accuracy']).strip()} at {test['tokens_per_item'] or 0:.0f} tok/item "
                 f"(n = {test['n']})")
    lines.extend(f"  against {c['against']} ({c['b']}): {c['sentence']}" for c in adaptive["comparisons"])
    return lines
