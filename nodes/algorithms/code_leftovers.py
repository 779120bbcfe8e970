"""Files a throw-away uid left outside its scratch folder (runs without namespaces), removed after its run.

Without bubblewrap a candidate runs as its own uid with the host's /tmp, /var/tmp and /dev/shm: the only places
it can write besides its scratch folder are world-writable folders. After the run (its processes killed) every
entry it owns there is removed, descending only into world-writable folders (the only ones it could write in).
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from pathlib import Path

log = logging.getLogger(__name__)

WRITABLE_ROOTS = ("/tmp", "/var/tmp", "/dev/shm")
MAX_ENTRIES = 100_000
"""Entries looked at per run at most (a guard, far above what a bounded run can make)."""


def remove_uid_files(uid: int, roots: tuple[str, ...] = WRITABLE_ROOTS) -> int:
    """Remove what `uid` owns in the world-writable folders under `roots`; returns how many entries went."""
    removed, seen = 0, 0
    stack = [Path(r) for r in roots if os.path.isdir(r)]
    while stack and seen < MAX_ENTRIES:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_uid == uid:
                removed += _remove(Path(entry.path), stat.S_ISDIR(st.st_mode))
            elif stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_IWOTH:
                stack.append(Path(entry.path))
    if removed:
        log.info("removed %d file(s) a candidate's uid %d left outside its scratch folder", removed, uid)
    return removed


def _remove(path: Path, is_dir: bool) -> int:
    try:
        if is_dir:
            shutil.rmtree(path)
        else:
            path.unlink()
        return 1
    except OSError as exc:
        log.warning("could not remove %s left by a candidate: %s", path, exc)
        return 0
