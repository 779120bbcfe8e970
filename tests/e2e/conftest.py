"""End-to-end fixtures: `metagen ui` started in a subprocess on a free port with a temp METAGEN_HOME, Chromium
via Playwright, console errors and off-machine requests collected, screenshots saved to test-artifacts/."""

from __future__ import annotations

import functools
import http.server
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "ui"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-first-run", "--disable-gpu",
]
LOCAL_PREFIXES = ("http://127.0.0.1", "http://localhost", "data:", "blob:", "about:")
SERVER_START_TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class StudioServer:
    """A running `metagen ui` process."""

    url: str
    home: Path
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


def start_server(home: Path, extra_args: list[str], port: int | None = None) -> StudioServer:
    home.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    env = {**os.environ, "METAGEN_HOME": str(home), "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONUNBUFFERED": "1"}
    for key in ("METAGEN_WORKFLOWS", "METAGEN_TRACE_DB", "METAGEN_MODELS", "METAGEN_SHARE_MODE"):
        env.pop(key, None)
    log_path = home / "server.log"
    log_file = log_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "ui", "--no-browser", "--port", str(port), *extra_args],
        cwd=REPO, env=env, stdout=log_file, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log_file.close()
            raise RuntimeError(f"metagen ui exited with {process.returncode}:\n{log_path.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    break
        except (urllib.error.URLError, OSError):
            time.sleep(0.3)
    else:
        process.kill()
        raise RuntimeError(f"metagen ui did not answer within {SERVER_START_TIMEOUT_S:g}s:\n{log_path.read_text()}")
    return StudioServer(url, home, process, log_path)


def stop_server(server: StudioServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(timeout=5)


@pytest.fixture(scope="module")
def studio(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StudioServer]:
    """One app server per test module; the module sets SERVER_ARGS (e.g. ["--dry-run"])."""
    args = list(getattr(request.module, "SERVER_ARGS", ["--dry-run"]))
    server = start_server(tmp_path_factory.mktemp("home"), args)
    yield server
    stop_server(server)


@pytest.fixture(scope="session")
def browser(chromium_browser: Any) -> Any:
    """The session's one Chromium (tests/conftest.py)."""
    return chromium_browser


@dataclass
class PageWatch:
    """What a page did that a user should never see: console errors, page errors, requests off this machine."""

    console_errors: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)
    allowed_errors: list[re.Pattern[str]] = field(default_factory=list)

    def allow(self, pattern: str) -> None:
        """Tolerate console errors matching `pattern` (e.g. a 404 the test provokes on purpose)."""
        self.allowed_errors.append(re.compile(pattern))

    def unexpected_errors(self) -> list[str]:
        return [e for e in self.console_errors if not any(p.search(e) for p in self.allowed_errors)]


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:120]


@pytest.fixture
def page_watch() -> PageWatch:
    return PageWatch()


