"""HTTP to a remote OpenAI-compatible server: pooled connections, retries with backoff, streaming, clear errors.

Every answer is read within bounds (backends/remote/bounded_io.py): MAX_ANSWER_BYTES for a JSON answer, which must
arrive whole within timeout_s; MAX_STREAM_BYTES and MAX_LINE_BYTES for a stream; and the run's cancel (or the
`bounded()` scope's cancel and deadline, e.g. the capability probe's) stops a send or a read at once."""

from __future__ import annotations

import contextlib
import email.utils
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx

from backends.base import BackendError, CancelToken
from backends.remote.bounded_io import DeadlineError, TooLargeError, interruptible, iter_chunks, iter_lines, read_body

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 502, 503, 504})
"""Answers worth another try: rate limits and a busy or restarting server (or its proxy)."""
MAX_ATTEMPTS = 5
CONNECT_ATTEMPTS = 3
"""Tries at a server that refuses connections (a restart takes a moment; nothing listening stays so)."""
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 8.0
RETRY_AFTER_MAX_S = 60.0
"""The longest Retry-After honoured; a server asking for more gets this much."""
CONNECT_TIMEOUT_MAX_S = 10.0
DEFAULT_TIMEOUT_S = 300
MAX_ANSWER_BYTES = 32 << 20
"""The largest JSON answer read (a bigger one is refused, and counts as the server's failure)."""
MAX_STREAM_BYTES = 64 << 20
MAX_LINE_BYTES = 1 << 20
"""The longest line of a streamed answer."""
MAX_ERROR_BYTES = 64 << 10
"""What is read of an error answer (for its message)."""
_ROOT_SUFFIX = re.compile(r"/v1/?$")


class RemoteStatusError(BackendError):
    """The server answered with an HTTP error status (kept in `status`)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ServerUnreachableError(BackendError):
    """The server could not be reached, gave no answer in time or dropped the connection (it may be down)."""


class MalformedAnswerError(BackendError):
    """The server answered with success but not with what the API promises (not JSON, or too large)."""


def server_down(exc: BaseException) -> bool:
    """True when `exc` says the server itself is unwell (unreachable, timed out, dropped, 5xx, an answer that is
    not JSON or too large): a replica to take out; False for errors of the request (4xx), which another server would
    repeat."""
    return isinstance(exc, ServerUnreachableError | MalformedAnswerError) or (
        isinstance(exc, RemoteStatusError) and exc.status >= 500)


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date), capped; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return min(max(seconds, 0.0), RETRY_AFTER_MAX_S)


def backoff_s(attempt: int) -> float:
    """Exponential backoff with jitter for the attempt that just failed (0-based)."""
    base = min(BACKOFF_MAX_S, BACKOFF_BASE_S * (2 ** attempt))
    return base * (0.8 + 0.4 * random.random())


def sleep_unless_cancelled(seconds: float, cancel: CancelToken | None) -> None:
    end = time.monotonic() + seconds
    while True:
        if cancel is not None:
            cancel.raise_if_cancelled()
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(0.05, left))


def _server_message(raw: bytes) -> str:
    """The error text of an error answer (OpenAI's {"error": {"message"}}, FastAPI's {"detail"}, or plain text)."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return raw.decode("utf-8", errors="replace").strip()[:300]
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:500]
        if isinstance(error, str):
            return error[:500]
        if body.get("detail"):
            return str(body["detail"])[:500]
        if body.get("message"):
            return str(body["message"])[:500]
    return json.dumps(body)[:300]


