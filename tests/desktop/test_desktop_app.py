"""`metagen desktop` as a user starts it: a native window under Xvfb (screenshot saved), the browser
fallback without a display, first-start folders, and a second start that finds the first."""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
START_TIMEOUT_S = 120


class Launched:
    """A `metagen desktop` child process whose output lines we can wait for."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "app.cli", "desktop", "--dry-run", *args], cwd=REPO,
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout: float = START_TIMEOUT_S) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            found = re.search(pattern, line)
            if found:
                return found
        raise AssertionError(f"never saw {pattern!r}; output was:\n" + "\n".join(self.lines))

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise
        return self.proc.returncode


def _second_start(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", "desktop", "--dry-run", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode("utf-8", errors="replace")


def test_browser_fallback_without_display(desktop_env: dict[str, str], tmp_path: Path) -> None:
    app = Launched(["--no-browser"], desktop_env)
    try:
        app.wait_for(r"first start: created")
        url = app.wait_for(r"serving on (http://127\.0\.0\.1:\d+/)").group(1)
        app.wait_for(r"no native window \(no graphical display")
        assert "Metagen Studio" in _get(url)
        home = Path(desktop_env["METAGEN_HOME"])
        assert (home / "workflows").is_dir() and (home / "models").is_dir()
        lock = json.loads((home / "instance.lock").read_text())
        assert lock["url"] == url and lock["pid"] == app.proc.pid

        again = _second_start(desktop_env, "--no-browser")
        assert again.returncode == 0, again.stdout + again.stderr
        assert f"already running at {url}" in again.stdout
        assert "first start" not in again.stdout
    finally:
        assert app.stop() == 0
    assert not (Path(desktop_env["METAGEN_HOME"]) / "instance.lock").exists()


def test_native_window_under_xvfb(xvfb: Any, desktop_env: dict[str, str]) -> None:
    import importlib.util

    if importlib.util.find_spec("webview") is None or importlib.util.find_spec("qtpy") is None:
        pytest.fail("the desktop extra is not installed: pip install -e '.[desktop]' (pywebview, PySide6, qtpy)")
    env = {**desktop_env, "DISPLAY": xvfb.name}
    app = Launched([], env)
    try:
        url = app.wait_for(r"serving on (http://127\.0\.0\.1:\d+/)").group(1)
        app.wait_for(r"window open: ")
        time.sleep(3)  # let the page's JS draw the editor before the screenshot
        shot = xvfb.screenshot(ARTIFACTS / "desktop_window.png")
        from PIL import Image

        colours = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is None or len(colours) > 50, "the screen is (nearly) blank: no window was drawn"

        again = _second_start(env)
        assert again.returncode == 0, again.stdout + again.stderr
        assert f"already running at {url}" in again.stdout
        app.wait_for(r"brought the window to the front", timeout=30)
    finally:
        code = app.stop()
    assert code == 0, "\n".join(app.lines)
    assert not (Path(env["METAGEN_HOME"]) / "instance.lock").exists()


def test_stale_lock_from_a_killed_instance_is_taken_over(desktop_env: dict[str, str]) -> None:
    first = Launched(["--no-browser"], desktop_env)
    first.wait_for(r"serving on")
    first.proc.kill()
    first.proc.wait(10)
    assert (Path(desktop_env["METAGEN_HOME"]) / "instance.lock").exists()
    second = Launched(["--no-browser"], desktop_env)
    try:
        url = second.wait_for(r"serving on (http://127\.0\.0\.1:\d+/)").group(1)
        assert "Metagen Studio" in _get(url)
    finally:
        assert second.stop() == 0
