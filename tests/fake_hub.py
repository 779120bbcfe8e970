"""A fake Hugging Face Hub for offline tests: a stdlib HTTP server answering what pulls and huggingface_hub ask
(resolve with X-Repo-Commit / ETag / X-Linked-Etag / X-Linked-Size and Range, /api/models/{repo} with siblings and
blobs sha256, the tree listing, /api/models?search=); point HF_ENDPOINT at `url`."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class FakeRepo:
    files: dict[str, bytes]
    gated: bool = False
    downloads: int = 10


@dataclass
class FakeHub:
    """Repos by id; `cut_once[path] = n` drops the connection after n bytes (once); `stall_after[path] = n` sends n
    bytes of every answer, then nothing more until the hub stops; `corrupt` serves flipped bytes for those paths;
    `requests` records (method, path, Range header); `delay_s` slows each chunk."""

    repos: dict[str, FakeRepo] = field(default_factory=dict)
    cut_once: dict[str, int] = field(default_factory=dict)
    stall_after: dict[str, int] = field(default_factory=dict)
    stopping: threading.Event = field(default_factory=threading.Event)
    corrupt: set[str] = field(default_factory=set)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    delay_s: float = 0.0
    chunk: int = 1 << 16
    url: str = ""
    _server: ThreadingHTTPServer | None = None

    def add(self, repo: str, files: dict[str, bytes | Path], gated: bool = False) -> None:
        self.repos[repo] = FakeRepo({k: v.read_bytes() if isinstance(v, Path) else v for k, v in files.items()},
                                    gated=gated)

    def start(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            fake = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # stalled answers end
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def ranges(self, path_end: str) -> list[str | None]:
        return [r for m, p, r in self.requests if m == "GET" and p.endswith(path_end)]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _json(self, payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _not_found(self, code: str) -> None:
        self._json({"error": code}, 401 if code == "RepoNotFound" else 404, {"X-Error-Code": code})

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        try:
            self._answer()
        except (ConnectionError, OSError):  # the client went away (a cancel, a cut, a header-only read)
            self.close_connection = True

    def _answer(self) -> None:
        url = urlparse(self.path)
        path = unquote(url.path)
        self.fake.requests.append((self.command, path, self.headers.get("Range")))
        query = parse_qs(url.query)
        if path == "/api/models":
            self._search(query.get("search", [""])[0])
        elif m := re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)(/.*)?", path):
            self._tree(m.group(1))
        elif m := re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?", path):
            self._info(m.group(1))
        elif m := re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path):
            self._resolve(m.group(1), m.group(3))
        else:
            self._json({"error": "not found"}, 404)

    def _repo(self, repo: str) -> FakeRepo | None:
        found = self.fake.repos.get(repo)
        if found is None:
            self._not_found("RepoNotFound")
        return found

    def _search(self, text: str) -> None:
        self._json([{"id": r, "modelId": r, "downloads": v.downloads, "lastModified": "2025-05-01T00:00:00.000Z",
                     "likes": 1, "tags": ["gguf"]} for r, v in self.fake.repos.items() if text.lower() in r.lower()])

    def _info(self, repo: str) -> None:
        if (found := self._repo(repo)) is None:
            return
        siblings = [{"rfilename": name, "size": len(data),
                     "lfs": {"sha256": _sha(data), "size": len(data), "pointerSize": 134}}
                    for name, data in found.files.items()]
        self._json({"id": repo, "modelId": repo, "sha": COMMIT, "siblings": siblings, "private": False,
                    "gated": "manual" if found.gated else False, "downloads": found.downloads,
                    "lastModified": "2025-05-01T00:00:00.000Z", "tags": ["gguf"]})

    def _tree(self, repo: str) -> None:
        if (found := self._repo(repo)) is None:
            return
        self._json([{"type": "file", "path": name, "size": len(data), "oid": _sha(data)[:40],
                     "lfs": {"oid": _sha(data), "size": len(data), "pointerSize": 134}}
                    for name, data in found.files.items()])

    def _resolve(self, repo: str, name: str) -> None:
        if (found := self._repo(repo)) is None:
            return
        if found.gated and "Authorization" not in self.headers:
            self._json({"error": "gated"}, 401, {"X-Error-Code": "GatedRepo"})
            return
        data = found.files.get(name)
        if data is None:
            self._not_found("EntryNotFound")
            return
        etag = _sha(data)
        if name in self.fake.corrupt:
            data = bytes(b ^ 0xFF for b in data[:64]) + data[64:]
        start, status = 0, 200
        if (rng := self.headers.get("Range")) and (m := re.fullmatch(r"bytes=(\d+)-", rng)):
            start, status = int(m.group(1)), 206
            if start >= len(data):
                self._json({"error": "range"}, 416, {"Content-Range": f"bytes */{len(data)}"})
                return
        body = data[start:]
        self.send_response(status)
        for k, v in {"X-Repo-Commit": COMMIT, "ETag": f'"{etag}"', "X-Linked-Etag": f'"{etag}"',
                     "X-Linked-Size": str(len(data)), "Accept-Ranges": "bytes",
                     "Content-Length": str(len(body)), "Content-Type": "application/octet-stream"}.items():
            self.send_header(k, v)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if self.command == "HEAD":
            return
        try:
            self._send_body(name, body)
        except (ConnectionError, OSError):  # the client stopped reading (a cancel, a header-only read)
            self.close_connection = True

    def _send_body(self, name: str, body: bytes) -> None:
        import time

        cut = self.fake.cut_once.pop(name, None)
        stall = self.fake.stall_after.get(name)
        if stall is not None:
            self.wfile.write(body[:stall])
            self.wfile.flush()
            self.fake.stopping.wait(120)  # a server that sent a little and went quiet
            return
        sent = 0
        while sent < len(body):
            piece = body[sent:sent + self.fake.chunk]
            if cut is not None and sent + len(piece) > cut:
                self.wfile.write(piece[:max(0, cut - sent)])
                self.wfile.flush()
                self.close_connection = True
                self.connection.close()  # the cut: the client sees the stream end early
                return
            self.wfile.write(piece)
            sent += len(piece)
            if self.fake.delay_s:
                time.sleep(self.fake.delay_s)
