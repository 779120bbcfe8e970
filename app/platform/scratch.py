"""Scratch folders owned by this process: bounded in files, removed at exit and on SIGTERM / SIGINT."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import shutil
import signal
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any

from app.platform.fileio import atomic_write_bytes

log = logging.getLogger(__name__)

CLEANUP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")
"""Signals a server is usually stopped by: each removes this process's scratch folders before the app stops."""

_ALL: weakref.WeakSet[ScratchFolder] = weakref.WeakSet()
_installed: dict[int, Any] = {}
"""Signal number -> the handler that was there before ours (ours chains to it)."""
_install_lock = threading.Lock()


class ScratchFolder:
    """Files the app hands to the browser once (reports to download, Gradio's copies): kept in a private
    temporary folder named `<prefix>-<pid>-<random>` that holds at most `keep` files (the oldest written are
    deleted first; `keep=None` leaves the count to its user) and is deleted at process exit or on a stopping
    signal (`install_signal_cleanup`). The pid in the name lets the next start remove the folders of a process
    that was killed outright (`remove_stale`)."""

    def __init__(self, prefix: str, keep: int | None = 16, parent: Path | None = None) -> None:
        self.prefix = prefix
        self.keep = None if keep is None else max(1, keep)
        self.parent = parent
        self._folder: Path | None = None
        self._lock = threading.Lock()
        self._written: list[str] = []
        """File names in the order they were last written (oldest first)."""
        _ALL.add(self)
        atexit.register(self.clear)

    @property
    def folder(self) -> Path:
        """The folder, created on first use (and again after `clear`)."""
        if self._folder is None or not self._folder.is_dir():
            parent = self.parent if self.parent is not None else Path(tempfile.gettempdir())
            parent.mkdir(parents=True, exist_ok=True)
            self._folder = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-{os.getpid()}-", dir=parent))
        return self._folder

    @property
    def created(self) -> bool:
        return self._folder is not None and self._folder.is_dir()

    def write_text(self, name: str, text: str) -> Path:
        """Write `name` (a plain file name) and return its path, deleting the oldest files beyond `keep`."""
        return self.write_bytes(name, text.encode("utf-8"))

    def write_bytes(self, name: str, data: bytes) -> Path:
        """Write `name` (a plain file name) and return its path, deleting the oldest files beyond `keep`."""
        if Path(name).name != name or name.startswith(".") or name in {"", ".."}:
            raise ValueError(f"a scratch file needs a plain file name, got {name!r}")
        with self._lock:
            path = self.folder / name
            atomic_write_bytes(path, data)
            if name in self._written:
                self._written.remove(name)
            self._written.append(name)
            self._prune()
            return path

    def files(self) -> list[Path]:
        """The files kept, oldest written first."""
        folder = self._folder
        if folder is None or not folder.is_dir():
            return []
        return [folder / name for name in self._written if (folder / name).is_file()]

    def _prune(self) -> None:
        while self.keep is not None and len(self._written) > self.keep:
            (self.folder / self._written.pop(0)).unlink(missing_ok=True)

    def clear(self) -> None:
        """Delete the folder and everything in it (also run at process exit and on a stopping signal)."""
        with self._lock:
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)
                log.debug("removed scratch folder %s", self._folder)
                self._folder = None
                self._written.clear()


def scratch_file_name(text: str, suffix: str = "") -> str:
    """A plain file name made from any text (a run id from an imported trace may hold `/` or `..`)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", str(text)).strip("._")[:80] or "file"
    return stem + suffix


def remove_all() -> None:
    """Delete every scratch folder of this process (what exit and the stopping signals do)."""
    for scratch in list(_ALL):
        scratch.clear()


def _on_signal(signum: int, frame: Any) -> None:
    remove_all()
    previous = _installed.get(signum)
    if callable(previous):
        previous(signum, frame)  # e.g. Python's SIGINT handler: KeyboardInterrupt, the app's own shutdown
    elif previous != signal.SIG_IGN:
        raise SystemExit(128 + signum)  # the default action would skip atexit and the app's `finally` blocks


def handler_before(signum: int) -> Any:
    """The handler of `signum` under this module's cleanup handler (the current one when it has none)."""
    current = signal.getsignal(signum)
    return _installed.get(signum, current) if current is _on_signal else current


def install_signal_cleanup() -> None:
    """Remove the scratch folders on SIGTERM, SIGINT and SIGHUP too (not only at a normal exit), then do what
    the signal did before (Ctrl+C still raises KeyboardInterrupt; a default SIGTERM exits through the app's
    `finally` blocks and atexit). Only in the main thread (Python's rule for signal handlers); idempotent."""
    if threading.current_thread() is not threading.main_thread():
        return
    with _install_lock:
        for name in CLEANUP_SIGNALS:
            signum = getattr(signal, name, None)
            if signum is None or signum in _installed:
                continue
            try:
                _installed[signum] = signal.getsignal(signum)
                signal.signal(signum, _on_signal)
            except (OSError, ValueError) as exc:  # not settable on this platform
                _installed.pop(signum, None)
                log.debug("no cleanup handler for %s: %s", name, exc)


def remove_stale(prefix: str, parent: Path | None = None) -> list[Path]:
    """Delete `<prefix>-<pid>-*` folders left by processes of ours that no longer run (killed outright: no
    handler could run); returns what was removed."""
    parent = parent if parent is not None else Path(tempfile.gettempdir())
    removed: list[Path] = []
    pattern = re.compile(rf"^{re.escape(prefix)}-(\d+)-")
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            match = pattern.match(entry.name)
            if not match or not entry.is_dir() or int(match.group(1)) == os.getpid() or _alive(int(match.group(1))):
                continue
            try:
                if entry.stat().st_uid != os.getuid():
                    continue
            except (OSError, AttributeError):
                continue
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    if removed:
        log.info("removed %d scratch folder(s) left by stopped processes", len(removed))
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True
