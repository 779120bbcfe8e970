"""`metagen validate`, `metagen run` and `metagen nodes`: check, run and document workflows."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.cli.exit_codes import EXIT_FAILED, EXIT_INVALID, EXIT_OK
from app.run import events as ev
from app.run.events import Event
from app.run.scheduler import Budget, RunResult, Scheduler
from app.run.status import INVALID, SUCCEEDED
from app.workflow.problems import Issue, WorkflowError, errors
from app.workflow.spec import load_workflow
from app.workflow.validation import validate
from nodes.base import CandidateSet, format_value, to_jsonable
from nodes.registry import default_registry

log = logging.getLogger("metagen")

class _ProgressPrinter:
    """Prints node progress to stderr while a run goes on."""

    def __init__(self, stream: Any = sys.stderr, quiet: bool = False) -> None:
        self.stream = stream
        self.quiet = quiet
        self._lock = threading.Lock()

    def on_event(self, event: Event) -> None:
        if self.quiet:
            return
        d = event.data
        line = None
        if event.type == ev.NODE_START:
            line = f"▶ {event.node_id} ({d.get('kind')}) running"
        elif event.type == ev.NODE_END:
            line = f"✓ {event.node_id} done in {d.get('duration_s', 0):.2f}s"
        elif event.type == ev.NODE_CACHED:
            line = f"✓ {event.node_id} cached"
        elif event.type == ev.NODE_ERROR:
            line = f"✗ {event.node_id} {d.get('cause')}: {d.get('error')}"
        elif event.type == ev.NODE_SKIPPED:
            line = f"- {event.node_id} skipped"
        if line:
            with self._lock:
                print(line, file=self.stream, flush=True)


def _print_issues(source: str, issues: Sequence[Any]) -> None:
    for issue in issues:
        print(issue.format(source), file=sys.stderr)


def cmd_validate(args: argparse.Namespace) -> int:
    registry = default_registry()
    worst = EXIT_OK
    for file in args.files:
        try:
            wf = load_workflow(file)
            issues = validate(wf, registry)
        except WorkflowError as exc:
            issues = exc.issues
        _print_issues(file, issues)
        if errors(list(issues)):
            worst = EXIT_INVALID
        elif not args.quiet:
            warn = len(issues)
            print(f"{file}: ok" + (f" ({warn} warning{'s' * (warn != 1)})" if warn else ""))
    return worst


def _format_output(value: Any) -> str:
    if isinstance(value, CandidateSet):
        winner = value.candidates[value.winner].text if value.winner is not None else None
        return winner if winner is not None else format_value(value)
    if isinstance(value, dict | list):
        text = json.dumps(to_jsonable(value), ensure_ascii=False)
        return text if len(text) <= 100 else json.dumps(to_jsonable(value), ensure_ascii=False, indent=2)
    return format_value(value)


def _invalid(args: argparse.Namespace, issues: Sequence[Any]) -> int:
    """Report an invalid workflow or input: lines on stderr, and with --json also one object on stdout."""
    _print_issues(args.file, issues)
    if getattr(args, "json", False):
        print(json.dumps({"run_id": None, "status": INVALID, "outputs": {}, "stats": None,
                          "issues": [i.to_json() for i in issues]}, ensure_ascii=False, indent=2))
    return EXIT_INVALID


def _open_trace_store(args: argparse.Namespace) -> Any:
    if getattr(args, "no_trace", False):
        return None
    from app.traces.store import TraceStore

    return TraceStore(args.db) if getattr(args, "db", None) else TraceStore()


def _provider(args: argparse.Namespace) -> Any:
    from app.run.providers import fake_provider, llama_provider

    return fake_provider() if args.dry_run else llama_provider()


def _prefetch_models(provider: Any, wf: Any) -> None:
    """Start the workflow's local models loading (each engine worker: interpreter, llama.cpp, weights) while this
    process checks the workflow and sets up the run; a spec that does not resolve is left to the run to report."""
    prefetch = getattr(provider, "prefetch", None)
    if not callable(prefetch):
        return
    from app.workflow.model_specs import model_specs

    try:
        specs = model_specs(wf)
    except Exception as exc:  # the run says what is wrong with it
        log.debug("no model prefetch: %s", exc)
        return
    for spec in specs.values():
        prefetch(spec)


def _ask(question: str) -> bool:
    """A yes/no question on the terminal; no terminal (a script, CI) is a no."""
    if not sys.stdin.isatty():
        return False
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def _pull_needed(args: argparse.Namespace, wf: Any) -> bool:
    """Pull the workflow's Hub models that are not here yet: with --pull at once, else after asking (a run that
    cannot ask refuses with the pull command); False (after printing why) when a needed model is not here."""
    from app.service.errors import UserError
    from app.service.model_pull import pull_needed_models, tqdm_progress

    try:
        for result in pull_needed_models(wf.models or {}, progress=tqdm_progress,
                                         ask=None if args.pull else _ask):
            print(f"pulled {result.repo}: {result.path.name}", file=sys.stderr)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return False
    return True


def cmd_run(args: argparse.Namespace) -> int:
    try:
        given = {}
        for pair in args.input:
            if "=" not in pair:
                raise WorkflowError([Issue("bad_input", f"-i {pair!r} must look like name=value",
                                           "e.g. -i question='What is 2 + 2?'")])
            name, _, value = pair.partition("=")
            given[name.strip()] = value
        wf = load_workflow(args.file)
    except WorkflowError as exc:
        return _invalid(args, exc.issues)
    if not args.dry_run and not _pull_needed(args, wf):
        return EXIT_FAILED
    provider = _provider(args)
    _prefetch_models(provider, wf)
    try:
        store = _open_trace_store(args)
    except Exception as exc:  # a refused or unusable trace database is a usage error
        print(f"error: cannot use the trace database: {exc} (pass another --db, or --no-trace)", file=sys.stderr)
        return EXIT_INVALID
    if store is not None:
        from app.service.versions import record_loaded_file

        record_loaded_file(store.path, Path(args.file))
    scheduler = Scheduler(default_registry(), provider, allow_python=not args.no_python)
    observers: list[Any] = [_ProgressPrinter(quiet=args.quiet)]
    if store is not None:
        observers.append(store)
    budget = Budget(max_lm_calls=args.max_lm_calls, max_tokens=args.max_tokens, max_seconds=args.max_seconds)
    try:
        result: RunResult = scheduler.run(wf, given, seed=args.seed, budget=budget, observers=observers)
    except WorkflowError as exc:
        return _invalid(args, exc.issues)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if store is not None:
            store.close()
        _close_provider(provider)
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
    else:
        for name, value in result.outputs.items():
            text = _format_output(value)
            print(f"{name}: {text}" if "\n" not in text else f"{name}:\n{text}")
        s = result.stats
        print(f"run {result.run_id}: {result.status} · {s.lm_calls} LM calls · {s.prompt_tokens} prompt tokens "
              f"({s.prompt_tokens_cached} cached) · {s.completion_tokens} completion tokens · {s.wall_s:.2f}s",
              file=sys.stderr)
    if result.status != SUCCEEDED:
        print(f"error: {result.error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _close_provider(provider: Any) -> None:
    """End the engine workers this command started (a caller running it in-process keeps no worker behind)."""
    closing = getattr(provider, "close", None)
    if callable(closing):
        try:
            closing()
        except Exception as exc:  # the run's result stands whatever the shutdown says
            log.debug("closing the models: %s", exc)


def cmd_nodes(args: argparse.Namespace) -> int:
    schema = default_registry().schema()
    if args.json:
        print(json.dumps(schema, indent=2, ensure_ascii=False))
        return EXIT_OK
    for kind in schema:
        print(f"{kind['kind']}  [{kind['category']}]  {kind['description']}")
        for port in kind["inputs"]:
            print(f"    in   {port['name']}: {port['type']}" + ("" if port["required"] else " (optional)"))
        if kind["variadic_inputs"]:
            print("    in   {variables} of its prompt templates: any")
        for port in kind["outputs"]:
            print(f"    out  {port['name']}: {port['type']}")
        for p in kind["params"]:
            extra = []
            if p["choices"]:
                extra.append("|".join(p["choices"]))
            if p["min"] is not None or p["max"] is not None:
                extra.append(f"range {p['min']}..{p['max']}")
            default = json.dumps(p["default"], ensure_ascii=False)
            if len(default) > 40:
                default = default[:37] + "..."
            print(f"    param {p['name']} ({p['type']}{', ' + ', '.join(extra) if extra else ''}) "
                  f"= {default}: {p['description']}")
        print()
    return EXIT_OK


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value > 0 or value != value or value == float("inf"):
            raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text}")
        return value

    return parse


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    sub = subparsers
    p = sub.add_parser("validate", help="check workflow files; exit 2 with FILE:LINE: CODE lines on problems")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("-q", "--quiet", action="store_true", help="print only problems")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("run", help="run a workflow; progress on stderr, outputs on stdout")
    p.add_argument("file", metavar="FILE", help="workflow YAML file (see workflows/ for examples)")
    p.add_argument("-i", "--input", action="append", default=[], metavar="NAME=VALUE", help="a workflow input")
    p.add_argument("--seed", type=int, default=0, help="run seed (same seed -> same outputs)")
    p.add_argument("--json", action="store_true", help="print one JSON object with run_id, status, outputs, stats")
    p.add_argument("--dry-run", action="store_true", help="use the scripted fake backend instead of llama.cpp")
    p.add_argument("--max-lm-calls", type=_positive(int), default=None, metavar="N",
                   help="stop the run once N model calls (one per sample) were made")
    p.add_argument("--max-tokens", type=_positive(int), default=None, metavar="N",
                   help="stop the run once N prompt + completion tokens were evaluated")
    p.add_argument("--max-seconds", type=_positive(float), default=None, metavar="S",
                   help="stop the run after S seconds")
    p.add_argument("--no-python", action="store_true", help="refuse the python verifier")
    p.add_argument("--pull", action="store_true",
                   help="pull the workflow's `source: hub` models that are not in the models folder, without asking")
    p.add_argument("--db", default=None, help="trace database (default: $METAGEN_TRACE_DB or the user data dir)")
    p.add_argument("--no-trace", action="store_true", help="do not record the run in the trace database")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("nodes", help="list node kinds with their ports and params")
    p.add_argument("--json", action="store_true", help="the full registry schema as JSON (what the editor uses)")
    p.set_defaults(func=cmd_nodes)

