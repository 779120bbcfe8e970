"""`metagen desktop`: the studio in its own window on this computer (see app.desktop.window)."""

from __future__ import annotations

import argparse
import logging
import sys

from app.desktop.window import DesktopOptions, Studio, run_desktop

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "desktop", help="open the studio in a desktop window (local only)",
        description="Open Metagen Studio in a native window, served on 127.0.0.1 only. Falls back to your "
                    "browser when no window can be made (pip install 'metagen-studio[desktop]' for the window). "
                    "One instance per data folder: a second start brings the first one to the front.")
    p.add_argument("--port", type=int, default=None, help="local port (default: a free one)")
    p.add_argument("--no-window", action="store_true", help="do not open a native window; use the browser")
    p.add_argument("--no-browser", action="store_true",
                   help="when no window is made, print the URL instead of opening a browser")
    p.add_argument("--dry-run", action="store_true", help="run workflows on the fake model (no llama.cpp)")
    p.set_defaults(func=cmd_desktop)


def _say(message: str) -> None:
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


def studio_factory(dry_run: bool = False):  # type: ignore[no-untyped-def]
    """Builds the same app as `metagen ui`, in local mode (the desktop never serves beyond this computer)."""

    def build() -> Studio:
        from app.service.studio import StudioService
        from app.share.policy import SharePolicy
        from app.ui.app import build_app, launch_kwargs

        service = StudioService(policy=SharePolicy.local(), dry_run=dry_run)
        return Studio(blocks=build_app(service), launch_kwargs=launch_kwargs(service), close=service.close)

    return build


def cmd_desktop(args: argparse.Namespace) -> int:
    if args.port is not None and not 0 < args.port < 65536:
        sys.stderr.write(f"error: --port must be between 1 and 65535, got {args.port}\n")
        return 2
    opts = DesktopOptions(port=args.port, window=not args.no_window, browser=not args.no_browser)
    return run_desktop(studio_factory(dry_run=args.dry_run), opts, _say)
