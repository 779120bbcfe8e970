"""--allowed-hosts and --allowed-origins of `metagen ui` and `metagen serve`: which Host names and page origins the
server answers besides this machine's own (app/serve/origin_guard.py)."""

from __future__ import annotations

import argparse
from typing import Any

from app.serve.origin_guard import OriginRules


def add_origin_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("which names and pages may reach the server (DNS rebinding, other web pages)")
    g.add_argument("--allowed-hosts", action="append", default=[], metavar="NAME[,NAME]",
                   help="Host names the server answers besides localhost, 127.0.0.1, ::1 and --host (a reverse "
                        "proxy's public name; `*` any); a request naming another host gets 421")
    g.add_argument("--allowed-origins", action="append", default=[], metavar="ORIGIN[,ORIGIN]",
                   help="web page origins (scheme://host[:port]) that may call the server and read its answers "
                        "(CORS); a request from any other origin gets 403")


def _split(values: list[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def origin_rules_from_args(args: Any, host: str, *, tunnel: bool = False) -> OriginRules:
    """The rules these flags give a server on `host`; ValueError saying which value is wrong."""
    return OriginRules.for_server(host, _split(getattr(args, "allowed_hosts", None) or []),
                                  _split(getattr(args, "allowed_origins", None) or []), tunnel=tunnel)
