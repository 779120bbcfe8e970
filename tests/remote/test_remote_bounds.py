"""Hostile servers on 127.0.0.1: non-JSON answers fail over, huge answers are refused by size, and a server that
holds an answer (or its model list) back does not hold the run past its cancel or cap."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from app.workflow.model_specs import model_spec_from_dict
from backends.base import CancelledError, CancelToken, SamplingParams
from backends.remote import openai_caps
from backends.remote.openai_http import MAX_ANSWER_BYTES, MalformedAnswerError, RemoteHttp, server_down
from backends.remote.openai_replicas import ReplicaBackend
from tests.remote.fake_openai import MODEL, FakeOpenAIServer

Behaviour = Callable[[BaseHTTPRequestHandler], None]


class HostileServer:
    """Answers GET (the model list) and POST with the given behaviours; `release` lets held answers go."""

    def __init__(self, get: Behaviour, post: Behaviour) -> None:
        self.release = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                get(self)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                post(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.owner = owner
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def stop(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()


def send(handler: BaseHTTPRequestHandler, data: bytes, content_type: str = "application/json") -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def models(handler: BaseHTTPRequestHandler) -> None:
    send(handler, json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode())


def html(handler: BaseHTTPRequestHandler) -> None:
    send(handler, b"<html><body>502 Bad Gateway (a proxy page)</body></html>", "text/html")


def huge_json(handler: BaseHTTPRequestHandler) -> None:
    """A valid answer of 40 MB, sent in pieces (the server never holds it whole)."""
    size = 40 << 20
    head = b'{"choices": [{"index": 0, "finish_reason": "stop", "text": "'
    tail = b'"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}'
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(head) + size + len(tail)))
    handler.end_headers()
    try:
        handler.wfile.write(head)
        for _ in range(size >> 20):
            handler.wfile.write(b"a" * (1 << 20))
        handler.wfile.write(tail)
    except OSError:
        pass  # the client stopped reading: what it should do


@pytest.fixture(autouse=True)
def _fresh_caps() -> Iterator[None]:
    openai_caps.forget()
    yield
    openai_caps.forget()


@pytest.fixture
def servers() -> Iterator[list[Any]]:
    made: list[Any] = []
    yield made
    for s in made:
        s.stop()


def guarded(fn: Callable[[], Any]) -> dict[str, Any]:
    """fn() in a thread; {'value'} or {'error'}; {} when it is still waiting after 20 s (the server holds it)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(20)
    return box


def replicas(*urls: str) -> ReplicaBackend:
    return ReplicaBackend(model_spec_from_dict({"source": "openai", "model": MODEL, "base_url": list(urls),
                                                "timeout_s": 30}))


def test_a_server_answering_non_json_is_taken_out_and_the_other_answers(servers: list[Any]) -> None:
    bad = HostileServer(models, html)
    good = FakeOpenAIServer(latency_s=0.01).start()
    servers += [bad, good]
    backend = replicas(bad.base_url, good.base_url)
    for i in range(3):  # each run (its own cancel token) first goes to the least busy server
        result = backend.generate(f"q{i}", SamplingParams(max_tokens=4), cancel=CancelToken())
        assert result.completions[0].text == "Answer: 42"
    by_url = {s["url"]: s for s in backend.servers()}
    assert by_url[bad.base_url]["up"] is False and "not JSON" in by_url[bad.base_url]["error"]
    assert good.served >= 3
    backend.close()


def test_non_json_and_oversized_answers_are_server_failures(servers: list[Any]) -> None:
    bad = HostileServer(html, html)
    servers.append(bad)
    http = RemoteHttp(bad.base_url, timeout_s=10)
    with pytest.raises(MalformedAnswerError, match="not JSON") as caught:
        http.get_json("/models", attempts=1)
    assert server_down(caught.value)
    http.close()


def test_a_huge_json_answer_is_refused_by_its_size(servers: list[Any]) -> None:
    big = HostileServer(huge_json, huge_json)
    servers.append(big)
    http = RemoteHttp(big.base_url, timeout_s=30)
    box = guarded(lambda: http.post_json("/completions", {"prompt": "x"}, attempts=1))
    assert isinstance(box.get("error"), MalformedAnswerError), box
    assert f"more than {MAX_ANSWER_BYTES >> 20} MB" in str(box["error"])
    assert server_down(box["error"])
    http.close()


def held(server_of: Callable[[], HostileServer]) -> Behaviour:
    """A behaviour that keeps the answer back until the test releases it, then answers with the model list."""
    def behave(handler: BaseHTTPRequestHandler) -> None:
        server_of().release.wait(60)
        try:
            models(handler)
        except OSError:
            pass
    return behave


def test_cancel_stops_a_request_the_server_holds(servers: list[Any]) -> None:
    box_server: list[HostileServer] = []
    slow = HostileServer(models, held(lambda: box_server[0]))
    box_server.append(slow)
    servers.append(slow)
    http = RemoteHttp(slow.base_url, timeout_s=120)
    cancel = CancelToken()
    threading.Timer(0.3, lambda: cancel.cancel("the run's cap")).start()
    box = guarded(lambda: http.post_json("/completions", {"prompt": "x"}, cancel, attempts=1))
    released = slow.release.is_set()
    slow.release.set()
    assert not released and isinstance(box.get("error"), CancelledError), box
    http.close()


def test_the_capability_probe_stops_on_cancel(servers: list[Any]) -> None:
    """A server whose model list never comes: the run's cancel ends the probe (and caches nothing)."""
    box_server: list[HostileServer] = []
    stuck = HostileServer(held(lambda: box_server[0]), html)
    box_server.append(stuck)
    servers.append(stuck)
    backend = replicas(stuck.base_url)
    cancel = CancelToken()
    threading.Timer(0.3, lambda: cancel.cancel("cancelled")).start()
    box = guarded(lambda: backend.generate("q", SamplingParams(max_tokens=4), cancel=cancel))
    released = stuck.release.is_set()
    stuck.release.set()
    assert not released and isinstance(box.get("error"), CancelledError), box
    assert openai_caps._CACHE == {}
    backend.close()


def test_the_capability_probe_reads_an_endless_model_list_only_so_far(servers: list[Any]) -> None:
    def endless(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        piece = b'{"id": "m", "object": "model"}, ' * 30_000
        try:
            first = b'{"object": "list", "data": [' + piece
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(first), first))
            for _ in range(60):  # about 60 MB, then it stops (a bound for the old code, which read it all)
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            handler.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass

    endless_server = HostileServer(endless, html)
    servers.append(endless_server)
    http = RemoteHttp(endless_server.base_url, timeout_s=30)
    box = guarded(lambda: openai_caps.capabilities(http, MODEL))
    assert isinstance(box.get("error"), MalformedAnswerError), box
    assert "more than" in str(box["error"])
    http.close()
