"""`metagen eval`: run workflows over a dataset with sweeps, print accuracy against cost; list, show, export."""

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
from app.platform.fileio import atomic_write_text
from app.run.status import SUCCEEDED

ACTIONS = ("list", "show", "export", "delete", "tasks", "check")
"""Words that, as the first target, are an action, unless a file of that name exists (then it is a workflow)."""
GOLD_FAILURES_SHOWN = 20


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "eval", help="evaluate workflows on a dataset (accuracy against N and tokens); list/show/export",
        description="metagen eval A.yaml [B.yaml ...] --data DATASET | --task NAME [options] | eval --resume ID | "
                    "eval list | eval show ID [--json] | eval export ID --html OUT.html | eval delete ID | "
                    "eval tasks | eval check --task NAME [--data FILE] [--limit N] [--json] (grade the dataset's own "
                    "gold answers; a workflow file named check runs as ./check)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  metagen eval workflows/chain_of_thought.yaml workflows/self_consistency.yaml \\\n"
               "      --data datasets/arithmetic.jsonl --metric number --sweep think.n=1,2,4,8 --limit 20\n"
               "  metagen eval workflows/best_of_n.yaml --data datasets/instructions.csv --map question=prompt \\\n"
               "      --metric python:datasets/instructions_metric.py\n"
               "  metagen eval workflows/chain_of_thought.yaml --task gsm8k --limit 50\n"
               "  metagen eval check --task humaneval --data HumanEval.jsonl   # are the gold answers graded right?\n"
               "  metagen eval workflows/self_consistency.yaml --data hf:HuggingFaceH4/MATH-500@test --map "
               "question=problem --metric math")
    p.add_argument("targets", nargs="*", metavar="WORKFLOW | list | show ID | export ID | delete ID")
    _add_dataset_options(p)
    _add_sweep_options(p)
    _add_budget_options(p)
    _add_run_options(p)
    _add_report_options(p)
    p.set_defaults(func=cmd_eval)


def _add_dataset_options(p: argparse.ArgumentParser) -> None:
    """The items: where they come from, how inputs and references map, how answers are graded."""
    p.add_argument("--data", "-d", default=None, metavar="DATASET",
                   help="a .jsonl, .csv, .json (array) or .parquet file (or the name of one in the datasets folders), "
                        "or a Hub dataset hf:OWNER/NAME[:CONFIG][@SPLIT]")
    p.add_argument("--task", default=None, metavar="NAME",
                   help="a task preset (gsm8k, math500, aime, gpqa_diamond, humaneval, ...: `metagen eval tasks` "
                        "lists them): its dataset, prompt, reference and metric")
    p.add_argument("--map", action="append", default=[], metavar="INPUT=COLUMN",
                   help="fill a workflow input from this column (default: the column of the same name)")
    p.add_argument("--reference", default=None, metavar="COLUMN", help="reference answers (default: 'answer')")
    p.add_argument("--metric", default=None,
                   help="exact | number | contains | math | choice | regex[:PATTERN] | python:FILE | output:NAME | "
                        "tests (default: the task's, else the dataset's NAME.meta.yaml, else exact)")
    p.add_argument("--output", default=None, metavar="NAME", help="the workflow output graded (default answer)")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="at most N items")
    p.add_argument("--shuffle", action="store_true", help="shuffle the items (with --seed) before --limit")


def _add_sweep_options(p: argparse.ArgumentParser) -> None:
    """What is compared: the swept params, seeds, shared samples, bootstrap, repeats, baseline."""
    p.add_argument("--sweep", action="append", default=[], metavar="NODE.PARAM=V1,V2,...",
                   help="sweep a node param (repeatable: the grid is their product)")
    p.add_argument("--seed", type=int, default=0, help="run seed and shuffle seed (default 0)")
    p.add_argument("--share-samples", action="store_true",
                   help="samplers drawing the same (model, prompt, decoding params) in different workflows share "
                        "one draw: seeds come from the item's prompt, not the node id, so strategies are compared on "
                        "identical samples and each extra one costs only its scoring")
    p.add_argument("--bootstrap", type=int, default=0, metavar="B",
                   help="maj@k and best-of-k curves: mean over B random k-subsets of the N samples "
                        "(default 0: the first k)")
    p.add_argument("--repeats", type=int, default=1, metavar="K",
                   help="run every item K times with derived seeds; an item's score is the mean of its K and the "
                        "standard errors are clustered by item (default 1)")
    p.add_argument("--baseline", default=None, metavar="LABEL",
                   help="compare each point with this one (a point's label, or its workflow's name or file name, "
                        "e.g. chain-of-thought or chain_of_thought) instead of every pair")


