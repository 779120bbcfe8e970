"""`metagen mcp`: every workflow as a tool of an MCP server on stdin / stdout, for a desktop agent's config file
(`"command": ".venv/bin/metagen", "args": ["mcp"]`); `metagen serve --mcp` serves the same over HTTP."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from app.cli.fake_flags import add_fake_script_argument, fake_script_from_args
from app.cli.share_flags import add_cap_arguments
from app.share.policy import SHARE_MODE_ENV, env_share_mode

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from app.serve.config import DEFAULT_MAX_CONCURRENT_RUNS, DEFAULT_MAX_QUEUE

    p = subparsers.add_parser(
        "mcp", help="serve workflows as MCP tools over stdio (for desktop agents)",
        description="Serve every workflow of the workflows folder as a tool of a Model Context Protocol server on "
                    "stdin / stdout: a desktop agent starts it from its config file (command .venv/bin/metagen, "
                    "args [\"mcp\"]). Runs are traced; read metagen://runs/RUN_ID for one. See docs/mcp.md; "
                    "`metagen serve --mcp` serves the same at http://HOST:PORT/mcp.")
    p.add_argument("--workflows", default=None, metavar="DIR", help="workflows folder (default: in the user data "
                   "dir; $METAGEN_WORKFLOWS)")
    p.add_argument("--db", default=None, metavar="PATH", help="trace database (default: $METAGEN_TRACE_DB or the "
                   "user data dir)")
    p.add_argument("--max-concurrent-runs", type=int, default=DEFAULT_MAX_CONCURRENT_RUNS, metavar="N",
                   help=f"tool calls run at once (the engine batches them); more wait (default "
                        f"{DEFAULT_MAX_CONCURRENT_RUNS})")
    p.add_argument("--max-queue", type=int, default=DEFAULT_MAX_QUEUE, metavar="N",
                   help=f"tool calls that may wait; more are refused (default {DEFAULT_MAX_QUEUE})")
    g = p.add_argument_group("share-mode rules (for an agent you do not fully trust)")
    g.add_argument("--share-mode", action="store_true",
                   help=f"apply share mode's rules and caps to every call (also ${SHARE_MODE_ENV}=1)")
    g.add_argument("--allow-python", action="store_true", help="with --share-mode: allow the python verifier")
    add_cap_arguments(g)
    p.add_argument("--dry-run", action="store_true", help="answer with a scripted fake model instead of llama.cpp")
    p.add_argument("--fake-latency", type=float, default=0.0, metavar="SECONDS",
                   help="with --dry-run: delay each fake model request")
    add_fake_script_argument(p)
    p.set_defaults(func=cmd_mcp)


def _problem(args: argparse.Namespace) -> str | None:
    from app.cli.serve import check_run_limits

    return check_run_limits(args)


def cmd_mcp(args: argparse.Namespace) -> int:
    from app.mcp.stdio import serve_stdio
    from app.serve.config import ServeConfig, remote_policy_for
    from app.service.studio import StudioService
    from app.share.policy import SharePolicy
    from app.share.run_gate import RunGate

    fake_script, fake_problem = fake_script_from_args(args)
    problem = _problem(args) or fake_problem
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    service = StudioService(policy=SharePolicy.local(), workflows_dir=Path(args.workflows) if args.workflows else None,
                            trace_db=Path(args.db) if args.db else None, dry_run=args.dry_run,
                            fake_latency_s=max(0.0, args.fake_latency) if args.dry_run else 0.0,
                            fake_script=fake_script)
    rules = remote_policy_for(service.policy, allow_python=args.allow_python, models_folder=service.models_dir,
                              max_lm_calls=args.cap_lm_calls, max_tokens=args.cap_tokens,
                              max_seconds=args.cap_seconds, max_concurrent_runs=args.max_concurrent_runs,
                              max_queue=args.max_queue)
    config = ServeConfig(remote_policy=rules, gate=RunGate(args.max_concurrent_runs, args.max_queue),
                         share_rules_everywhere=args.share_mode or env_share_mode())
    log.info("MCP over stdio: %d workflow(s) from %s", len(service.list_workflows()), service.workflows_dir)
    try:
        serve_stdio(service, config)
    finally:
        service.close()
    return 0
