"""Server functions for the browser: one JSON payload in, the service's answer or {error: message} out."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import gradio as gr

from app.service.errors import UserError
from app.service.studio import StudioService
from app.share.policy import is_loopback_host

log = logging.getLogger(__name__)

ServiceCall = Callable[[StudioService, dict[str, Any]], Any]

VISITOR_KEY = "_visitor"
"""The payload key under which every call receives its visitor: the Gradio session of the browser tab."""


def visitor_of(request: Any) -> str | None:
    """The visitor behind a request: its Gradio session hash, the one the Traces tab's events carry too.
    Event handlers get a gr.Request with `session_hash`; server functions of gr.HTML get the raw starlette
    request of Gradio's /component_server route, whose JSON body (already read, and cached by starlette)
    holds the same `session_hash`."""
    session = getattr(request, "session_hash", None)
    if session:
        return str(session)
    body = getattr(request, "_json", None)  # starlette's cache of `await request.json()`
    if isinstance(body, dict) and body.get("session_hash"):
        return str(body["session_hash"])
    return None


def client_address(request: Any) -> str | None:
    """The address a request came from. Behind a proxy on this machine (Gradio's share tunnel connects from
    loopback) the last X-Forwarded-For hop, the one the proxy added, names the caller."""
    client = getattr(request, "client", None)
    host = str(getattr(client, "host", "") or "") or None
    headers = getattr(request, "headers", None)
    forwarded = headers.get("x-forwarded-for") if headers is not None and hasattr(headers, "get") else None
    if forwarded and (host is None or is_loopback_host(host)):
        last = str(forwarded).split(",")[-1].strip()
        return last or host
    return host


def visitor_for(service: StudioService, request: Any) -> str | None:
    """The visitor a browser call is made for: its Gradio session (local mode); in share mode the identity
    `service.visitors` gives its session and client address (app/share/visitors.py: no session, or more sessions
    than one address may hold, and the call is its address's visitor, the same on every call). No request at all
    (the app's own callers, tests) is None in local mode."""
    session = visitor_of(request)
    if not service.share_mode:
        return session
    if session is None:
        log.info("a call without a Gradio session in share mode: the visitor of its client address")
    return service.visitors.identify(session, client_address(request))


def endpoint(fn: ServiceCall, service: StudioService) -> Callable[[Any], Any]:
    """Wrap a service call for the browser. A problem the user can fix (UserError, ValueError) comes back as
    {error: its message}; anything else is logged with its traceback and answered with its type only, so no
    internal detail reaches a visitor of a shared app. Gradio passes the request, whose session hash becomes
    the payload's `_visitor` (share mode keeps each visitor's runs, traces and saves apart)."""

    def call(payload: Any = None, request: gr.Request = None) -> Any:  # type: ignore[assignment]
        data = dict(payload) if isinstance(payload, dict) else {}
        visitor = visitor_for(service, request)
        data[VISITOR_KEY] = visitor  # set here, never taken from the browser's payload
        try:
            return fn(service, data)
        except (UserError, ValueError) as exc:
            return {"error": str(exc)}
        except Exception as exc:
            log.exception("%s failed", fn.__name__)
            return {"error": f"something went wrong ({type(exc).__name__}); see the app log for details"}

    # the browser calls it by this name; no functools.wraps: Gradio would read the wrapped signature
    call.__name__ = call.__qualname__ = fn.__name__
    call.__doc__ = fn.__doc__
    return call
