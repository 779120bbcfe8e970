"""`metagen ui`: start the browser UI (Gradio) on this machine."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sys
from pathlib import Path
from typing import Any

from app.cli.fake_flags import add_fake_script_argument, fake_script_from_args
from app.cli.origin_flags import add_origin_arguments, origin_rules_from_args
from app.cli.share_flags import add_share_arguments, launch_with_share, policy_from_args

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7860


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser("ui", help="open the browser UI: node-graph editor, runs, traces, models")
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST}: this "
                   "machine only)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser window")
    p.add_argument("--workflows", default=None, metavar="DIR", help="workflows folder (default: in the user "
                   "data dir; $METAGEN_WORKFLOWS)")
    p.add_argument("--db", default=None, metavar="PATH", help="trace database (default: $METAGEN_TRACE_DB or the "
                   "user data dir)")
    p.add_argument("--dry-run", action="store_true", help="answer with a scripted fake model instead of llama.cpp")
    p.add_argument("--fake-latency", type=float, default=0.0, metavar="SECONDS",
                   help="with --dry-run: delay each fake model request (to watch live progress)")
    add_fake_script_argument(p)
    p.add_argument("--app", default=None, metavar="NAME", help="serve only the app page of workflow NAME (a saved "
                   "workflow or an example): its inputs, Run and the answer, no editor")
    add_share_arguments(p)
    add_origin_arguments(p)
    api = p.add_argument_group("the OpenAI-compatible API on /v1 (see `metagen serve`)")
    keys = api.add_mutually_exclusive_group()
    keys.add_argument("--api-key", default=None, metavar="KEY", help="API clients must send `Authorization: Bearer "
                      "KEY`; without a key only this machine may call /v1 (also $METAGEN_API_KEY)")
    keys.add_argument("--api-key-file", default=None, metavar="FILE", help="accepted API keys, one per line")
    api.add_argument("--alias", action="append", default=[], metavar="NAME=MODEL",
                     help="answer /v1 requests for model NAME with MODEL (repeatable; see `metagen serve --alias`)")
    p.set_defaults(func=cmd_ui)


def listen_error(host: str, port: int, exc: OSError) -> str:
    """Why the server could not start, in the CLI's words (Gradio's own text talks about launch() parameters)."""
    if "empty port" in str(exc) or getattr(exc, "errno", None) == errno.EADDRINUSE:
        return (f"port {port} on {host} is already in use (is Metagen Studio already running? then open "
                f"http://{host}:{port}/); or pick another --port")
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}; pick another --port or --host"


def _blocks(service: Any, app: str | None) -> tuple[Any, Any]:
    """The Gradio app to serve and its launch arguments: the whole studio, or with --app one workflow's app page
    (None, after saying why, when there is no such workflow)."""
    if not app:
        from app.ui.app import build_app, launch_kwargs

        return build_app(service), launch_kwargs
    from app.service.errors import UserError
    from app.ui.app_alone import alone_launch_kwargs, build_app_page

    try:
        return build_app_page(service, app), alone_launch_kwargs
    except UserError as exc:
        names = ", ".join(sorted({*service.list_workflows(), *service.list_examples()})) or "none"
        print(f"error: --app {app}: {exc} (workflows here: {names})", file=sys.stderr)
        return None, None


def _flag_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with --port or --workflows, or None."""
    if not 0 < args.port < 65536:
        return f"--port must be between 1 and 65535, got {args.port}"
    folder = Path(args.workflows).expanduser() if args.workflows else None
    if folder is not None and folder.exists() and not folder.is_dir():
        return (f"--workflows {args.workflows} is a file; give the folder that holds (or will hold) your workflow "
                ".yaml files")
    return None


def _access_options(args: argparse.Namespace) -> tuple[Any, tuple[str, ...], Any, tuple[tuple[str, str], ...]]:
    """(share policy, API keys, origin rules, model aliases) from the flags; ValueError saying what to fix."""
    from app.serve.config import load_api_keys
    from app.serve.model_alias import parse_alias

    policy = policy_from_args(args, args.host)
    api_keys = load_api_keys(getattr(args, "api_key", None), getattr(args, "api_key_file", None))
    origins = origin_rules_from_args(args, args.host, tunnel=bool(args.share))
    aliases = tuple(parse_alias(text) for text in getattr(args, "alias", []))
    return policy, api_keys, origins, aliases


def cmd_ui(args: argparse.Namespace) -> int:
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from app.service.studio import StudioService

    problem = _flag_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    from app.serve.config import studio_config
    from app.share.policy import env_share_mode

    fake_script, problem = fake_script_from_args(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2

    try:
        policy, api_keys, origins, aliases = _access_options(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from app.platform.scratch import install_signal_cleanup
    from app.platform.shutdown import install_forced_exit

    install_signal_cleanup()  # a server is usually stopped by a signal: its scratch folders go then too
    install_forced_exit()  # ... and it is gone within seconds, even when a run holds it up
    service = StudioService(
        policy=policy,
        workflows_dir=Path(args.workflows) if args.workflows else None,
        trace_db=Path(args.db) if args.db else None,
        dry_run=args.dry_run,
        fake_latency_s=max(0.0, args.fake_latency) if args.dry_run else 0.0,
        fake_script=fake_script,
    )
    demo, kwargs_for = _blocks(service, args.app)
    if demo is None:
        service.close()
        return 2
    api = studio_config(service, api_keys=api_keys, all_remote=bool(args.share),
                        share_rules_everywhere=bool(getattr(args, "share_mode", False)) or env_share_mode(),
                        origins=origins, aliases=aliases)
    try:
        launched = launch_with_share(demo, host=args.host, port=args.port, share=args.share,
                                     inbrowser=not args.no_browser, quiet=True, show_error=False,
                                     **kwargs_for(service, api))
        from app.ui.app import drop_gradio_cors

        drop_gradio_cors(demo.app)
        key_note = "API key required" if api_keys else "no API key: only this machine may call it"
        api_line = f"OpenAI-compatible API: {launched.local_url.rstrip('/')}/v1 ({key_note})"
        app_line = [f"App page of {args.app!r} alone (no editor)."] if args.app else []
        for line in [*launched.lines(policy), *app_line, api_line, "Ctrl+C stops it."]:
            print(line, file=sys.stderr, flush=True)
        demo.block_thread()
    except OSError as exc:
        print(f"error: {listen_error(args.host, args.port, exc)}", file=sys.stderr)
        return 1
    finally:
        service.close()
    return 0
