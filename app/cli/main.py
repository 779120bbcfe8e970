"""The `metagen` entry point: one parser with every command group, logging set-up and last-resort errors."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from types import ModuleType

from app.cli.exit_codes import EXIT_FAILED, EXIT_INVALID, EXIT_OK

COMMAND_GROUPS = ("run", "eval", "tune", "traces", "versions", "models", "ui", "serve", "mcp", "desktop", "doctor")
"""Modules of app.cli that add sub-commands through `register(subparsers)`, in the order `--help` lists them."""
LIGHT_COMMANDS = {"history": "versions", "diff": "versions", "restore": "versions", "publish": "versions"}
"""Commands whose group alone is loaded when they are run: `metagen diff FILE` is git's textconv, started once per
file version a `git log -p` shows, and `metagen history` answers in well under a second."""

log = logging.getLogger("metagen")


def _group(name: str) -> ModuleType:
    return importlib.import_module(f"app.cli.{name}")


def build_parser(groups: Sequence[str] = COMMAND_GROUPS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="metagen", description="Metagen Studio: meta-generation workflows "
                                     "on local llama.cpp models.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in groups:
        _group(name).register(sub)
    return parser


def _groups_for(argv: Sequence[str]) -> Sequence[str]:
    """Only the group of a light command (see LIGHT_COMMANDS), else every group."""
    command = next((a for a in argv if not a.startswith("-")), None)
    light = LIGHT_COMMANDS.get(command or "")
    return (light,) if light is not None and "-h" not in argv and "--help" not in argv else COMMAND_GROUPS


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_groups_for(given))
    args = parser.parse_args(given)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_INVALID
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # last resort: a message, never a traceback, unless --verbose
        if args.verbose:
            raise
        print(f"error: {exc} (run with -v for details)", file=sys.stderr)
        return EXIT_FAILED


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
