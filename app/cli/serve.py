"""`metagen serve`: workflows (and local model files) as OpenAI-compatible models on /v1, for any OpenAI client."""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.fake_flags import add_fake_script_argument, fake_script_from_args
from app.cli.origin_flags import add_origin_arguments, origin_rules_from_args
from app.cli.share_flags import add_cap_arguments
from app.cli.ui import listen_error
from app.share.policy import (
    SHARE_MODE_ENV,
    env_share_mode,
)

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from app.serve.config import ServeConfig
    from app.service.studio import StudioService

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from app.serve.config import API_KEY_ENV, DEFAULT_MAX_CONCURRENT_RUNS, DEFAULT_MAX_QUEUE

    p = subparsers.add_parser(
        "serve", help="serve workflows as OpenAI-compatible models (/v1/chat/completions, /v1/responses, "
                      "/v1/messages; --mcp: MCP tools)",
        description="Serve every workflow of the workflows folder as a model of an OpenAI-compatible API "
                    "(GET /v1/models, POST /v1/chat/completions), the Responses API (POST /v1/responses) and "
                    "Anthropic's Messages API (POST /v1/messages), and each local model file for plain completions "
                    "(POST /v1/completions). Point an OpenAI client's base_url at http://HOST:PORT/v1, an Anthropic "
                    "client's at http://HOST:PORT; --mcp adds every workflow as an MCP tool at /mcp. GET / lists "
                    "the routes.")
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST}: this machine "
                   "only; any other address needs an API key)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    p.add_argument("--workflows", default=None, metavar="DIR", help="workflows folder (default: in the user data "
                   "dir; $METAGEN_WORKFLOWS)")
    p.add_argument("--db", default=None, metavar="PATH", help="trace database (default: $METAGEN_TRACE_DB or the "
                   "user data dir)")
    keys = p.add_mutually_exclusive_group()
    keys.add_argument("--api-key", default=None, metavar="KEY", help=f"clients must send `Authorization: Bearer "
                      f"KEY` (also ${API_KEY_ENV})")
    keys.add_argument("--api-key-file", default=None, metavar="FILE", help="accepted keys, one per line")
    p.add_argument("--max-concurrent-runs", type=int, default=DEFAULT_MAX_CONCURRENT_RUNS, metavar="N",
                   help=f"requests answered at once (the engine batches them); more wait in a queue (default "
                        f"{DEFAULT_MAX_CONCURRENT_RUNS})")
    p.add_argument("--max-queue", type=int, default=DEFAULT_MAX_QUEUE, metavar="N",
                   help=f"requests that may wait; more get 429 with Retry-After (default {DEFAULT_MAX_QUEUE})")
    g = p.add_argument_group("requests from other machines (share-mode rules)")
    g.add_argument("--allow-python", action="store_true", help="allow workflows with the python verifier")
    add_cap_arguments(g)
    g.add_argument("--share-mode", action="store_true",
                   help=f"apply these rules to requests from this machine too (also ${SHARE_MODE_ENV}=1)")
    p.add_argument("--mcp", action="store_true", help="also serve every workflow as an MCP tool at /mcp "
                   "(streamable HTTP; the same API key and share-mode rules; docs/mcp.md)")
    p.add_argument("--auto", default=None, metavar="MODEL", help="the workflow `model: \"auto\"` answers with (a "
                   "workflow name or tuned/NAME; default: the most recent tuned workflow, see `metagen tune`)")
    p.add_argument("--alias", action="append", default=[], metavar="NAME=MODEL",
                   help="answer requests for model NAME with MODEL (a workflow or model file; repeatable). Without "
                   "one, a claude-* or gpt-* name that nothing here has answers with the bundled model (or --auto's "
                   "target), with a warning header")
    p.add_argument("--dry-run", action="store_true", help="answer with a scripted fake model instead of llama.cpp")
    p.add_argument("--fake-latency", type=float, default=0.0, metavar="SECONDS",
                   help="with --dry-run: delay each fake model request")
    p.add_argument("--responses-retention", type=float, default=30.0, metavar="DAYS",
                   help="stored /v1/responses turns older than this are removed (default 30)")
    p.add_argument("--responses-max-mb", type=float, default=200.0, metavar="MB",
                   help="stored /v1/responses text one API key may keep; its oldest turns go first (default 200)")
    add_origin_arguments(p)
    add_fake_script_argument(p)
    p.set_defaults(func=cmd_serve)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _check_numbers(args: argparse.Namespace) -> str | None:
    if not 0 < args.port < 65536:
        return f"--port must be between 1 and 65535, got {args.port}"
    return check_run_limits(args)


def check_run_limits(args: argparse.Namespace) -> str | None:
    """What is wrong with the run caps, queue and workflows folder shared by `serve` and `mcp`, or None."""
    for flag, value in (("--max-concurrent-runs", args.max_concurrent_runs), ("--cap-lm-calls", args.cap_lm_calls),
                        ("--cap-tokens", args.cap_tokens), ("--cap-seconds", args.cap_seconds)):
        if value <= 0:
            return f"{flag} must be a positive number, got {value}"
    if args.max_queue < 0:
        return f"--max-queue must be 0 or more, got {args.max_queue}"
    for flag, value in (("--responses-retention", getattr(args, "responses_retention", 1.0)),
                        ("--responses-max-mb", getattr(args, "responses_max_mb", 1.0))):
        if not value > 0:
            return f"{flag} must be a positive number, got {value}"
    folder = Path(args.workflows).expanduser() if args.workflows else None
    if folder is not None and folder.exists() and not folder.is_dir():
        return f"--workflows {args.workflows} is a file; give the folder that holds your workflow .yaml files"
    return None


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    return sock


