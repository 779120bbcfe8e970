"""`metagen traces`: list, show, export, import and delete recorded runs (the trace database)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from app.cli.exit_codes import EXIT_FAILED, EXIT_INVALID, EXIT_OK
from app.platform.fileio import atomic_write_text


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    group = subparsers.add_parser("traces", help="list, show, export, import and delete recorded runs",
                                  description="Recorded runs live in a SQLite trace database "
                                              "($METAGEN_TRACE_DB, else traces.db in the user data folder).")
    sub = group.add_subparsers(dest="traces_command", metavar="SUBCOMMAND")
    group.set_defaults(func=lambda args: _usage(group))

    def db_flag(p: argparse.ArgumentParser) -> None:
        p.add_argument("--db", default=None, metavar="PATH",
                       help="trace database (default: $METAGEN_TRACE_DB or the user data folder)")

    p = sub.add_parser("list", help="recorded runs, newest first")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.add_argument("--workflow", default=None, metavar="NAME", help="only runs of this workflow")
    p.add_argument("--status", default=None, help="only runs with this status (succeeded, failed, interrupted...)")
    p.add_argument("--limit", type=int, default=100, help="at most this many runs (default 100)")
    db_flag(p)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="one run: summary and nodes, or its full record / HTML report")
    p.add_argument("run_id", metavar="RUN_ID", help="run id (or its first characters)")
    p.add_argument("--json", action="store_true", help="print the full record as JSON")
    p.add_argument("--html", default=None, metavar="OUT.html", help="write a self-contained HTML report")
    db_flag(p)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("export", help="print a run as a self-contained JSON document, or write its replay bundle")
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("-o", "--output", default=None, metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("--bundle", default=None, metavar="FILE",
                   help="write the run's bundle instead: its workflow (sub-workflows included) and every model "
                        "call's request and result, for `metagen replay FILE` (gzip-compressed if FILE ends in .gz)")
    db_flag(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("delete", help="remove recorded runs from the database")
    p.add_argument("run_ids", nargs="+", metavar="RUN_ID")
    db_flag(p)
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser("import", help="add an exported run (JSON file, or - for stdin) to the database")
    p.add_argument("file", metavar="FILE")
    db_flag(p)
    p.set_defaults(func=cmd_import)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_INVALID


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _err(text: str) -> None:
    sys.stderr.write(f"error: {text}\n")


def _open(args: argparse.Namespace) -> Any:
    from app.traces import TraceStore

    return TraceStore(args.db) if args.db else TraceStore()


def _with_store(args: argparse.Namespace, action: Any) -> int:
    from app.traces import TraceStoreError

    try:
        store = _open(args)
    except TraceStoreError as exc:
        _err(str(exc))
        return EXIT_INVALID
    try:
        return int(action(store))
    except TraceStoreError as exc:
        _err(str(exc))
        return EXIT_INVALID
    finally:
        store.close()


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def _secs(value: float | None) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else "-"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def _no_runs_message(store: Any, workflow: str | None, status: str | None) -> str:
    """Why `traces list` shows nothing: an empty database, or filters that match none of its runs."""
    if not workflow and not status:
        return f"no runs recorded in {store.path}"
    recorded = store.list_runs(limit=1000)
    if not recorded:
        return f"no runs recorded in {store.path}"
    filters = " ".join(f"--{name} {value}" for name, value in (("workflow", workflow), ("status", status)) if value)
    seen_workflows = sorted({r["workflow"] for r in recorded if r.get("workflow")})
    seen_statuses = sorted({r["status"] for r in recorded if r.get("status")})
    return (f"no runs match {filters} in {store.path} (recorded workflows: {', '.join(seen_workflows) or '-'}; "
            f"statuses: {', '.join(seen_statuses) or '-'})")


def cmd_list(args: argparse.Namespace) -> int:
    def action(store: Any) -> int:
        runs = store.list_runs(workflow=args.workflow, status=args.status, limit=args.limit)
        if args.json:
            _out(json.dumps(runs, ensure_ascii=False, indent=2))
            return EXIT_OK
        if not runs:
            _out(_no_runs_message(store, args.workflow, args.status))
            return EXIT_OK
        rows = [[r["id"], r["workflow"], r["status"], _when(r["started_at"]), _secs(r["wall_s"]),
                 str(r["lm_calls"]), str(r["prompt_tokens_evaluated"] + r["completion_tokens"])] for r in runs]
        _out(_table(["RUN", "WORKFLOW", "STATUS", "STARTED", "SECONDS", "LM CALLS", "TOKENS"], rows))
        return EXIT_OK

    return _with_store(args, action)


def _describe(record: dict[str, Any]) -> str:
    from app.viz.summary import node_stats, run_summary

    run = record["run"]
    s = run_summary(record)
    lines = [
        f"run {run['id']} · {run['workflow']} · {run['status']}",
        f"started {_when(run['started_at'])} · wall {_secs(s['wall_s'])}s · seed {run['seed']}",
        f"LM calls {s['lm_calls']} in {s['requests']} requests · prompt tokens {s['prompt_tokens_all_samples']} over "
        f"all samples, {s['prompt_tokens_evaluated']} evaluated ({s['tokens_saved_by_prefix_sharing']} saved by "
        f"prefix sharing, {s['prompt_tokens_cached']} of them from the KV cache)",
        f"completion tokens {s['completion_tokens']} · saved by adaptive stopping "
        f"~{s['tokens_saved_by_adaptive_stop']} ({s['samples_saved_by_adaptive_stop']} samples not drawn)",
    ]
    if s["samples_exited_thinking_early"] or s["early_exit_probe_tokens"]:
        lines.append(f"early exit of thinking: {s['samples_exited_thinking_early']} samples exited · thinking tokens "
                     f"saved ~{s['thinking_tokens_saved_by_early_exit']} · probe tokens {s['early_exit_probe_tokens']}")
    if run.get("error"):
        lines.append(f"error: {run['error']}")
    if run.get("inputs"):
        lines.append("inputs: " + json.dumps(run["inputs"], ensure_ascii=False)[:500])
    lines.append("")
    rows = [[n["node_id"], n["kind"], n["status"], _secs(n["duration_s"]), str(n["lm_calls"]), str(n["tokens"])]
            for n in node_stats(record)]
    lines.append(_table(["NODE", "KIND", "STATUS", "SECONDS", "LM CALLS", "TOKENS"], rows))
    if run.get("outputs"):
        lines.append("")
        for name, value in run["outputs"].items():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            limit = 2000 if isinstance(value, str) else 300
            lines.append(f"{name}: {text if len(text) <= limit else text[:limit] + '… (--json shows all)'}")
    return "\n".join(lines)


def cmd_show(args: argparse.Namespace) -> int:
    def action(store: Any) -> int:
        record = store.get_run(args.run_id)
        if args.html:
            from app.viz import export_html

            target = Path(args.html).expanduser()
            try:
                atomic_write_text(target, export_html(record))
            except OSError as exc:
                _err(f"cannot write {target}: {exc}")
                return EXIT_FAILED
            sys.stderr.write(f"wrote {target}\n")
        if args.json:
            _out(json.dumps(record, ensure_ascii=False, indent=2))
        elif not args.html:
            _out(_describe(record))
        return EXIT_OK

    return _with_store(args, action)


def _write_bundle(store: Any, run_id: str, target: Path) -> int:
    from app.traces.bundle import BundleError, write_bundle

    try:
        bundle = store.export_bundle(run_id)
    except BundleError as exc:
        _err(str(exc))
        return EXIT_INVALID
    try:
        write_bundle(target, bundle)
    except OSError as exc:
        _err(f"cannot write {target}: {exc.strerror or exc}")
        return EXIT_FAILED
    calls = (bundle["run"].get("stats") or {}).get("lm_calls", 0)
    sys.stderr.write(f"wrote bundle of run {bundle['run']['id']} ({calls} model calls in {len(bundle['calls'])} "
                     f"recorded requests) to {target}; replay it with `metagen replay {target}`\n")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    def action(store: Any) -> int:
        if args.bundle:
            return _write_bundle(store, args.run_id, Path(args.bundle).expanduser())
        text = json.dumps(store.export_run(args.run_id), ensure_ascii=False, indent=1)
        if args.output:
            target = Path(args.output).expanduser()
            try:
                atomic_write_text(target, text + "\n")
            except OSError as exc:
                _err(f"cannot write {target}: {exc}")
                return EXIT_FAILED
            sys.stderr.write(f"wrote {target}\n")
        else:
            _out(text)
        return EXIT_OK

    return _with_store(args, action)


def cmd_import(args: argparse.Namespace) -> int:
    try:
        raw = sys.stdin.read() if args.file == "-" else Path(args.file).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        _err(f"cannot read {args.file}: {exc.strerror or exc}")
        return EXIT_INVALID
    except UnicodeDecodeError:
        _err(f"{args.file} is not UTF-8 text; give a file made by `metagen traces export`")
        return EXIT_INVALID
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        _err(f"{args.file} is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
             "give a file made by `metagen traces export`")
        return EXIT_INVALID

    def action(store: Any) -> int:
        run_id = store.import_run(data)
        _out(run_id)
        sys.stderr.write(f"imported run {run_id} into {store.path}\n")
        return EXIT_OK

    return _with_store(args, action)


def cmd_delete(args: argparse.Namespace) -> int:
    def action(store: Any) -> int:
        ids = [store.resolve_run_id(run_id) for run_id in args.run_ids]  # all known before any is removed
        for run_id in ids:
            store.delete_run(run_id)
            sys.stderr.write(f"deleted run {run_id}\n")
        return EXIT_OK

    return _with_store(args, action)
