"""Share mode's uploaded datasets: one folder per visitor under the uploads folder, bounded in files and bytes."""

from __future__ import annotations

import hashlib
import logging
import shutil
import time
from pathlib import Path

from app.service.errors import UserError

VISITORS_FOLDER = "visitors"
"""The uploads folder's subfolder that holds one folder per share-mode visitor."""
MAX_VISITOR_FILES = 20
"""Uploaded datasets one visitor may keep on a shared app (replacing one of its own does not count twice)."""
MAX_VISITOR_BYTES = 50 * 1024 * 1024
"""Bytes of uploaded datasets one visitor may keep on a shared app."""
MAX_VISITOR_AGE_S = 24 * 3600.0
"""A visitor's uploads folder whose newest file is older than this is removed."""
MAX_VISITORS_BYTES = 1024 * 1024 * 1024
"""Bytes all visitors' uploads may take together; beyond it the folders used least recently are removed first."""

log = logging.getLogger(__name__)


def visitor_folder(uploads_dir: Path, visitor: str | None) -> Path:
    """The folder of `visitor`'s uploads: named by a hash of its session id (the id never becomes a path).
    None (the app's own callers in share mode: the CLI, tests) is a visitor of its own, like in StudioService."""
    digest = hashlib.sha256((visitor or "").encode("utf-8")).hexdigest()[:16]
    return uploads_dir / VISITORS_FOLDER / digest


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def check_room(folder: Path, name: str, size: int, suffixes: tuple[str, ...]) -> None:
    """Refuse (UserError) an upload of `size` bytes as `name` when the visitor's folder would then hold more
    than MAX_VISITOR_FILES datasets or MAX_VISITOR_BYTES bytes; a file of the same name is replaced, so it
    does not count."""
    try:
        kept = [p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in suffixes and p.name != name]
    except FileNotFoundError:
        kept = []
    if len(kept) >= MAX_VISITOR_FILES:
        raise UserError(f"not uploaded: you already have {len(kept)} uploaded datasets, the most this shared app "
                        f"keeps per visitor; upload a file named like one of yours to replace it")
    total = sum(p.stat().st_size for p in kept) + size
    if total > MAX_VISITOR_BYTES:
        raise UserError(f"not uploaded: your uploads would take {_megabytes(total)}; this shared app keeps at most "
                        f"{_megabytes(MAX_VISITOR_BYTES)} of uploads per visitor (replace one of yours, by its file "
                        "name, with a smaller file)")


def _folder_state(folder: Path) -> tuple[float, int]:
    """(newest modification time, total bytes) of the files in `folder`."""
    newest, total = folder.stat().st_mtime, 0
    for path in folder.iterdir():
        if path.is_file():
            st = path.stat()
            newest, total = max(newest, st.st_mtime), total + st.st_size
    return newest, total


def prune_visitor_folders(uploads_dir: Path, *, keep: Path | None = None, max_age_s: float = MAX_VISITOR_AGE_S,
                          max_total_bytes: int = MAX_VISITORS_BYTES, now: float | None = None) -> list[Path]:
    """Remove visitors' upload folders unused for `max_age_s`, then, while all of them together take more than
    `max_total_bytes`, the least recently used ones (never `keep`, the folder of the visitor uploading now).
    Returns the folders removed."""
    now = time.time() if now is None else now
    states: list[tuple[float, int, Path]] = []
    try:
        for folder in (uploads_dir / VISITORS_FOLDER).iterdir():
            if folder.is_dir() and not folder.is_symlink():
                newest, total = _folder_state(folder)
                states.append((newest, total, folder))
    except OSError:
        return []
    removed: list[Path] = []
    total = sum(size for _, size, _ in states)
    for newest, size, folder in sorted(states):  # least recently used first
        if folder == keep or (now - newest <= max_age_s and total <= max_total_bytes):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
        total -= size
    if removed:
        log.info("removed %d visitor upload folder(s) (unused for %g h, or over %s together)", len(removed),
                 max_age_s / 3600, _megabytes(max_total_bytes))
    return removed
