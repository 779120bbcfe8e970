"""The `metagen` entry point: one parser with every command group, logging set-up and last-resort errors."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from app.cli import desktop, doctor, mcp, models, serve, traces, ui, versions
from app.cli import eval as eval_commands
from app.cli import run as run_commands
from app.cli import tune as tune_commands
from app.cli.exit_codes import EXIT_FAILED, EXIT_INVALID, EXIT_OK

COMMAND_GROUPS = (run_commands, eval_commands, tune_commands, traces, versions, models, ui, serve, mcp, desktop, doctor)
"""Modules that add sub-commands through `register(subparsers)`, in the order `--help` lists them."""

log = logging.getLogger("metagen")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="metagen", description="Metagen Studio: meta-generation workflows "
                                     "on local llama.cpp models.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in COMMAND_GROUPS:
        group.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
