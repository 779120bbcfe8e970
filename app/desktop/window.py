"""The desktop app: user folders on first start, one instance per data dir, the studio in a native window
(pywebview + Qt), served on 127.0.0.1 only, falling back to the default browser when no window can be made."""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import webbrowser
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.desktop.instance import AlreadyRunningError, InstanceInfo, InstanceLock, url_responds, wait_for_url
from app.platform import paths
from app.workflow.files import list_workflow_names, workflow_path

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
WINDOW_TITLE = "Metagen Studio"
FOCUS_REQUEST = "instance.focus"
EXAMPLES_MARKER = ".examples-copied"
PROBE_TIMEOUT_S = 30.0

Say = Callable[[str], None]
"""Where user-facing status lines go (the CLI prints them)."""


# ------------------------------------------------------------------ first start


@dataclass
class FirstStart:
    created: list[Path] = field(default_factory=list)
    examples_copied: list[str] = field(default_factory=list)

    @property
    def first_time(self) -> bool:
        return bool(self.created)


def prepare_user_data(examples: Path | None = None) -> FirstStart:
    """Create the data, workflows and models folders if missing; copy each example workflow once (an
    example the user deleted or edited is never brought back or overwritten)."""
    report = FirstStart()
    for folder in (paths.data_dir(), paths.workflows_dir(), paths.models_dir(), paths.trace_db_path().parent):
        if not folder.exists():
            folder.mkdir(parents=True, exist_ok=True)
            report.created.append(folder)
    if examples is None:
        try:
            from app.platform.resources import examples_dir

            examples = examples_dir()
        except FileNotFoundError as exc:
            log.warning("no example workflows to copy: %s", exc)
            return report
    marker = paths.workflows_dir() / EXAMPLES_MARKER
    try:
        done = set(marker.read_text(encoding="utf-8").split())
    except OSError:
        done = set()
    for name in list_workflow_names(examples):
        if name in done:
            continue
        target = workflow_path(paths.workflows_dir(), name)
        if not target.exists():
            shutil.copyfile(workflow_path(examples, name), target)
            report.examples_copied.append(name)
        done.add(name)
    from app.platform.fileio import atomic_write_text

    atomic_write_text(marker, "\n".join(sorted(done)) + "\n")
    return report


# ------------------------------------------------------------------ server


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    url: str
    close: Callable[[], None]


@dataclass
class Studio:
    """What a launcher needs from the UI: the Blocks, the launch arguments it requires, and a cleanup."""

    blocks: Any
    launch_kwargs: dict[str, Any] = field(default_factory=dict)
    close: Callable[[], None] = lambda: None


def start_server(build: Callable[[], Studio], port: int | None = None) -> Server:
    """Launch the studio on 127.0.0.1 (never another interface) in the background; returns its URL."""
    studio = build()
    port = port or free_port()
    kwargs = {**studio.launch_kwargs, "server_name": LOOPBACK, "server_port": port, "share": False,
              "inbrowser": False, "prevent_thread_lock": True, "quiet": True}
    server_app, local_url, _share = studio.blocks.launch(**kwargs)
    from app.ui.app import drop_gradio_cors

    drop_gradio_cors(server_app)
    url = str(local_url or f"http://{LOOPBACK}:{port}/")

    def close() -> None:
        studio.blocks.close()
        studio.close()

    return Server(url=url, close=close)


# ------------------------------------------------------------------ native window


def _qt_env() -> dict[str, str]:
    env = dict(os.environ)
    if sys.platform.startswith("linux") and env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"):
        env.setdefault("QT_QPA_PLATFORM", "xcb")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        # Chromium (inside QtWebEngine) refuses to run as root with its sandbox on.
        env.setdefault("QTWEBENGINE_DISABLE_SANDBOX", "1")
    return env


_PROBE = (
    "from qtpy.QtWidgets import QApplication\n"
    "from qtpy.QtWebEngineWidgets import QWebEngineView\n"
    "app = QApplication(['probe'])\n"
    "print('ok')\n"
)