def _app(service: StudioService, config: ServeConfig, args: argparse.Namespace) -> Starlette:
    """The server's ASGI app: /v1, and with --mcp the MCP endpoint beside it."""
    from app.serve.server import build_server

    if not args.mcp:
        return build_server(service, config)
    from app.mcp.http import McpHttp

    endpoint = McpHttp(service, config, args.host)
    return build_server(service, config, extra_routes=endpoint.routes(), lifespan=endpoint.lifespan)


def _auto_problem(service: Any, name: str | None) -> str | None:
    """`--auto NAME` naming nothing served is a mistake to say at start, not on the first request."""
    if not name:
        return None
    from app.serve.catalog import find_model
    from app.serve.errors import ApiError

    try:
        find_model(service, service.policy, name)
    except ApiError as exc:
        return f"--auto {name}: {exc.message}"
    return None


def _banner(args: argparse.Namespace, service: Any, files: str, remote: str, keyed: bool) -> list[str]:
    """What serve prints as it starts: where each door is, what it serves, who may call it."""
    base = f"http://{f'[{args.host}]' if ':' in args.host else args.host}:{args.port}"
    return [f"OpenAI-compatible API: {base}/v1  ({len(service.list_workflows())} workflow(s) from "
            f"{service.workflows_dir}, {files})",
            f"Responses API: {base}/v1/responses  Anthropic Messages: {base}/v1/messages",
            *([f"MCP (streamable HTTP): {base}/mcp"] if args.mcp else []),
            "requests from other machines: " + remote,
            "API key required." if keyed else "No API key: only this machine may call it.",
            "Ctrl+C stops it."]


def _serve_config(args: argparse.Namespace, service: Any, keys: tuple[str, ...], origins: Any,
                  aliases: tuple[tuple[str, str], ...]) -> ServeConfig:
    """The routes' settings from the flags: the share-mode rules and caps for other machines, the run queue, keys,
    names and origins, aliases and the stored responses' retention."""
    from app.serve.config import ServeConfig, remote_policy_for
    from app.share.run_gate import RunGate

    remote = remote_policy_for(service.policy, allow_python=args.allow_python, models_folder=service.models_dir,
                               max_lm_calls=args.cap_lm_calls, max_tokens=args.cap_tokens,
                               max_seconds=args.cap_seconds, max_concurrent_runs=args.max_concurrent_runs,
                               max_queue=args.max_queue)
    return ServeConfig(remote_policy=remote, gate=RunGate(args.max_concurrent_runs, args.max_queue),
                       api_keys=keys, share_rules_everywhere=args.share_mode or env_share_mode(), auto=args.auto,
                       origins=origins, aliases=aliases, responses_retention_days=args.responses_retention,
                       responses_max_bytes=int(args.responses_max_mb * 1_000_000))


def cmd_serve(args: argparse.Namespace) -> int:
    from app.serve.catalog import model_files
    from app.serve.config import bind_problem, load_api_keys
    from app.serve.model_alias import parse_alias
    from app.serve.server import make_server
    from app.service.studio import StudioService
    from app.share.policy import SharePolicy

    problem = _check_numbers(args)
    if problem:
        return _fail(problem)
    fake_script, problem = fake_script_from_args(args)
    if problem:
        return _fail(problem)
    try:
        keys = load_api_keys(args.api_key, args.api_key_file)
        origins = origin_rules_from_args(args, args.host)
    except ValueError as exc:
        return _fail(str(exc))
    problem = bind_problem(args.host, keys)
    if problem:
        return _fail(problem)
    try:
        sock = _bind(args.host, args.port)
    except OSError as exc:
        print(f"error: {listen_error(args.host, args.port, exc)}", file=sys.stderr)
        return 1
    from app.platform.shutdown import install_forced_exit

    install_forced_exit()  # gone within seconds of SIGTERM / Ctrl+C, even when a stuck run holds the shutdown up
    service = StudioService(policy=SharePolicy.local(), workflows_dir=Path(args.workflows) if args.workflows else None,
                            trace_db=Path(args.db) if args.db else None, dry_run=args.dry_run,
                            fake_latency_s=max(0.0, args.fake_latency) if args.dry_run else 0.0,
                            fake_script=fake_script)
    problem = _auto_problem(service, args.auto)
    try:
        aliases = tuple(parse_alias(text) for text in args.alias)
    except ValueError as exc:
        problem = problem or str(exc)
    if problem:
        service.close()
        sock.close()
        return _fail(problem)
    config = _serve_config(args, service, keys, origins, aliases)
    server = make_server(_app(service, config, args), args.host, args.port, lifespan=args.mcp)
    for line in _banner(args, service, f"{len(model_files(service, service.policy))} model file(s)",
                        config.remote_policy.describe(), bool(keys)):
        print(line, file=sys.stderr, flush=True)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        service.close()
    return 0
