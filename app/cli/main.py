"""The `metagen` entry point: one parser with every command group, logging set-up and last-resort errors."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from types import ModuleType

from app.cli.exit_codes import EXIT_FAILED, EXIT_INVALID, EXIT_OK

LIGHT_COMMANDS = ("history", "diff", "restore", "publish")
"""Commands whose group alone is loaded when they are run (app.cli.versions): `metagen diff FILE` is git's
textconv, started once per file version a `git log -p` shows, and `metagen history` answers in well under a second."""

log = logging.getLogger("metagen")


def command_groups(light: bool = False) -> tuple[ModuleType, ...]:
    """Modules that add sub-commands through `register(subparsers)`, in the order `--help` lists them (`light`: the
    versions group alone, for LIGHT_COMMANDS)."""
    from app.cli import versions

    if light:
        return (versions,)
    from app.cli import desktop, doctor, mcp, models, replay, serve, traces, ui
    from app.cli import eval as eval_commands
    from app.cli import run as run_commands
    from app.cli import tune as tune_commands

    return (run_commands, eval_commands, tune_commands, traces, replay, versions, models, ui, serve, mcp, desktop,
            doctor)


def build_parser(groups: Sequence[ModuleType] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="metagen", description="Metagen Studio: meta-generation workflows "
                                     "on local llama.cpp models.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in groups if groups is not None else command_groups():
        group.register(sub)
    return parser


def _is_light(argv: Sequence[str]) -> bool:
    """A light command (see LIGHT_COMMANDS) not asking for the full help."""
    command = next((a for a in argv if not a.startswith("-")), None)
    return command in LIGHT_COMMANDS and "-h" not in argv and "--help" not in argv


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(command_groups(light=_is_light(given)))
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
