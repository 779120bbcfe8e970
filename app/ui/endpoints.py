"""Server functions for the browser: one JSON payload in, the service's answer or {error: message} out."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

import gradio as gr

from app.service.errors import UserError
from app.service.studio import StudioService

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


def endpoint(fn: ServiceCall, service: StudioService) -> Callable[[Any], Any]:
    """Wrap a service call for the browser. A problem the user can fix (UserError, ValueError) comes back as
    {error: its message}; anything else is logged with its traceback and answered with its type only, so no
    internal detail reaches a visitor of a shared app. Gradio passes the request, whose session hash becomes
    the payload's `_visitor` (share mode keeps each visitor's runs, traces and saves apart)."""

    def call(payload: Any = None, request: gr.Request = None) -> Any:  # type: ignore[assignment]
        data = dict(payload) if isinstance(payload, dict) else {}
        visitor = visitor_of(request)
        if visitor is None and service.share_mode:  # no session: a visitor of its own, sharing nothing
            log.warning("%s: a call without a Gradio session in share mode", fn.__name__)
            visitor = f"no-session-{uuid.uuid4().hex}"
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
