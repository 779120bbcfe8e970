"""A scratch folder owned by this process: bounded in files, removed when the process exits."""

from __future__ import annotations

import atexit
import logging
import shutil
import tempfile
import threading
from pathlib import Path

from app.platform.fileio import atomic_write_text

log = logging.getLogger(__name__)


class ScratchFolder:
    """Files the app hands to the browser once (reports to download): kept in a private temporary folder that
    holds at most `keep` files (the oldest written are deleted first) and is deleted at process exit."""

    def __init__(self, prefix: str, keep: int = 16) -> None:
        self.prefix = prefix
        self.keep = max(1, keep)
        self._folder: Path | None = None
        self._lock = threading.Lock()
        self._written: list[str] = []
        """File names in the order they were last written (oldest first)."""
        atexit.register(self.clear)

    @property
    def folder(self) -> Path:
        if self._folder is None or not self._folder.is_dir():
            self._folder = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-"))
        return self._folder

    def write_text(self, name: str, text: str) -> Path:
        """Write `name` (a plain file name) and return its path, deleting the oldest files beyond `keep`."""
        if Path(name).name != name or name.startswith("."):
            raise ValueError(f"a scratch file needs a plain file name, got {name!r}")
        with self._lock:
            path = self.folder / name
            atomic_write_text(path, text)
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
        while len(self._written) > self.keep:
            (self.folder / self._written.pop(0)).unlink(missing_ok=True)

    def clear(self) -> None:
        """Delete the folder and everything in it (also run at process exit)."""
        with self._lock:
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)
                log.debug("removed scratch folder %s", self._folder)
                self._folder = None
                self._written.clear()
