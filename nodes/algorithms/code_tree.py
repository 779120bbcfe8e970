"""What one candidate program's whole process tree uses while it runs: CPU seconds and scratch disk.

CPU time comes from the run's cgroup where it has one (every process it ever had), else from /proc: the
live processes of its throw-away uid plus the children they reaped. Disk is the scratch folder's size where it is
not a size-limited tmpfs. `TreeWatch.over()` names the first limit passed ('' when none): the runner kills the
tree then.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from nodes.algorithms.code_cgroup import RunCgroup

MAX_SCRATCH_ENTRIES = 10_000
"""Files and folders a scratch folder may hold (each one is a cost to walk, and an inode)."""
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def uid_cpu_seconds(uid: int) -> float:
    """CPU time of the live processes of `uid`, with what their reaped children used."""
    total = 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0.0
    for name in entries:
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    return total / _TICK


def tree_bytes(root: Path, max_entries: int = MAX_SCRATCH_ENTRIES) -> int | None:
    """Bytes under `root` (files' allocated blocks), or None when it holds more than `max_entries` entries."""
    total, seen, stack = 0, 0, [str(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    seen += 1
                    if seen > max_entries:
                        return None
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += max(st.st_size, st.st_blocks * 512) if entry.is_file(follow_symlinks=False) else 0
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return total


@dataclass
class TreeWatch:
    """The limits one program's tree is held to while it runs, checked every few polls."""

    cpu_seconds: float
    disk_bytes: int
    cgroup: RunCgroup | None
    uid: int | None
    scratch: Path | None
    """The host scratch folder to measure (None where it is a size-limited tmpfs)."""

    def cpu_used(self) -> float | None:
        if self.cgroup is not None:
            return self.cgroup.cpu_seconds()
        return uid_cpu_seconds(self.uid) if self.uid is not None else None

    def over(self) -> str:
        """'cpu' or 'disk' for the first limit the tree passed, '' while it is within them (memory is the kernel's:
        the cgroup's limit, else each process's address space)."""
        used = self.cpu_used()
        if used is not None and used > self.cpu_seconds:
            return "cpu"
        if self.scratch is not None:
            size = tree_bytes(self.scratch)
            if size is None or size > self.disk_bytes:
                return "disk"
        return ""
