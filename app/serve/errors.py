"""API errors in the OpenAI shape: `{"error": {"message", "type", "param", "code"}}` with their HTTP status."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "permission_error",
         404: "invalid_request_error", 405: "invalid_request_error", 413: "invalid_request_error",
         429: "rate_limit_error", 500: "server_error", 503: "server_error"}
"""The error `type` for each status (OpenAI's own values where it has one)."""

RETRY_AFTER_S = 5
"""What a 429 asks the client to wait before trying again."""


class ApiError(Exception):
    """A request that ends with an error response; `extra` adds fields (validation issues, node, cause)."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 extra: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.extra = dict(extra or {})
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": TYPES.get(self.status, "server_error"),
                          "param": self.param, "code": self.code, **self.extra}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def bad_param(param: str, message: str, code: str = "invalid_value") -> ApiError:
    """A 400 naming the request field at fault."""
    return ApiError(400, message, param=param, code=code)


def queue_full(message: str) -> ApiError:
    return ApiError(429, message, code="rate_limit_exceeded", headers={"Retry-After": str(RETRY_AFTER_S)})


async def route_error(request: Request, exc: Exception) -> Response:
    """An unknown path or method, in the OpenAI shape (the exception handler of the apps)."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    what = {404: f"no route {request.url.path}: this server answers GET /v1/models, POST /v1/chat/completions "
                 "and POST /v1/completions",
            405: f"{request.method} is not allowed on {request.url.path}"}.get(status, "the server hit an error")
    return ApiError(status, what, code={404: "not_found", 405: "method_not_allowed"}.get(status)).response()
