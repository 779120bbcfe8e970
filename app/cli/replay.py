"""`metagen replay FILE`: re-run a run bundle's workflow (or an edited one) with its model calls answered from the
bundle; only calls the bundle lacks go to a model (docs/replay.md)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from app.cli.exit_codes import EXIT_FAILED, EXIT_INVALID, EXIT_OK
from app.run.status import INVALID, SUCCEEDED

log = logging.getLogger("metagen")


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "replay", help="re-run a run bundle without the model (or an edited workflow, answering unchanged calls)",
        description="Re-runs the workflow of a bundle written by `metagen traces export RUN --bundle FILE` on its "
                    "inputs and seed, each model call answered from the bundle. With --workflow, an edited "
                    "workflow: calls whose request did not change are answered from the bundle, the others by "
                    "the model.")
    p.add_argument("file", metavar="FILE", help="a run bundle (JSON, or gzip-compressed JSON)")
    p.add_argument("--workflow", default=None, metavar="EDITED.yaml",
                   help="run this (edited) workflow instead of the bundle's own")
    p.add_argument("--json", action="store_true",
                   help="print what `metagen run --json` prints, plus \"calls\": {\"replayed\", \"model\"}")
    p.add_argument("--dry-run", action="store_true",
                   help="calls the bundle lacks go to the scripted fake backend instead of llama.cpp")
    p.add_argument("--no-model", action="store_true",
                   help="never call a model: a call the bundle lacks fails the run, naming the node and what "
                        "changed (the default without --workflow)")
    p.add_argument("--db", default=None, help="trace database (default: $METAGEN_TRACE_DB or the user data dir)")
    p.add_argument("--no-trace", action="store_true", help="do not record the replay in the trace database")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=cmd_replay)


def _error(args: argparse.Namespace, message: str, issues: list[dict[str, Any]] | None = None) -> int:
    print(f"error: {message}", file=sys.stderr)
    if args.json:
        print(json.dumps({"run_id": None, "status": INVALID, "outputs": {}, "stats": None,
                          "issues": issues or [{"code": "bad_bundle", "message": message}]}, ensure_ascii=False,
                         indent=2))
    return EXIT_INVALID


def _model_provider(args: argparse.Namespace) -> Any:
    """Who answers the calls the bundle lacks: nobody (plain replay, --no-model), the fake, or the real models."""
    if args.workflow is None or args.no_model:
        return None
    from app.run.providers import fake_provider, llama_provider

    return fake_provider() if args.dry_run else llama_provider()


def cmd_replay(args: argparse.Namespace) -> int:
    from app.cli.run import _close_provider, _open_trace_store, _print_issues, _ProgressPrinter
    from app.run.replay import ReplayError, replay_bundle
    from app.traces.bundle import BundleError, read_bundle
    from app.workflow.problems import WorkflowError
    from app.workflow.spec import load_workflow

    try:
        bundle = read_bundle(Path(args.file).expanduser())
    except BundleError as exc:
        return _error(args, str(exc))
    workflow = None
    if args.workflow is not None:
        try:
            workflow = load_workflow(args.workflow)
        except WorkflowError as exc:
            _print_issues(args.workflow, exc.issues)
            return _error(args, f"{args.workflow} is not a valid workflow", [i.to_json() for i in exc.issues])
    try:
        store = _open_trace_store(args)
    except Exception as exc:  # a refused or unusable trace database is a usage error
        return _error(args, f"cannot use the trace database: {exc} (pass another --db, or --no-trace)")
    provider = _model_provider(args)
    observers: list[Any] = [_ProgressPrinter(quiet=args.quiet)] + ([store] if store is not None else [])
    try:
        outcome = replay_bundle(bundle, workflow=workflow, model_provider=provider, observers=observers)
    except WorkflowError as exc:
        _print_issues(args.workflow or args.file, exc.issues)
        return _error(args, "the workflow cannot run", [i.to_json() for i in exc.issues])
    except ReplayError as exc:
        return _error(args, str(exc))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if store is not None:
            store.close()
        if provider is not None:
            _close_provider(provider)
    return _report(args, bundle, outcome)


def _report(args: argparse.Namespace, bundle: dict[str, Any], outcome: Any) -> int:
    from app.cli.run import _format_output
    from nodes.base import to_jsonable

    result = outcome.result
    if args.json:
        print(json.dumps(outcome.to_json(), ensure_ascii=False, indent=2))
    else:
        for name, value in result.outputs.items():
            text = _format_output(value)
            print(f"{name}: {text}" if "\n" not in text else f"{name}:\n{text}")
    recorded = bundle["run"]
    print(f"replay {result.run_id} of run {recorded.get('id')}: {result.status} · {outcome.summary}", file=sys.stderr)
    if not outcome.edited and result.status == SUCCEEDED:
        same = to_jsonable(result.outputs) == recorded.get("outputs")
        print("outputs identical to the recorded run's" if same else
              "warning: the outputs differ from the recorded run's", file=sys.stderr)
    if result.status != SUCCEEDED:
        failure = result.failure
        if failure is not None and failure.cause == "ReplayMissError":
            print(f"error: {failure.message}", file=sys.stderr)
        else:
            print(f"error: {result.error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
