"""`--fake-script FILE`: the scripted replies of `--dry-run`'s fake model for a whole server (`ui`, `serve`, `mcp`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.run.fake_script import FakeScript


def add_fake_script_argument(parser: Any) -> None:
    parser.add_argument("--fake-script", default=None, metavar="FILE",
                        help="with --dry-run: the fake model's replies, a JSON or YAML file {by_prompt: {TEXT: "
                             "REPLY}, replies: [REPLY, ...]} (the first TEXT found in the prompt picks its reply, "
                             "else the replies in turn; a reply may be a JSON object: a tool call {\"tool_calls\": "
                             "[...]}); see docs/agents.md")


def fake_script_from_args(args: argparse.Namespace) -> tuple[FakeScript | None, str | None]:
    """(the script, None), (None, None) without --fake-script, or (None, what is wrong)."""
    path = getattr(args, "fake_script", None)
    if not path:
        return None, None
    if not args.dry_run:
        return None, "--fake-script scripts the fake model of --dry-run: add --dry-run (or drop --fake-script)"
    from app.run.fake_script import FakeScriptError, load_fake_script

    try:
        return load_fake_script(path), None
    except FakeScriptError as exc:
        return None, str(exc)
