"""The remote client's HTTP layer against real local HTTP servers (stdlib http.server in a thread): retries on 429
honouring Retry-After, give-up messages, timeouts, cancel during a wait, and the API key kept out of messages."""

from __future__ import annotations

import email.utils
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from backends.base import BackendError, CancelledError, CancelToken
from backends.remote.openai_http import RETRY_AFTER_MAX_S, RemoteHttp, retry_after_s
from tests.remote.conftest import API_KEY, KEY_ENV, free_port

Handler = Callable[[BaseHTTPRequestHandler, int], None]
"""handle(request, n) answers the n-th request (0-based)."""


class Stub:
    def __init__(self, handle: Handler) -> None:
        self.handle = handle
        self.seen: list[dict[str, Any]] = []
        stub = self

        class _Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                stub.seen.append({"at": time.monotonic(), "path": self.path, "body": body,
                                  "auth": self.headers.get("Authorization")})
                stub.handle(self, len(stub.seen) - 1)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def reply(request: BaseHTTPRequestHandler, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
    data = json.dumps(body).encode()
    try:
        request.send_response(status)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            request.send_header(key, value)
        request.end_headers()
        request.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):  # the client gave up first (the timeout test)
        pass


@pytest.fixture
def stub() -> Iterator[Callable[[Handler], Stub]]:
    made: list[Stub] = []

    def make(handle: Handler) -> Stub:
        made.append(Stub(handle))
        return made[-1]

    yield make
    for s in made:
        s.close()


ANSWER = {"choices": [{"index": 0, "text": "ok", "finish_reason": "stop"}], "usage": {"prompt_tokens": 3}}


def test_429_with_retry_after_is_retried_after_the_wait_then_answers(stub: Callable[[Handler], Stub]) -> None:
    def handle(request: BaseHTTPRequestHandler, n: int) -> None:
        if n < 2:
            reply(request, 429, {"error": {"message": "slow down"}}, {"Retry-After": "1"})
        else:
            reply(request, 200, ANSWER)

    server = stub(handle)
    http = RemoteHttp(server.base_url, KEY_ENV)
    started = time.monotonic()
    assert http.post_json("/completions", {"prompt": "x"}) == ANSWER
    assert len(server.seen) == 3
    gaps = [b["at"] - a["at"] for a, b in zip(server.seen, server.seen[1:], strict=False)]
    assert all(gap >= 0.95 for gap in gaps), gaps  # Retry-After: 1 honoured each time
    assert time.monotonic() - started < 10
    assert {s["auth"] for s in server.seen} == {f"Bearer {API_KEY}"}  # the key goes in the header, from the env
    http.close()


def test_a_server_that_keeps_refusing_gets_a_clear_message(stub: Callable[[Handler], Stub]) -> None:
    server = stub(lambda request, n: reply(request, 429, {"error": {"message": "quota"}}, {"Retry-After": "0"}))
    http = RemoteHttp(server.base_url, max_attempts=3)
    with pytest.raises(BackendError, match=r"kept answering 429 .* after 3 attempts; lower max_concurrency"):
        http.post_json("/completions", {})
    assert len(server.seen) == 3
    http.close()


def test_503_without_retry_after_backs_off_and_recovers(stub: Callable[[Handler], Stub]) -> None:
    server = stub(lambda request, n: reply(request, 503, {"detail": "loading"}) if n == 0 else
                  reply(request, 200, ANSWER))
    http = RemoteHttp(server.base_url)
    assert http.post_json("/completions", {}) == ANSWER
    assert 0.3 <= server.seen[1]["at"] - server.seen[0]["at"] < 3  # backoff: 0.5 s ± 20 %
    http.close()


def test_the_api_key_is_masked_when_a_server_echoes_it(stub: Callable[[Handler], Stub]) -> None:
    server = stub(lambda request, n: reply(request, 401, {"error": {"message": f"bad key {API_KEY}"}}))
    http = RemoteHttp(server.base_url, KEY_ENV)
    with pytest.raises(BackendError) as caught:
        http.post_json("/completions", {})
    assert API_KEY not in str(caught.value)
    assert f"refused the API key (401: bad key ***); set ${KEY_ENV}" in str(caught.value)
    http.close()


def test_a_slow_server_hits_timeout_s(stub: Callable[[Handler], Stub]) -> None:
    def handle(request: BaseHTTPRequestHandler, n: int) -> None:
        time.sleep(3)
        reply(request, 200, ANSWER)

    server = stub(handle)
    http = RemoteHttp(server.base_url, timeout_s=1)
    started = time.monotonic()
    with pytest.raises(BackendError, match=r"within timeout_s=1 seconds"):
        http.post_json("/completions", {})
    assert time.monotonic() - started < 2.5
    assert len(server.seen) == 1  # a timeout is not retried: the server may still be working on it
    http.close()


def test_cancel_stops_a_retry_wait(stub: Callable[[Handler], Stub]) -> None:
    server = stub(lambda request, n: reply(request, 429, {}, {"Retry-After": "30"}))
    http = RemoteHttp(server.base_url)
    cancel = CancelToken()
    threading.Timer(0.3, cancel.cancel, args=("stop",)).start()
    started = time.monotonic()
    with pytest.raises(CancelledError):
        http.post_json("/completions", {}, cancel)
    assert time.monotonic() - started < 2
    http.close()


def test_nothing_listening_says_so() -> None:
    http = RemoteHttp(f"http://127.0.0.1:{free_port()}/v1", max_attempts=2)
    with pytest.raises(BackendError, match=r"could not connect to http://127\.0\.0\.1:\d+/v1 — is the server "
                                           r"running\?"):
        http.get_json("/models")
    http.close()


def test_an_unset_key_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV)
    http = RemoteHttp(f"http://127.0.0.1:{free_port()}/v1", KEY_ENV)
    with pytest.raises(BackendError, match=rf"api_key_env names \${KEY_ENV}, which is not set"):
        http.get_json("/models")
    http.close()


def test_retry_after_reads_seconds_and_dates_and_is_capped() -> None:
    now = time.time()
    assert retry_after_s("2") == 2.0
    assert retry_after_s(" 0.5 ") == 0.5
    assert retry_after_s("-3") == 0.0
    assert retry_after_s("100000") == RETRY_AFTER_MAX_S
    assert retry_after_s(email.utils.formatdate(now + 5, usegmt=True), now=now) == pytest.approx(5, abs=1)
    assert retry_after_s("soon") is None
    assert retry_after_s(None) is None
