"""`metagen models check`: contact a remote OpenAI-compatible server, list its models, say what it supports."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from app.cli.exit_codes import EXIT_FAILED, EXIT_INVALID, EXIT_OK
from app.cli.models_hub import register_hub_commands


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    group = subparsers.add_parser("models", help="get, list and check models (pull from the Hugging Face Hub, "
                                  "remote servers)", description="Local GGUF models (pull, list, search, rm, catalog) "
                                  "and models that Metagen runs on other servers (check: `source: openai` entries).")
    sub = group.add_subparsers(dest="models_command", metavar="SUBCOMMAND")
    group.set_defaults(func=lambda args: _usage(group))
    p = sub.add_parser("check", help="contact a server: its models and what it supports",
                       description="Contact an OpenAI-compatible server, list its models and probe what it supports "
                                   "for one of them (n, logprobs, grammars, JSON schemas, scoring, judges, streaming). "
                                   "SPEC is the server's base URL (http://HOST:PORT/v1) or a workflow file, whose "
                                   "`source: openai` models are checked.")
    p.add_argument("spec", metavar="SPEC", help="a base URL such as http://127.0.0.1:8000/v1, or a workflow file")
    p.add_argument("--model", default=None, metavar="NAME", help="with a URL: the model to probe (default: the "
                   "first the server lists)")
    p.add_argument("--api-key-env", default=None, metavar="VAR", help="with a URL: the environment variable that "
                   "holds the server's API key")
    p.add_argument("--timeout", type=int, default=60, metavar="SECONDS", help="wait this long for each answer "
                   "(default 60)")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.set_defaults(func=cmd_check)
    register_hub_commands(sub)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return EXIT_INVALID


def _targets(args: argparse.Namespace) -> list[tuple[str, Any]]:
    """(label, spec) of each server to check; ValueError with a message when SPEC is neither URL nor workflow."""
    from app.workflow.model_specs import model_specs
    from app.workflow.problems import WorkflowError, errors
    from app.workflow.spec import load_workflow
    from backends.base import ModelSpec

    spec = str(args.spec).strip()
    if spec.startswith(("http://", "https://")):
        return [(spec, ModelSpec(source="openai", base_url=spec, model=args.model, api_key_env=args.api_key_env))]
    if not Path(spec).expanduser().is_file():
        raise ValueError(f"{spec!r} is neither a server URL (http://HOST:PORT/v1) nor a workflow file")
    try:
        wf = load_workflow(str(Path(spec).expanduser()))
    except WorkflowError as exc:
        raise ValueError("; ".join(i.format(spec) for i in exc.issues)) from None
    from app.workflow.validation import validate
    from nodes.registry import default_registry

    bad = [i for i in errors(validate(wf, default_registry())) if i.code == "bad_model"]
    if bad:
        raise ValueError("; ".join(i.format(spec) for i in bad))
    remote = [(alias, s) for alias, s in model_specs(wf).items() if s.source == "openai"]
    if not remote:
        raise ValueError(f"{spec} has no `source: openai` model to check")
    return [target for alias, s in remote for target in _servers_of(f"{Path(spec).name}: model {alias!r}", s)]


def _servers_of(label: str, spec: Any) -> list[tuple[str, Any]]:
    """One target per server: a model on several servers (`base_url` a list) is checked on each of them."""
    from dataclasses import replace

    if not spec.replicas:
        return [(label, spec)]
    count = len(spec.replicas)
    return [(f"{label} server {i + 1}/{count}", replace(spec, base_url=url, replicas=()))
            for i, (url, _) in enumerate(spec.replicas)]


def _table(rows: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k:<{width}}  {v}" for k, v in rows)


def cmd_check(args: argparse.Namespace) -> int:
    from backends.base import BackendError
    from backends.remote.openai_caps import check_server

    try:
        targets = _targets(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    worst = EXIT_OK
    found: list[dict[str, Any]] = []
    for label, spec in targets:
        try:
            caps = check_server(spec.base_url, spec.model, spec.api_key_env, timeout_s=args.timeout)
        except BackendError as exc:
            print(f"{label}: down: {exc}", file=sys.stderr)
            found.append({"target": label, "base_url": spec.base_url, "up": False, "error": str(exc)})
            worst = EXIT_FAILED
            continue
        found.append({"target": label, "base_url": spec.base_url, "up": True, **caps.to_json()})
        if args.json:
            continue
        print(f"{label}\n  server {spec.base_url} ({caps.server}): up, probed in {caps.probe_s:.1f}s")
        print(f"  models: {', '.join(caps.models) or '(none listed)'}")
        print(f"  what {caps.model!r} supports here:")
        print(_table(caps.rows()[1:]))
        for note in caps.notes:
            print(f"  note: {note}")
    if args.json:
        print(json.dumps(found, indent=2))
    return worst