def _add_budget_options(p: argparse.ArgumentParser) -> None:
    """Limits that stop the evaluation."""
    p.add_argument("--max-lm-calls", type=int, default=None, metavar="N", help="stop the evaluation after N calls")
    p.add_argument("--max-tokens", type=int, default=None, metavar="N", help="stop after N tokens in all")
    p.add_argument("--max-seconds", type=float, default=None, metavar="S", help="stop after S seconds")


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """How it runs: concurrency, resuming, the backend, python, calibration, the trace db, quiet."""
    p.add_argument("--concurrency", type=int, default=None, metavar="K",
                   help="items in flight at once (default 8: keeps the engine's batch full)")
    p.add_argument("--resume", default=None, metavar="EVAL_ID", help="finish an interrupted evaluation")
    p.add_argument("--dry-run", action="store_true", help="use the scripted fake backend instead of llama.cpp")
    p.add_argument("--no-python", action="store_true", help="refuse python: metrics and python verifiers")
    p.add_argument("--calibrate", action="store_true", help="measure this machine's throughput again first")
    p.add_argument("--db", default=None, metavar="PATH",
                   help="trace database (default: $METAGEN_TRACE_DB or the user data folder)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def _add_report_options(p: argparse.ArgumentParser) -> None:
    """How results are shown: JSON, the offline HTML report."""
    p.add_argument("--json", action="store_true", help="print the results as one JSON object")
    p.add_argument("--html", default=None, metavar="OUT.html", help="write the offline report (show/export)")


def _err(text: str) -> None:
    print(f"error: {text}", file=sys.stderr)


def _open_stores(args: argparse.Namespace) -> tuple[Any, Any]:
    from app.eval.store import EvalStore
    from app.traces.store import TraceStore

    traces = TraceStore(args.db) if args.db else TraceStore()
    evals = EvalStore(traces.engine)
    evals.mark_interrupted()
    return traces, evals


def _list_tasks(as_json: bool) -> int:
    from app.eval.tasks import TaskError, available_tasks

    try:
        tasks = available_tasks()
    except (TaskError, FileNotFoundError) as exc:
        _err(str(exc))
        return EXIT_INVALID
    if as_json:
        print(json.dumps([t.to_json() for t in tasks], indent=1))
        return EXIT_OK
    for t in tasks:
        print(f"{t.name:<14} {t.metric:<7} {' + '.join(t.dataset)}")
        if t.notes:
            print(f"{'':<14} note: {t.notes}")
    return EXIT_OK


def cmd_eval(args: argparse.Namespace) -> int:
    targets = list(args.targets)
    if targets and targets[0] == "tasks" and not Path("tasks").is_file():
        return _list_tasks(args.json)
    if targets and targets[0] == "check" and not Path("check").is_file():
        return _gold_check(args, targets[1:])
    if targets and targets[0] in ACTIONS and not Path(targets[0]).is_file():
        return _action(targets[0], targets[1:], args)
    if args.resume:
        return _run(args, resume=args.resume)
    if not targets:
        _err("name one or more workflow files (and --data DATASET), or --resume ID, or list/show/export")
        return EXIT_INVALID
    return _run(args)


def _gold_check(args: argparse.Namespace, rest: list[str]) -> int:
    """`metagen eval check --task NAME`: the preset's metric on its dataset's own gold answers."""
    from app.eval.datasets import DatasetError, resolve_dataset
    from app.eval.gold import check_gold
    from app.eval.metrics import MetricError
    from app.eval.tasks import TaskError, load_task

    if rest:
        _err(f"`metagen eval check` takes no workflows (got {' '.join(rest)}); to run a workflow file named check, "
             "write ./check")
        return EXIT_INVALID
    if not args.task:
        _err("`metagen eval check` needs --task NAME (`metagen eval tasks` lists them)")
        return EXIT_INVALID
    if args.limit is not None and args.limit <= 0:
        _err(f"--limit must be a positive number, got {args.limit}")
        return EXIT_INVALID
    try:
        task = load_task(args.task)
        result = check_gold(task, resolve_dataset(args.data) if args.data else None, limit=args.limit)
    except (TaskError, MetricError, DatasetError) as exc:
        _err(str(exc))
        return EXIT_INVALID
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
    else:
        print(result.summary())
        for failure in result.failures[:GOLD_FAILURES_SHOWN]:
            print(f"  item {failure['item']}: {failure['reason']}")
        if len(result.failures) > GOLD_FAILURES_SHOWN:
            print(f"  (and {len(result.failures) - GOLD_FAILURES_SHOWN} more; --json lists them all)")
    return EXIT_OK if result.total and result.correct == result.total else EXIT_FAILED


# ---------------------------------------------------------------------- running


def _parse_map(pairs: list[str]) -> dict[str, str] | None:
    mapping = {}
    for pair in pairs:
        name, sep, column = pair.partition("=")
        if not sep or not name.strip() or not column.strip():
            _err(f"--map {pair!r}: write INPUT=COLUMN, e.g. --map question=prompt")
            return None
        mapping[name.strip()] = column.strip()
    return mapping


def _check_numbers(args: argparse.Namespace) -> bool:
    from app.eval.options import MAX_BOOTSTRAP, MAX_REPEATS

    for name in ("max_lm_calls", "max_tokens", "max_seconds", "concurrency", "limit"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            _err(f"--{name.replace('_', '-')} must be a positive number, got {value}")
            return False
    if not 0 <= args.bootstrap <= MAX_BOOTSTRAP:
        _err(f"--bootstrap must be from 0 (the first k samples) to {MAX_BOOTSTRAP} resamples, got {args.bootstrap}")
        return False
    if not 1 <= args.repeats <= MAX_REPEATS:
        _err(f"--repeats must be from 1 to {MAX_REPEATS} runs per item, got {args.repeats}")
        return False
    return True


def _make_plan(args: argparse.Namespace, evals: Any, registry: Any, resume: str | None) -> tuple[Any, str | None]:
    """(plan, eval id to resume or None); raises the setup errors, or returns (None, None) after printing one."""
    from app.eval.datasets import resolve_dataset
    from app.eval.plan import WorkflowSource, make_plan, plan_from_config
    from app.eval.store import EvalNotFoundError

    if resume:
        try:
            eval_id = evals.resolve_id(resume)
            record = evals.get(eval_id)
        except EvalNotFoundError as exc:
            _err(str(exc))
            return None, None
        if record["evaluation"]["status"] == SUCCEEDED:
            _err(f"evaluation {eval_id} already finished; `metagen eval show {eval_id}` shows it")
            return None, None
        return plan_from_config(record["evaluation"]["config"], registry), eval_id
    mapping = _parse_map(args.map)
    if mapping is None:
        return None, None
    if not args.data and not args.task:
        _err("give the dataset with --data FILE (JSONL, CSV, JSON, Parquet or hf:OWNER/NAME; see datasets/) "
             "or a preset with --task NAME (`metagen eval tasks` lists them)")
        return None, None
    data_path = resolve_dataset(args.data) if args.data else None
    plan = make_plan([WorkflowSource(path=Path(t)) for t in args.targets], data_path,
                     registry=registry, metric=args.metric, output=args.output, sweeps=args.sweep, mapping=mapping,
                     reference=args.reference, limit=args.limit, shuffle=args.shuffle, seed=args.seed,
                     task=args.task)
    plan.share_samples, plan.bootstrap, plan.repeats = args.share_samples, args.bootstrap, args.repeats
    plan.baseline = args.baseline
    return plan, None


def _record_versions(db: Path, targets: list[str]) -> None:
    """Each workflow file evaluated becomes a recorded version (its rows name its hash: `metagen history`)."""
    from app.service.versions import record_loaded_file

    for target in targets:
        record_loaded_file(db, Path(target))


def _check_baseline(args: argparse.Namespace, plan: Any) -> bool:
    """--baseline names a point of the plan (checked before anything runs)."""
    from app.eval.baseline import plan_points, resolve_baseline

    if not args.baseline:
        return True
    try:
        resolve_baseline(args.baseline, plan_points(plan.workflows))
    except ValueError as exc:
        _err(f"--baseline: {exc}")
        return False
    return True


def _run(args: argparse.Namespace, resume: str | None = None) -> int:
    from app.eval.datasets import DatasetError
    from app.eval.plan import EvalSetupError
    from nodes.registry import default_registry

    if not _check_numbers(args):
        return EXIT_INVALID
    registry = default_registry()
    traces, evals = _open_stores(args)
    try:
        plan, eval_id = _make_plan(args, evals, registry, resume)
        if plan is not None and not resume:
            _record_versions(traces.path, args.targets)
    except (EvalSetupError, DatasetError) as exc:
        problems = getattr(exc, "problems", None) or [str(exc)]
        print("the evaluation cannot start (nothing was run):", file=sys.stderr)
        for problem in problems[:40]:
            print(f"  {problem}", file=sys.stderr)
        if len(problems) > 40:
            print(f"  (and {len(problems) - 40} more)", file=sys.stderr)
        plan = None
    if plan is None or not _check_baseline(args, plan):
        traces.close()
        return EXIT_INVALID
    if args.no_python and plan.metric.uses_python:
        _err("--no-python refuses the python: metric")
        traces.close()
        return EXIT_INVALID
    try:
        return _execute(args, plan, registry, evals, traces, eval_id, resume)
    finally:
        traces.close()


def _execute(args: argparse.Namespace, plan: Any, registry: Any, evals: Any, traces: Any, eval_id: str | None,
             resume: str | None) -> int:
    from app.eval.estimate import estimate
    from app.eval.results import summarize
    from app.eval.runner import DEFAULT_CONCURRENCY, Evaluation
    from app.eval.servers import plan_concurrency
    from app.run.providers import fake_provider, llama_provider
    from app.run.scheduler import Budget, Scheduler

    provider = fake_provider() if args.dry_run else llama_provider()
    scheduler = Scheduler(registry, provider, allow_python=not args.no_python)
    concurrency = args.concurrency or plan_concurrency(plan) or DEFAULT_CONCURRENCY
    backend = _main_backend(plan, provider)
    cost = estimate(plan, registry, count_tokens=_token_counter(backend), calibration=_calibration(args, backend),
                    concurrency=concurrency)
    if not args.json and not args.quiet:
        print(_estimate_line(cost), file=sys.stderr)
    for warning in plan.warnings:  # before the run: a user may stop an oracle's evaluation here
        print(f"warning: {warning}", file=sys.stderr)
    printer = _ProgressLine(quiet=args.quiet or args.json, expected_s=cost.get("expected_s"))
    evaluation = Evaluation(plan, scheduler, evals, eval_id=eval_id, observers=[traces],
                            concurrency=concurrency, on_progress=printer,
                            total_budget=Budget(args.max_lm_calls, args.max_tokens, args.max_seconds))
    if not args.json and not args.quiet:
        print(f"evaluation {evaluation.eval_id}: {plan.total_tasks} runs "
              f"({len(plan.items)} items × {sum(len(w.points) for w in plan.workflows)} workflow points"
              + (f" × {plan.repeats} repeats" if plan.repeats > 1 else "") + ")", file=sys.stderr)
    if plan.metric.runs_code and not args.json and not args.quiet:  # which sandbox grades, before any item
        from nodes.algorithms.code_exec import isolation_note

        print(f"grading code: {isolation_note()}", file=sys.stderr)
    previous = _cancel_on_sigint(evaluation)
    try:
        status = evaluation.run(resume=resume is not None, estimate=cost)
    finally:
        signal.signal(signal.SIGINT, previous)
        printer.finish()
        closing = getattr(provider, "close", None)  # its engine workers end with the command, in-process too
        if callable(closing):
            closing()
    _report(args, summarize(evals.get(evaluation.eval_id), baseline=args.baseline), cost, evaluation, status)
    return EXIT_OK if status == SUCCEEDED else EXIT_FAILED


def _calibration(args: argparse.Namespace, backend: Any) -> Any:
    """This machine's measured throughput for the main model (measured once and cached); None on a dry run."""
    from app.eval.estimate import calibrate, calibration_complete, load_calibration

    if backend is None or args.dry_run:
        return None
    calibration = None if args.calibrate else load_calibration(backend.model_id)
    if not calibration_complete(calibration):
        if not args.quiet and not args.json:
            print("measuring this machine's throughput once (cached for this model)...", file=sys.stderr)
        calibration = calibrate(backend)
    return calibration


def _report(args: argparse.Namespace, summary: dict[str, Any], cost: dict[str, Any], evaluation: Any,
            status: str) -> None:
    """The evaluation's results: version notes, then JSON or the table with the actual cost, and the HTML report."""
    for note in summary.get("version_notes", []):
        print(f"note: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(_json_result(summary, cost), indent=1))
    else:
        print(format_table(summary))
        _print_actual(summary, cost)
        if status != SUCCEEDED:
            print(f"evaluation {evaluation.eval_id} {status}: {evaluation.error or ''}; "
                  f"`metagen eval --resume {evaluation.eval_id}` finishes it", file=sys.stderr)
    if args.html:
        _write_html(summary, Path(args.html))


def _main_backend(plan: Any, provider: Any) -> Any:
    from app.workflow.model_specs import model_specs

    try:
        spec = next(iter(model_specs(plan.workflows[0].workflow).values()))
        return provider(spec)
    except Exception as exc:  # the runs will report the model problem with its node
        print(f"note: no model for the estimate ({exc})", file=sys.stderr)
        return None


def _token_counter(backend: Any) -> Any:
    if backend is None:
        return None

    def count(text: str) -> int:
        try:
            return len(backend.tokenize(text))
        except Exception:
            return max(1, len(text) // 4)

    return count


def _cancel_on_sigint(evaluation: Any) -> Any:
    def handler(_sig: int, _frame: Any) -> None:
        print("\ncancelling: finished items are kept; resume with "
              f"`metagen eval --resume {evaluation.eval_id}`", file=sys.stderr)
        evaluation.cancel("cancelled (Ctrl+C)")

    if threading.current_thread() is not threading.main_thread():
        return signal.getsignal(signal.SIGINT)
    return signal.signal(signal.SIGINT, handler)


class _ProgressLine:
    """`12/96 items · 58% correct · ETA 1m20s` on stderr, rewritten in place on a terminal."""

    def __init__(self, quiet: bool, expected_s: float | None = None) -> None:
        self.quiet = quiet
        self.expected_s = expected_s
        """The pre-run estimate: the ETA starts from it and moves toward the pace (`estimate.time_left`)."""
        self.tty = sys.stderr.isatty()
        self._last = 0.0
        self._lock = threading.Lock()

    def __call__(self, progress: Any) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        with self._lock:
            if progress.done < progress.total and now - self._last < (0.2 if self.tty else 5.0):
                return
            self._last = now
        from app.eval.estimate import time_left

        eta = time_left(self.expected_s, progress.elapsed_s, progress.done, progress.total, progress.elapsed_s)
        line = (f"{progress.done}/{progress.total} runs · {progress.correct / max(progress.done, 1):.0%} correct"
                + (f" · ETA {_duration(eta)}" if eta is not None and progress.done < progress.total else ""))
        print(("\r" + line) if self.tty else line, end="" if self.tty else "\n", file=sys.stderr, flush=True)

    def finish(self) -> None:
        if self.tty and not self.quiet:
            print(file=sys.stderr)


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def _estimate_line(cost: dict[str, Any]) -> str:
    return (f"estimate: {cost['tasks']} runs, {cost['lm_calls']} LM calls, "
            f"~{cost['expected_completion_tokens']:,} completion tokens expected "
            f"(at most {cost['max_completion_tokens']:,}), {cost['prompt_tokens']:,} prompt tokens; "
            f"~{_duration(cost['expected_s'])} expected, at most {_duration(cost['max_s'])} on this machine "
            f"[{cost['assumptions']}]")


def _print_actual(summary: dict[str, Any], cost: dict[str, Any]) -> None:
    completion = sum(p["completion_tokens"] for p in summary["points"])
    elapsed = summary.get("elapsed_s")
    print(f"cost: {completion:,} completion tokens (estimated ~{cost['expected_completion_tokens']:,}, "
          f"at most {cost['max_completion_tokens']:,})"
          + (f", {_duration(elapsed)} (estimated ~{_duration(cost['expected_s'])})" if elapsed else ""),
          file=sys.stderr)


def _json_result(summary: dict[str, Any], cost: dict[str, Any] | None) -> dict[str, Any]:
    from app.eval.results import json_comparisons, json_points

    return {"eval_id": summary["eval_id"], "status": summary["status"], "points": json_points(summary),
            "comparisons": json_comparisons(summary), "repeats": summary.get("repeats", 1),
            "pass_at_k": summary["pass_at_k"], "vote_curves": summary.get("vote_curves", []),
            "estimate": cost if cost is not None else summary["estimate"],
            **({"servers": summary["servers"]} if summary.get("servers") else {}),
            "warnings": summary.get("warnings", [])}


BUSY_NOTE = ("WALL S: seconds while the point had an item running; BUSY S: its items' run seconds summed over "
             "concurrent items (more than the wall time when items overlap)")


def format_table(summary: dict[str, Any]) -> str:
    rows = [["POINT", "ACCURACY", "95% CI", "N", "COMPLETION TOK (DRAWN/ALONE)", "PROMPT TOK (EVAL/CACHED)",
             "WALL S", "BUSY S", ""]]
    for p in summary["points"]:
        acc = "-" if p["accuracy"] is None else f"{p['accuracy']:.1%}" + (
            f" ±{p['se']:.1%}" if p.get("se") is not None and p.get("repeats", 1) > 1 else "")
        ungraded = f" (+{p['ungraded']} ungraded)" if p.get("ungraded") else ""
        rows.append([p["label"], acc, f"{p['ci'][0]:.0%}–{p['ci'][1]:.0%}", f"{p['correct']}/{p['total']}{ungraded}",
                     f"{p['completion_tokens']:,}/{p['cost_tokens']:,}",
                     f"{p['prompt_tokens_evaluated']:,}/{p['prompt_tokens_cached']:,}",
                     "-" if p.get("wall_s") is None else f"{p['wall_s']:.1f}", f"{p.get('busy_s') or 0.0:.1f}",
                     "pareto" if p.get("pareto") else ""])
    if any(p.get("thinking_tokens") for p in summary["points"]):  # thinking apart from the answers' tokens
        rows[0].insert(5, "THINKING/ANSWER TOK")
        for row, p in zip(rows[1:], summary["points"], strict=True):
            row.insert(5, f"{p.get('thinking_tokens', 0):,}/{p.get('answer_tokens', 0):,}")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.append(BUSY_NOTE)
    for p in summary["points"]:
        if p.get("ungraded"):
            lines.append(f"{p['label']}: {p['ungraded']} items ungraded (the grader could not run; accuracy is over "
                         f"the graded items): {p.get('ungraded_reason', '')}"[:400])
    lines.extend(format_comparisons(summary))
    for curve in summary["pass_at_k"]:
        lines.append(f"pass@k {curve['label']} (n={curve['n']}, {curve['items']} items): " + ", ".join(
            f"@{k}={v:.1%}" for k, v in zip(curve["k"], curve["pass_at_k"], strict=True)))
    for curve in summary.get("vote_curves", []):
        how = f"mean of {curve['bootstrap']} resamples" if curve["bootstrap"] else "first k"
        for key, name in (("maj_at_k", "maj@k"), ("best_at_k", "best-of-k")):
            if key in curve:
                lines.append(f"{name} {curve['label']} (n={curve['n']}, {curve['items']} items, {how}): " + ", ".join(
                    f"@{k}={v:.1%}" for k, v in zip(curve["k"], curve[key], strict=True)))
    if summary.get("servers"):
        lines.append("requests served: " + ", ".join(f"{url} {n}" for url, n in summary["servers"].items()))
    lines.extend(f"warning: {w}" for w in summary.get("warnings", []))  # beside the numbers they qualify
    return "\n".join(lines)


def format_comparisons(summary: dict[str, Any]) -> list[str]:
    """The paired comparisons as table lines (largest difference first, `*` where p < 0.05), each with its sentence."""
    comparisons = summary.get("comparisons") or []
    if not comparisons:
        return []
    rows = [["A", "B", "N", "DIFF", "95% CI (PAIRED)", "P", "TEST", "P<0.05"]]
    for c in comparisons:
        fmt = (lambda x: "-" if x is None else f"{x * 100:+.1f}")  # noqa: E731
        rows.append([c["a"], c["b"], str(c["n"]), fmt(c["diff"]), f"[{fmt(c['ci'][0])}, {fmt(c['ci'][1])}]",
                     f"{c['p_value']:.3g}", c["method"], "*" if c["significant"] else ""])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["", "paired comparisons (points of accuracy, A − B on the items both ran; * p < 0.05):"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines += [f"  {c['sentence']}" for c in comparisons]
    return lines


def _write_html(summary: dict[str, Any], path: Path) -> None:
    from app.viz.evaluation import evaluation_report_html

    atomic_write_text(path, evaluation_report_html(summary))
    print(f"wrote {path}", file=sys.stderr)


# ---------------------------------------------------------------------- list / show / export / delete


def _action(action: str, rest: list[str], args: argparse.Namespace) -> int:
    from app.eval.results import summarize
    from app.eval.store import EvalNotFoundError

    traces, evals = _open_stores(args)
    try:
        if action == "list":
            listed = evals.list()
            if args.json:
                print(json.dumps(listed, indent=1))
            elif not listed:
                print("no evaluations yet; run `metagen eval WORKFLOW.yaml --data DATASET`")
            else:
                for e in listed:
                    started = time.strftime("%Y-%m-%d %H:%M", time.localtime(e["created_at"]))
                    print(f"{e['id']}  {e['status']:<11} {started}  {e['done']}/{e['total']} runs  "
                          f"{' vs '.join(e['workflows'])} on {e['dataset']}")
            return EXIT_OK
        if not rest:
            _err(f"`metagen eval {action}` needs an evaluation id (see `metagen eval list`)")
            return EXIT_INVALID
        if action == "delete":
            for eval_id in rest:
                evals.delete(eval_id)
            return EXIT_OK
        try:
            summary = summarize(evals.get(rest[0]), baseline=args.baseline)
        except ValueError as exc:  # an unknown --baseline
            _err(f"--baseline: {exc}")
            return EXIT_INVALID
        if action == "export" and not args.html:
            print(json.dumps(summary, indent=1, default=str))
        elif args.json:
            print(json.dumps(_json_result(summary, None), indent=1))
        else:
            print(f"evaluation {summary['eval_id']} ({summary['status']}): {summary['done']}/{summary['total']} "
                  f"runs, metric {summary['metric']} on {summary['dataset'].get('name', '')}")
            print(format_table(summary))
        if args.html:
            _write_html(summary, Path(args.html))
        return EXIT_OK
    except EvalNotFoundError as exc:
        _err(str(exc))
        return EXIT_INVALID
    finally:
        traces.close()
