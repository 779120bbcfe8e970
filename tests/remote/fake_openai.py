"""A stdlib OpenAI-compatible fake server with a fixed latency per request: it records what it was asked, can be
stopped (connections refused) and started again on the same port; for replica tests and benchmarks/bench_replicas."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "fake-model"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FakeOpenAIServer:
    """Answers /v1/models, /v1/completions and /v1/chat/completions (streamed or not) after `latency_s`, with
    'Answer: 42' and usage; `prompts` lists the prompt text of every generation request it answered."""

    def __init__(self, latency_s: float = 0.05, port: int | None = None, status: int = 200) -> None:
        self.latency_s = latency_s
        self.port = port or _free_port()
        self.status = status
        self.prompts: list[str] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.alive = False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def served(self) -> int:
        with self._lock:
            return len(self.prompts)

    def start(self) -> FakeOpenAIServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                owner._reply(self, 200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                owner._answer(self, body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.alive = True
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True, name=f"fake-openai-{self.port}").start()
        return self

    def stop(self) -> None:
        """Die as a killed server does: new connections are refused, requests in flight get no answer."""
        self.alive = False
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _reply(self, handler: BaseHTTPRequestHandler, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        time.sleep(self.latency_s)
        if not self.alive:  # killed while this request waited: the connection drops without an answer
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        if self.status >= 400:
            self._reply(handler, self.status, {"error": {"message": "the fake server is failing"}})
            return
        chat = handler.path.endswith("/chat/completions")
        prompt = json.dumps(body.get("messages")) if chat else str(body.get("prompt"))
        with self._lock:
            self.prompts.append(prompt)
        n = int(body.get("n") or 1)
        text = "Answer: 42"
        choices = [{"index": i, "finish_reason": "stop", **({"message": {"role": "assistant", "content": text}}
                                                             if chat else {"text": text})} for i in range(n)]
        usage = {"prompt_tokens": 10, "completion_tokens": 4 * n, "total_tokens": 10 + 4 * n}
        if not body.get("stream"):
            self._reply(handler, 200, {"id": "x", "object": "chat.completion" if chat else "text_completion",
                                       "model": MODEL, "choices": choices, "usage": usage})
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Connection", "close")
        handler.end_headers()
        for choice in choices:
            if chat:
                choice["delta"] = choice.pop("message")
            handler.wfile.write(f"data: {json.dumps({'choices': [choice], 'usage': usage})}\n\n".encode())
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.close_connection = True
