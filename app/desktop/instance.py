"""One running app per data directory: a lock file holding the owner's pid and URL; dead owners are taken over."""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.platform.fileio import atomic_write_text

log = logging.getLogger(__name__)

LOCK_NAME = "instance.lock"
GUARD_NAME = "instance.guard"


@dataclass(frozen=True)
class InstanceInfo:
    pid: int
    url: str | None
    started: float
    token: str
    """Random id of the owning lock object, so that only the owner updates or removes the file."""

    def describe(self) -> str:
        where = f"at {self.url}" if self.url else "(still starting, no URL yet)"
        return f"Metagen Studio is already running {where}, process {self.pid}"


class AlreadyRunningError(RuntimeError):
    """Another live process holds this data directory."""

    def __init__(self, info: InstanceInfo, lock_path: Path) -> None:
        self.info = info
        self.lock_path = lock_path
        super().__init__(f"{info.describe()} (lock file {lock_path})")


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (without disturbing it)."""
    if pid <= 0:
        return False
    if os.name == "nt":  # os.kill(pid, 0) would terminate the process on Windows
        import ctypes

        handle = ctypes.windll.kernel32.OpenProcess(0x1000, False, pid)  # type: ignore[attr-defined]
        if not handle:
            return False
        ctypes.windll.kernel32.CloseHandle(handle)  # type: ignore[attr-defined]
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def url_responds(url: str, timeout: float = 2.0) -> bool:
    """Whether an HTTP server answers at `url` (any status counts: a login page is still our app)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


@contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """An OS file lock (released by the OS if the process dies) around a short critical section."""
    with open(path, "a+b") as f:
        if os.name == "nt":
            import msvcrt

            f.seek(0)
            while True:
                try:
                    msvcrt.locking(f.fileno(), msvcrt.LK_LOCK, 1)  # type: ignore[attr-defined]
                    break
                except OSError:  # LK_LOCK gives up after 10 s; keep waiting
                    continue
            try:
                yield
            finally:
                f.seek(0)
                msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]
        else:
            import fcntl

            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _read(path: Path) -> InstanceInfo | None:
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        return InstanceInfo(pid=int(data["pid"]), url=data.get("url") or None, started=float(data["started"]),
                            token=str(data.get("token", "")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("unreadable instance lock %s (%s); treating it as stale", path, exc)
        return InstanceInfo(pid=-1, url=None, started=0.0, token="")


class InstanceLock:
    """`acquire()` makes this process the data directory's one instance; `publish(url)` says where it serves."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder).expanduser()
        self.path = self.folder / LOCK_NAME
        self.token = uuid.uuid4().hex
        self.held = False

    def read(self) -> InstanceInfo | None:
        """The lock's current content (None when there is no lock file)."""
        return _read(self.path)

    def running(self) -> InstanceInfo | None:
        """The live instance holding the lock, if any (stale locks of dead processes count as none)."""
        info = self.read()
        if info is None or info.token == self.token:
            return None
        return info if pid_alive(info.pid) else None

    def acquire(self) -> InstanceInfo:
        """Take the lock, taking over a stale one; AlreadyRunningError when a live process holds it."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with _exclusive(self.folder / GUARD_NAME):  # serialises concurrent starts: check-then-write is safe
            current = self.read()
            if current is not None and current.token != self.token and pid_alive(current.pid):
                raise AlreadyRunningError(current, self.path)
            if current is not None and current.pid > 0 and current.token != self.token:
                log.info("taking over the stale instance lock of dead process %s", current.pid)
            info = InstanceInfo(pid=os.getpid(), url=None, started=time.time(), token=self.token)
            atomic_write_text(self.path, json.dumps(asdict(info)))
            self.held = True
            return info

    def publish(self, url: str) -> None:
        """Record where this instance serves, so a second start can find it."""
        if not self.held:
            raise RuntimeError("publish() needs the lock; call acquire() first")
        current = self.read()
        started = current.started if current and current.token == self.token else time.time()
        info = InstanceInfo(pid=os.getpid(), url=url, started=started, token=self.token)
        atomic_write_text(self.path, json.dumps(asdict(info)))

    def release(self) -> None:
        """Remove the lock if (and only if) it is still ours."""
        if not self.held:
            return
        with _exclusive(self.folder / GUARD_NAME):
            current = self.read()
            if current is not None and current.token == self.token:
                self.path.unlink(missing_ok=True)
        self.held = False

    def __enter__(self) -> InstanceLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def wait_for_url(lock: InstanceLock, timeout: float = 30.0, poll_s: float = 0.25) -> InstanceInfo | None:
    """Wait until the running instance has published a URL that answers (None when it did not in time)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = lock.running()
        if info is None:
            return None
        if info.url and url_responds(info.url, timeout=1.0):
            return info
        time.sleep(poll_s)
    return None