@pytest.fixture
def page(browser: Any, page_watch: PageWatch, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh browser context (no localStorage carried over); after the test a screenshot is saved and the
    page must have logged no console error and fetched nothing from another machine."""
    context = browser.new_context(viewport={"width": 1800, "height": 1150}, accept_downloads=True)
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    pg.on("console", lambda msg: page_watch.console_errors.append(f"console.{msg.type}: {msg.text}")
          if msg.type == "error" else None)
    pg.on("pageerror", lambda exc: page_watch.console_errors.append(f"pageerror: {exc}"))
    pg.on("request", lambda req: page_watch.external_requests.append(req.url)
          if not req.url.startswith(LOCAL_PREFIXES) else None)
    yield pg
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        pg.screenshot(path=str(ARTIFACTS / f"{_safe_name(request.node.name)}-final.png"), full_page=True)
    except Exception:  # a crashed page must not hide the test's own failure
        pass
    context.close()
    assert not page_watch.unexpected_errors(), f"console errors: {page_watch.unexpected_errors()}"
    assert not page_watch.external_requests, f"requests left this machine: {page_watch.external_requests}"


@pytest.fixture
def shot(request: pytest.FixtureRequest) -> Callable[[Any, str], None]:
    """shot(page, step): a screenshot of the current step into test-artifacts/ui/."""

    def take(pg: Any, step: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"{_safe_name(request.node.name)}-{_safe_name(step)}.png"),
                      full_page=True)

    return take


class Studio:
    """The editor page driven like a user: mouse on the canvas, keyboard in the fields."""

    def __init__(self, pg: Any, server: StudioServer) -> None:
        self.page = pg
        self.server = server

    # ---------------------------------------------------------------- navigation
    def open(self, keep_gallery: bool = False) -> Studio:
        """The editor page; the strategy gallery of the first screen closed (as a user wanting the empty canvas
        does) unless `keep_gallery`."""
        self.page.goto(self.server.url)
        self.page.wait_for_selector(".mg-page[data-ready='1']", timeout=60_000)
        if not keep_gallery:
            self.close_gallery()
        return self

    def reload(self) -> Studio:
        self.page.reload()
        self.page.wait_for_selector(".mg-page[data-ready='1']", timeout=60_000)
        self.close_gallery()
        return self

    def close_gallery(self) -> None:
        close = self.page.locator("[data-testid=gallery-close]")
        if close.is_visible():
            close.click()
            self.page.locator("[data-testid=gallery]").wait_for(state="hidden")

    def tab(self, name: str) -> None:
        self.page.get_by_role("tab", name=name).click()

    # ---------------------------------------------------------------- reading
    def yaml(self) -> str:
        return self.page.locator("[data-testid=yaml-editor]").input_value()

    def node_ids(self) -> list[str]:
        return self.page.eval_on_selector_all("[data-node-id]", "els => els.map(e => e.dataset.nodeId)")

    def workflow(self) -> dict[str, Any]:
        import yaml

        return yaml.safe_load(self.yaml())

    def notice(self) -> str:
        return self.page.locator("[data-testid=notice]").inner_text()

    def wait_yaml(self, predicate: Callable[[str], bool], timeout_s: float = 10.0) -> str:
        """Wait until the YAML pane satisfies `predicate` (the canvas -> YAML round trip is asynchronous)."""
        deadline = time.monotonic() + timeout_s
        text = self.yaml()
        while time.monotonic() < deadline:
            text = self.yaml()
            if predicate(text):
                return text
            self.page.wait_for_timeout(100)
        raise AssertionError(f"YAML pane never matched; it shows:\n{text}")

    def settle(self) -> None:
        """Let debounced editor changes reach the server and come back."""
        self.page.wait_for_timeout(700)

    # ---------------------------------------------------------------- canvas gestures
    def canvas_box(self) -> dict[str, float]:
        return self.page.locator("[data-testid=editor-canvas]").bounding_box()

    def drag(self, source: Any, x: float, y: float) -> None:
        box = source.bounding_box()
        mouse = self.page.mouse
        mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        mouse.down()
        mouse.move(box["x"] + box["width"] / 2 + 12, box["y"] + box["height"] / 2 + 8, steps=3)
        mouse.move(x, y, steps=10)
        mouse.up()
        self.page.wait_for_timeout(150)

    def place(self, kind: str, fx: float, fy: float) -> str:
        """Drag a palette item to (fx, fy) of the canvas; returns the new node's id."""
        before = set(self.node_ids())
        cb = self.canvas_box()
        self.drag(self.page.locator(f".mge-palette-item[data-kind='{kind}']"), cb["x"] + cb["width"] * fx,
                  cb["y"] + cb["height"] * fy)
        added = [n for n in self.node_ids() if n not in before]
        assert len(added) == 1, f"dragging {kind} onto the canvas added {added}"
        return added[0]

    def port(self, node_id: str, port: str) -> Any:
        return self.page.locator(f"[data-node-id='{node_id}'] [data-port='{port}']")

    def connect(self, src: str, out_port: str, dst: str, in_port: str) -> None:
        target = self.port(dst, f"in:{in_port}").bounding_box()
        self.drag(self.port(src, f"out:{out_port}"), target["x"] + target["width"] / 2,
                  target["y"] + target["height"] / 2)

    def node_header(self, node_id: str) -> Any:
        node = self.page.locator(f"[data-node-id='{node_id}']")
        header = node.locator(".mge-node-header").first
        return header if header.count() else node

    def move_node(self, node_id: str, dx: float, dy: float) -> None:
        box = self.node_header(node_id).bounding_box()
        self.drag(self.node_header(node_id), box["x"] + box["width"] / 2 + dx, box["y"] + box["height"] / 2 + dy)

    def select(self, node_id: str) -> None:
        self.node_header(node_id).click()

    def set_param(self, name: str, value: str) -> None:
        """Type into the inspector field of the selected node."""
        field_ = self.page.locator(f"[data-testid=editor-inspector] [data-param='{name}']")
        tag = field_.evaluate("el => el.tagName")
        if tag == "SELECT":
            field_.select_option(value)
        else:
            field_.fill(value)
            field_.dispatch_event("change")

    # ---------------------------------------------------------------- files
    def save_as(self, name: str) -> None:
        self.page.locator("[data-testid=save-as-btn]").click()
        self.page.locator("[data-testid=name-input]").fill(name)
        self.page.locator("[data-testid=name-ok]").click()
        self.page.wait_for_function(
            "document.querySelector('[data-testid=notice]').textContent.startsWith('Saved')")

    def open_saved(self, name: str) -> None:
        self.page.locator("[data-testid=open-select]").select_option(name)
        self.page.wait_for_function(
            "(n) => document.querySelector('[data-testid=wf-title]').textContent === n", arg=name)

    def pick_example(self, name: str) -> None:
        """New from example…, then the example's card in the strategy gallery."""
        gallery = self.page.locator("[data-testid=gallery]")
        if not gallery.is_visible():
            self.page.locator("[data-testid=example-btn]").click()
        gallery.locator(f"[data-testid=gallery-card][data-example='{name}']").click()

    def open_example(self, name: str) -> None:
        self.pick_example(name)
        self.page.wait_for_function("(n) => document.querySelector('[data-testid=notice]').textContent"
                                    ".includes('from the example ' + n)", arg=name)

    # ---------------------------------------------------------------- runs
    def click_run(self) -> str:
        """Press Run and wait until the page follows the new run; returns its id."""
        before = self.page.evaluate("window.MetagenUI.state().currentRun")
        self.page.locator("[data-testid=run-btn]").click()
        self.page.wait_for_function("(b) => { const r = window.MetagenUI.state().currentRun; return r && r !== b; }",
                                    arg=before)
        return str(self.page.evaluate("window.MetagenUI.state().currentRun"))

    def run_status(self) -> str:
        return self.page.locator("[data-testid=run-status]").get_attribute("data-status") or ""

    def wait_run_finished(self, timeout_s: float = 120.0) -> str:
        self.page.wait_for_function(
            "['succeeded','failed','cancelled','budget_exceeded','invalid','lost'].includes("
            "document.querySelector('[data-testid=run-status]').dataset.status)", timeout=timeout_s * 1000)
        return self.run_status()

    def node_state(self, node_id: str) -> str:
        badge = self.page.locator(f"[data-node-id='{node_id}'] [data-testid=state-badge]")
        return (badge.text_content() or "").strip() if badge.count() else ""


@pytest.fixture
def ui(page: Any, studio: StudioServer) -> Studio:
    return Studio(page, studio).open()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def static_url() -> Iterator[str]:
    """static/ served as plain files on a free localhost port (the editor harness and the module tests)."""
    handler = functools.partial(_QuietHandler, directory=str(Path(__file__).resolve().parents[2] / "static"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()
