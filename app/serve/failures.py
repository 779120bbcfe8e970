"""Any failure of a served request, run or tool call as the coded API error the doors answer (one mapping for the
/v1 routes, a served answer's job and MCP's tool results)."""

from __future__ import annotations

import logging

from app.serve.catalog import invalid_workflow
from app.serve.errors import ApiError
from app.workflow.problems import WorkflowError
from backends.base import BackendError, CancelledError, EngineStoppedError

log = logging.getLogger(__name__)


def backend_error(exc: BackendError) -> ApiError:
    """An engine's refusal: the request's fault (400, a context overflow coded as OpenAI codes it), or the server's
    when the engine's process stopped (500)."""
    text = str(exc)
    if isinstance(exc, EngineStoppedError):  # the engine's process stopped: the server's fault, not the request's
        return ApiError(500, text, code="engine_stopped")
    param = "response_format" if "json_schema" in text or "grammar" in text else None
    code = "context_length_exceeded" if "context" in text.lower() else "invalid_request"
    return ApiError(400, text, param=param, code=code)


def api_error(exc: BaseException, during: str = "a request") -> ApiError:
    """The coded error for any failure; an unexpected one is logged with its traceback (`during` says where) and
    answered as a 500 that names the exception, never the traceback."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, WorkflowError):
        return invalid_workflow("the workflow", exc.issues)
    if isinstance(exc, BackendError):
        return backend_error(exc)
    if isinstance(exc, CancelledError):
        return ApiError(503, f"the run was stopped: {exc}", code="request_cancelled")
    log.error("%s crashed", during, exc_info=exc)
    return ApiError(500, f"the server hit an unexpected error: {type(exc).__name__}: {exc}", code="server_error")
