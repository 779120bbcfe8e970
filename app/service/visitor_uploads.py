"""Share mode's uploaded datasets: one folder per visitor under the uploads folder, bounded in files and bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path

from app.service.errors import UserError

VISITORS_FOLDER = "visitors"
"""The uploads folder's subfolder that holds one folder per share-mode visitor."""
MAX_VISITOR_FILES = 20
"""Uploaded datasets one visitor may keep on a shared app (replacing one of its own does not count twice)."""
MAX_VISITOR_BYTES = 50 * 1024 * 1024
"""Bytes of uploaded datasets one visitor may keep on a shared app."""


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
