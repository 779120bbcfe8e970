"""`metagen doctor`: whether this install works, and how to fix what does not (exit 0 well, 1 broken)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli.exit_codes import EXIT_FAILED, EXIT_OK


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "doctor", help="check this install: Python, the llama.cpp build against this CPU, a canary decode, models, "
                       "disk, code isolation, Chromium, Hub settings, the trace database",
        description="Check whether this install works and say how to fix what does not. Exit status 0 when all is "
                    "well (warnings allowed), 1 when something is broken.")
    p.add_argument("--json", action="store_true", help="the report as JSON ({ok, summary, checks: [{name, status, "
                   "detail, fix}]})")
    p.add_argument("--no-canary", action="store_true", help="skip the canary decode of the bundled model")
    p.add_argument("--models", default=None, metavar="DIR", help="models folder (default: $METAGEN_MODELS or the "
                   "user data dir)")
    p.add_argument("--db", default=None, metavar="PATH", help="trace database (default: $METAGEN_TRACE_DB or the "
                   "user data dir)")
    p.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    from app.service.doctor import run_doctor

    if not args.json:
        print("checking this install (the canary decode takes a few seconds)...", file=sys.stderr, flush=True)
    report = run_doctor(models_dir=Path(args.models) if args.models else None,
                        trace_db=Path(args.db) if args.db else None, canary=not args.no_canary)
    print(report.to_json() if args.json else report.to_text())
    return EXIT_OK if report.ok else EXIT_FAILED
