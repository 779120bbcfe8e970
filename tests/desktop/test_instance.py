"""One instance per data folder: the lock file, second starts, stale locks of dead processes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from app.desktop.instance import AlreadyRunningError, InstanceLock, pid_alive, url_responds, wait_for_url


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_second_lock_is_refused_and_says_where(tmp_path: Path) -> None:
    first = InstanceLock(tmp_path)
    first.acquire()
    first.publish("http://127.0.0.1:5555/")
    second = InstanceLock(tmp_path)
    with pytest.raises(AlreadyRunningError) as info:
        second.acquire()
    assert info.value.info.url == "http://127.0.0.1:5555/"
    assert "already running at http://127.0.0.1:5555/" in str(info.value)
    assert second.running() is not None and first.running() is None  # a lock does not see itself
    first.release()
    assert not first.path.exists()
    second.acquire()
    assert second.read().token == second.token
    second.release()


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    pid = _dead_pid()
    assert not pid_alive(pid)
    (tmp_path / "instance.lock").write_text(json.dumps({"pid": pid, "url": "http://127.0.0.1:1/",
                                                          "started": 1.0, "token": "old"}))
    lock = InstanceLock(tmp_path)
    assert lock.running() is None
    info = lock.acquire()
    assert lock.read() == info and info.url is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["instance.guard", "instance.lock"]  # no debris
    lock.release()


def test_corrupt_lock_counts_as_stale(tmp_path: Path) -> None:
    (tmp_path / "instance.lock").write_text("{garbage")
    with InstanceLock(tmp_path) as lock:
        assert lock.held


def test_release_never_removes_someone_elses_lock(tmp_path: Path) -> None:
    mine = InstanceLock(tmp_path)
    mine.acquire()
    mine.path.write_text(json.dumps({"pid": 1, "url": None, "started": 1.0, "token": "theirs"}))
    mine.release()
    assert mine.path.exists()


def test_only_one_of_many_concurrent_starts_wins(tmp_path: Path) -> None:
    pid = _dead_pid()
    (tmp_path / "instance.lock").write_text(json.dumps({"pid": pid, "url": None, "started": 1.0, "token": "x"}))
    results: list[str] = []
    barrier = threading.Barrier(6)

    def start() -> None:
        lock = InstanceLock(tmp_path)
        barrier.wait()
        try:
            lock.acquire()
            results.append("won")
        except AlreadyRunningError:
            results.append("refused")

    threads = [threading.Thread(target=start) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(results) == ["refused"] * 5 + ["won"]


def test_publish_needs_the_lock(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="acquire"):
        InstanceLock(tmp_path).publish("http://x/")


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(401)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_url_probe_and_wait(tmp_path: Path) -> None:
    server = HTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        assert url_responds(url)  # a login page (401) is still the app
        first = InstanceLock(tmp_path)
        first.acquire()
        first.publish(url)
        assert wait_for_url(InstanceLock(tmp_path), timeout=5).url == url
    finally:
        server.shutdown()
    assert not url_responds(url, timeout=0.5)
    assert not url_responds("not a url")
