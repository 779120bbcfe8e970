"""Server functions for the browser: one JSON payload in, the service's answer or {error: message} out."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from app.service.errors import UserError
from app.service.studio import StudioService

log = logging.getLogger(__name__)

ServiceCall = Callable[[StudioService, dict[str, Any]], Any]


def endpoint(fn: ServiceCall, service: StudioService) -> Callable[[Any], Any]:
    """Wrap a service call for the browser. A problem the user can fix (UserError, ValueError) comes back as
    {error: its message}; anything else is logged with its traceback and answered with its type only, so no
    internal detail reaches a visitor of a shared app."""

    def call(payload: Any = None) -> Any:
        try:
            return fn(service, payload if isinstance(payload, dict) else {})
        except (UserError, ValueError) as exc:
            return {"error": str(exc)}
        except Exception as exc:
            log.exception("%s failed", fn.__name__)
            return {"error": f"something went wrong ({type(exc).__name__}); see the app log for details"}

    # the browser calls it by this name; no functools.wraps: Gradio would read the wrapped signature
    call.__name__ = call.__qualname__ = fn.__name__
    call.__doc__ = fn.__doc__
    return call