def native_window_problem() -> str | None:
    """Why no native window can be made here (None when it can). Qt aborts the whole process when it
    cannot open a display, so the check runs in a child process."""
    if importlib.util.find_spec("webview") is None:
        return "pywebview is not installed (pip install 'metagen-studio[desktop]')"
    if sys.platform.startswith("linux"):
        if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
            return "no graphical display ($DISPLAY and $WAYLAND_DISPLAY are not set)"
        if importlib.util.find_spec("qtpy") is None:
            return "the Qt bindings are missing (pip install 'metagen-studio[desktop]')"
        try:
            probe = subprocess.run([sys.executable, "-c", _PROBE], env=_qt_env(), capture_output=True, text=True,
                                   timeout=PROBE_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"Qt could not start ({exc})"
        if probe.returncode != 0 or "ok" not in probe.stdout:
            lines = [ln for ln in (probe.stderr or "").splitlines() if ln.strip()]
            reason = next((ln.strip() for ln in reversed(lines) if "Error" in ln or "could not" in ln.lower()),
                          lines[-1].strip() if lines else f"exit status {probe.returncode}")
            return f"Qt WebEngine could not open a window: {reason}"
    return None


class FocusWatcher:
    """Brings the window to the front when a second start asks for it (a request file in the data dir)."""

    def __init__(self, folder: Path, on_request: Callable[[], None], poll_s: float = 0.5) -> None:
        self.path = folder / FOCUS_REQUEST
        self.on_request = on_request
        self.poll_s = poll_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="focus-watcher", daemon=True)

    def start(self) -> FocusWatcher:
        self.path.unlink(missing_ok=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            if self.path.exists():
                self.path.unlink(missing_ok=True)
                try:
                    self.on_request()
                except Exception as exc:  # the window may be closing
                    log.warning("could not focus the window: %s", exc)


def request_focus(folder: Path) -> None:
    (folder / FOCUS_REQUEST).write_text(str(time.time()), encoding="utf-8")


def run_window(url: str, data: Path, say: Say, stop: threading.Event) -> None:
    """Show `url` in a native window until the user closes it (blocks the main thread, as GUI toolkits must)."""
    for key, value in _qt_env().items():
        os.environ.setdefault(key, value)
    import webview

    window = webview.create_window(WINDOW_TITLE, url, width=1400, height=900, min_size=(900, 600))
    if window is None:
        raise RuntimeError("pywebview could not create a window")

    def focus() -> None:
        window.restore()
        window.show()
        window.on_top = True
        window.on_top = False
        say("brought the window to the front (another start asked for it)")

    watcher = FocusWatcher(data, focus)

    def on_loaded() -> None:
        say(f"window open: {url}")

    def on_started() -> None:
        watcher.start()
        stop.wait()
        try:
            window.destroy()
        except Exception:  # already closed by the user
            log.debug("window already closed", exc_info=True)

    window.events.loaded += on_loaded
    storage = data / "webview"
    storage.mkdir(parents=True, exist_ok=True)
    try:
        webview.start(on_started, gui="qt" if sys.platform.startswith("linux") else None,
                      private_mode=False, storage_path=str(storage))
    finally:
        watcher.stop()
        stop.set()


# ------------------------------------------------------------------ the launcher


@dataclass
class DesktopOptions:
    port: int | None = None
    window: bool = True
    """False: never try a native window (use the browser)."""
    browser: bool = True
    """False: in fallback mode, do not open a browser (print the URL only)."""


def _handle_second_start(lock: InstanceLock, err: AlreadyRunningError, say: Say) -> int:
    info: InstanceInfo | None = err.info
    if not (info.url and url_responds(info.url)):
        say(f"{err.info.describe()}; waiting for it to be ready ...")
        info = wait_for_url(lock, timeout=30.0)
        if info is None:
            say(f"{err.info.describe()}; it did not answer. If no Metagen Studio runs, delete {lock.path}")
            return 1
    say(f"{info.describe()}; using that one (one instance per data folder: {lock.folder})")
    request_focus(lock.folder)  # the first instance raises its window (or opens a browser tab)
    return 0


def run_desktop(build: Callable[[], Studio], opts: DesktopOptions, say: Say,
                stop: threading.Event | None = None) -> int:
    """`metagen desktop`: returns the exit status. Setting `stop` (or SIGINT/SIGTERM) shuts it down."""
    report = prepare_user_data()
    if report.first_time:
        say(f"first start: created {', '.join(str(p) for p in report.created)}")
    if report.examples_copied:
        say(f"copied {len(report.examples_copied)} example workflow(s) into {paths.workflows_dir()}")
    lock = InstanceLock(paths.data_dir())
    try:
        lock.acquire()
    except AlreadyRunningError as err:
        return _handle_second_start(lock, err, say)
    stop = stop or threading.Event()
    server: Server | None = None
    previous = _install_stop_handlers(stop)
    try:
        server = start_server(build, opts.port)
        lock.publish(server.url)
        say(f"serving on {server.url} (this computer only)")
        problem = "disabled by --no-window" if not opts.window else native_window_problem()
        if problem is None:
            try:
                run_window(server.url, paths.data_dir(), say, stop)
                return 0
            except Exception as exc:
                problem = f"the native window failed: {exc}"
                log.debug("native window failed", exc_info=True)
        say(f"no native window ({problem}); " + ("opening the studio in your browser" if opts.browser
                                                   else "open the URL above in a browser"))
        if opts.browser and not webbrowser.open(server.url):
            say("no browser could be started either; open the URL above yourself")
        say("press Ctrl+C to stop")
        url = server.url
        watcher = FocusWatcher(paths.data_dir(), lambda: webbrowser.open(url) if opts.browser else None).start()
        try:
            while not stop.wait(0.5):
                pass
        finally:
            watcher.stop()
        return 0
    finally:
        _restore_handlers(previous)
        if server is not None:
            server.close()
        lock.release()


def _install_stop_handlers(stop: threading.Event) -> dict[int, Any]:
    previous: dict[int, Any] = {}
    if threading.current_thread() is not threading.main_thread():
        return previous
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.getsignal(sig)
        signal.signal(sig, lambda *_: stop.set())
    return previous


def _restore_handlers(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)