class RemoteHttp:
    """One server's connection pool. Thread-safe: requests from many threads share the pool (httpx.Client).
    The API key is read from `api_key_env` at each request and is never put in a message or a log line."""

    def __init__(self, base_url: str, api_key_env: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                 max_connections: int = 16, max_attempts: int = MAX_ATTEMPTS) -> None:
        self.base_url = base_url.strip().rstrip("/")
        self.root_url = _ROOT_SUFFIX.sub("", self.base_url) or self.base_url
        self.api_key_env = api_key_env
        self.timeout_s = float(timeout_s)
        self.max_attempts = max(1, max_attempts)
        timeout = httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, CONNECT_TIMEOUT_MAX_S))
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._client = httpx.Client(timeout=timeout, limits=limits, headers={"User-Agent": "metagen-studio"})
        self._scope = threading.local()

    @contextlib.contextmanager
    def bounded(self, cancel: CancelToken | None = None, seconds: float | None = None) -> Iterator[None]:
        """Requests of this thread inside the block (that name no cancel of their own) stop on `cancel` and, with
        `seconds`, at that deadline (e.g. the capability probe, whatever its callers pass)."""
        old = getattr(self._scope, "value", (None, None))
        deadline = time.monotonic() + seconds if seconds is not None else None
        if old[1] is not None:
            deadline = old[1] if deadline is None else min(deadline, old[1])
        self._scope.value = (cancel or old[0], deadline)
        try:
            yield
        finally:
            self._scope.value = old

    def _bounds(self, cancel: CancelToken | None, whole: bool) -> tuple[CancelToken | None, float | None]:
        """(cancel, deadline) of a request: its own cancel else the scope's; a JSON answer (`whole`) must arrive
        within timeout_s."""
        scope_cancel, deadline = getattr(self._scope, "value", (None, None))
        if whole:
            mine = time.monotonic() + self.timeout_s
            deadline = mine if deadline is None else min(deadline, mine)
        return cancel or scope_cancel, deadline

    # -- secrets -----------------------------------------------------------------------------------------

    def _key(self) -> str | None:
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise BackendError(f"api_key_env names ${self.api_key_env}, which is not set; export "
                               f"{self.api_key_env}=<your key> in the environment that starts Metagen.")
        return key

    def redact(self, text: str) -> str:
        """`text` with the API key (if any) masked: server messages sometimes echo what they were sent."""
        key = os.environ.get(self.api_key_env or "") if self.api_key_env else None
        return text.replace(key, "***") if key and len(key) >= 4 else text

    def _headers(self) -> dict[str, str]:
        key = self._key()
        return {"Authorization": f"Bearer {key}"} if key else {}

    # -- errors ------------------------------------------------------------------------------------------

    def _url(self, path: str, root: bool) -> str:
        return (self.root_url if root else self.base_url) + path

    def status_error(self, response: httpx.Response, path: str, body: bytes = b"") -> RemoteStatusError:
        status = response.status_code
        detail = self.redact(_server_message(body))
        where = f"the server at {self.base_url}"
        if status in (401, 403):
            if self.api_key_env:
                text = (f"{where} refused the API key ({status}: {detail}); set ${self.api_key_env} to a valid "
                        "key for this server.")
            else:
                text = (f"{where} wants an API key ({status}: {detail}); put the key in an environment variable "
                        "and name it in the model entry with `api_key_env: VARIABLE`.")
        elif status == 404:
            text = (f"{where} has no {path} ({status}: {detail}); check base_url (it usually ends in /v1) and "
                    "the model name (`metagen models check URL` lists the server's models).")
        elif status == 429:
            text = (f"{where} kept answering 429 (too many requests: {detail}) after {self.max_attempts} "
                    "attempts; lower max_concurrency or try again later.")
        elif status >= 500:
            text = f"{where} failed on {path} ({status}: {detail})."
        else:
            text = f"{where} refused the request to {path} ({status}: {detail})."
        return RemoteStatusError(text, status)

    def connect_error(self, exc: Exception) -> BackendError:
        return ServerUnreachableError(f"could not connect to {self.base_url} — is the server running? "
                                      f"({type(exc).__name__}: {self.redact(str(exc)) or 'no detail'})")

    def timeout_error(self, path: str) -> BackendError:
        return ServerUnreachableError(f"no answer from {self.base_url}{path} within timeout_s={self.timeout_s:g} "
                                      "seconds; the server may be overloaded or stuck. Raise timeout_s in the model "
                                      "entry or check the server.")

    def too_large_error(self, path: str, limit: int) -> BackendError:
        return MalformedAnswerError(f"the server at {self.base_url} answered {path} with more than {limit >> 20} MB "
                                    "(or a line longer than that); refused unread. Is base_url an OpenAI-compatible "
                                    "API?" if limit >= 1 << 20 else
                                    f"the server at {self.base_url} answered {path} with more than {limit:,} bytes")

    def dropped_error(self, exc: Exception) -> BackendError:
        return ServerUnreachableError(f"the server at {self.base_url} closed the connection in the middle of an "
                                      f"answer ({type(exc).__name__}); did it stop, crash or restart? Check its log, "
                                      "then run again.")

    # -- requests ----------------------------------------------------------------------------------------

    def _send(self, method: str, path: str, body: Any, cancel: CancelToken | None, deadline: float | None, *,
              root: bool, attempts: int | None) -> httpx.Response:
        """One response with a success status (its body unread), after retrying 429/502/503/504 and failed
        connections; cancel and the deadline stop the wait for it at once."""
        tries = self.max_attempts if attempts is None else max(1, attempts)
        url = self._url(path, root)
        for attempt in range(tries):
            if cancel is not None:
                cancel.raise_if_cancelled()
            last = attempt + 1 >= tries
            try:
                request = self._client.build_request(method, url, json=body, headers=self._headers())
                response = interruptible(lambda r=request: self._client.send(r, stream=True), cancel, deadline,
                                         late=lambda r: r.close())
            except DeadlineError:
                raise self.timeout_error(path) from None
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if last or attempt + 1 >= CONNECT_ATTEMPTS:
                    raise self.connect_error(exc) from None
                log.debug("connect to %s failed (%s); retrying", self.base_url, type(exc).__name__)
                sleep_unless_cancelled(backoff_s(attempt), cancel)
                continue
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                if last:
                    raise self.dropped_error(exc) from None
                sleep_unless_cancelled(backoff_s(attempt), cancel)
                continue
            except (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout):
                raise self.timeout_error(path) from None
            except httpx.HTTPError as exc:
                raise BackendError(f"request to {self.base_url}{path} failed: {type(exc).__name__}: "
                                   f"{self.redact(str(exc))}") from None
            if response.status_code < 400:
                return response
            if response.status_code in RETRY_STATUSES and not last:
                wait = retry_after_s(response.headers.get("retry-after"))
                response.close()
                wait = backoff_s(attempt) if wait is None else wait
                log.info("%s answered %s; retrying in %.2fs", self.base_url, response.status_code, wait)
                sleep_unless_cancelled(wait, cancel)
                continue
            raise self.status_error(response, path, self._error_body(response, cancel, deadline))
        raise AssertionError("unreachable")  # pragma: no cover

    def _error_body(self, response: httpx.Response, cancel: CancelToken | None, deadline: float | None) -> bytes:
        """The first MAX_ERROR_BYTES of an error answer (for its message); the response is closed."""
        got = b""
        try:
            for chunk in iter_chunks(response, cancel, deadline, 1 << 62):
                got += chunk
                if len(got) >= MAX_ERROR_BYTES:
                    break
        except (httpx.HTTPError, DeadlineError):
            pass
        finally:
            response.close()
        return got[:MAX_ERROR_BYTES]

    def get_json(self, path: str, cancel: CancelToken | None = None, *, root: bool = False,
                 attempts: int | None = None) -> Any:
        return self._request_json("GET", path, None, cancel, root, attempts)

    def post_json(self, path: str, body: dict[str, Any], cancel: CancelToken | None = None, *, root: bool = False,
                  attempts: int | None = None) -> Any:
        return self._request_json("POST", path, body, cancel, root, attempts)

    def _request_json(self, method: str, path: str, body: Any, cancel: CancelToken | None, root: bool,
                      attempts: int | None) -> Any:
        cancel, deadline = self._bounds(cancel, whole=True)
        response = self._send(method, path, body, cancel, deadline, root=root, attempts=attempts)
        try:
            raw = read_body(response, cancel, deadline, MAX_ANSWER_BYTES)
        except TooLargeError as exc:
            raise self.too_large_error(path, exc.limit) from None
        except (DeadlineError, httpx.ReadTimeout):
            raise self.timeout_error(path) from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise self.dropped_error(exc) from None
        return self._json(raw, path)

    def _json(self, raw: bytes, path: str) -> Any:
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            glimpse = raw[:120].decode("utf-8", errors="replace")
            raise MalformedAnswerError(f"the server at {self.base_url} answered {path} with something that is not "
                                       f"JSON ({glimpse!r}); is base_url an OpenAI-compatible API?") from None

    @contextlib.contextmanager
    def stream(self, path: str, body: dict[str, Any], cancel: CancelToken | None = None,
               attempts: int | None = None) -> Iterator[Iterator[dict[str, Any]]]:
        """The server-sent events of a streamed request, parsed (`data: {...}` lines until `data: [DONE]`).
        Leaving the block closes the connection, which is how a server learns to stop generating."""
        cancel, deadline = self._bounds(cancel, whole=False)
        response = self._send("POST", path, body, cancel, deadline, root=False, attempts=attempts)
        try:
            yield self._events(response, path, cancel, deadline)
        finally:
            response.close()

    def _events(self, response: httpx.Response, path: str, cancel: CancelToken | None,
                deadline: float | None) -> Iterator[dict[str, Any]]:
        try:
            for line in iter_lines(iter_chunks(response, cancel, deadline, MAX_STREAM_BYTES), MAX_LINE_BYTES):
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                try:
                    event = json.loads(data)
                except (json.JSONDecodeError, RecursionError):
                    raise MalformedAnswerError(f"the server at {self.base_url} streamed a line that is not JSON: "
                                               f"{data[:120]!r}") from None
                if isinstance(event, dict) and event.get("error"):
                    error = event["error"]
                    text = error.get("message") if isinstance(error, dict) else str(error)
                    raise BackendError(f"the server at {self.base_url} stopped the answer with an error: "
                                       f"{self.redact(str(text))[:500]}")
                if isinstance(event, dict):
                    yield event
        except TooLargeError as exc:
            raise self.too_large_error(path, exc.limit) from None
        except (httpx.ReadTimeout, DeadlineError):
            raise self.timeout_error(path) from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise self.dropped_error(exc) from None
        except httpx.StreamClosed:
            return

    def close(self) -> None:
        self._client.close()
