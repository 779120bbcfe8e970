"""A cgroup per candidate program, where one can be made: its whole process tree's memory, processes and CPU time.

cgroup v2 (memory.max, memory.swap.max, pids.max, cpu.stat, cgroup.kill) where our own cgroup may have
children with those controllers, else cgroup v1 (the memory, pids and cpuacct hierarchies, each a child of
ours). `RunCgroup.create` answers None when neither can be made (not root, read-only /sys/fs/cgroup, no
delegation): the runner then falls back to fewer processes with the memory divided among them. Set
$METAGEN_CODE_CGROUP=none to turn cgroups off (e.g. to check the fallback).
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_ENV = "METAGEN_CODE_CGROUP"
ROOT = Path("/sys/fs/cgroup")


def _own_path(controller: str) -> str | None:
    """Our cgroup's path in the hierarchy of `controller` ('' for the v2 unified one)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3 and (controller in parts[1].split(",") if controller else parts[0] == "0"):
            return parts[2]
    return None


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


PREFIX = "metagen-code-"
_OWNED = re.compile(rf"{PREFIX}(\d+)-(\d+)-(\d+)-[0-9a-f]{{8}}")
"""A cgroup's name says who made it: metagen-code-NS-PID-START-RANDOM, the pid namespace (its inode), the process id
in it and the process's start time (clock ticks after boot). Other names (an older studio's, or one made where /proc
could not say) are never swept: nothing proves their process is gone."""
_swept: set[Path] = set()
"""The parent folders already cleared of stale cgroups by this process (once each)."""


def _start_time(pid: int | str) -> int | None:
    """A process's start time (/proc/PID/stat field 22, clock ticks after boot); None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])  # the command name may hold spaces and ")": split after it
    except (OSError, ValueError, IndexError):
        return None


def owner() -> tuple[int, int, int] | None:
    """(pid namespace, pid, start time) of this process, or None where /proc cannot prove them: no /proc, or a /proc
    mounted for another pid namespace (under `unshare -p` without its own /proc, /proc/PID is not our PID)."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
        if int(os.readlink("/proc/self")) != os.getpid():
            return None
    except (OSError, ValueError):
        return None
    start = _start_time("self")
    return (namespace, os.getpid(), start) if start is not None else None


def cgroup_name() -> str:
    """A fresh cgroup name for this process, naming its owner: only a sweep that proves the owner gone removes it."""
    me = owner()
    who = "-".join(map(str, me)) if me is not None else f"unproven-{os.getpid()}"
    return f"{PREFIX}{who}-{secrets.token_hex(4)}"


def _stale(name: str, me: tuple[int, int, int]) -> bool:
    """Whether `name` is the cgroup of a process of our pid namespace that is gone (no such pid now, or the pid now
    belongs to a process that started at another time)."""
    m = _OWNED.fullmatch(name)
    return m is not None and int(m.group(1)) == me[0] and _start_time(int(m.group(2))) != int(m.group(3))


def sweep_stale(parent: Path) -> int:
    """Remove the cgroups a killed studio left under `parent` (made by a process of this pid namespace that is gone),
    killing any candidate program still in them first; once per parent and process. How many were removed."""
    if parent in _swept:
        return 0
    _swept.add(parent)
    me = owner()
    if me is None:
        return 0
    try:
        stale = [d for d in parent.iterdir() if _stale(d.name, me) and d.is_dir()]
    except OSError:
        return 0
    for d in stale:
        version = 2 if (d / "cgroup.kill").exists() else 1
        RunCgroup(version, [d], None, d, 0, [d / "cgroup.procs"]).remove()
    removed = sum(1 for d in stale if not d.exists())
    if removed:
        log.info("removed %d cgroup(s) left under %s by a studio that was killed", removed, parent)
    return removed


@dataclass
class RunCgroup:
    """The cgroup folder(s) of one program: one v2 folder, or one per v1 controller."""

    version: int
    dirs: list[Path]
    cpu_dir: Path | None
    memory_dir: Path
    memory_bytes: int
    procs: list[Path] = field(default_factory=list)
    """The cgroup.procs files a new process writes itself into (before exec)."""

    @classmethod
    def create(cls, memory_bytes: int, max_pids: int) -> RunCgroup | None:
        """A fresh cgroup holding at most `memory_bytes` and `max_pids` tasks, or None where none can be made."""
        if os.environ.get(CGROUP_ENV, "").lower() == "none" or not ROOT.is_dir():
            return None
        name = cgroup_name()
        return cls._v2(name, memory_bytes, max_pids) or cls._v1(name, memory_bytes, max_pids)

    @classmethod
    def _v2(cls, name: str, memory_bytes: int, max_pids: int) -> RunCgroup | None:
        own = _own_path("")
        if own is None or not (ROOT / "cgroup.controllers").exists():
            return None
        sweep_stale(ROOT / own.lstrip("/"))
        d = ROOT / own.lstrip("/") / name
        try:
            d.mkdir()
        except OSError:
            return None
        group = cls(2, [d], d, d, memory_bytes, [d / "cgroup.procs"])
        ok = (_write(d / "memory.max", str(memory_bytes)) and _write(d / "pids.max", str(max_pids))
              and (d / "cpu.stat").exists())
        if not ok:
            group.remove()
            return None
        _write(d / "memory.swap.max", "0")
        return group

    @classmethod
    def _v1(cls, name: str, memory_bytes: int, max_pids: int) -> RunCgroup | None:
        dirs: dict[str, Path] = {}
        for controller in ("memory", "pids", "cpuacct"):
            own = _own_path(controller)
            base = ROOT / controller
            if own is None or not base.is_dir():
                return cls._undo(dirs)
            sweep_stale(base / own.lstrip("/"))
            d = base / own.lstrip("/") / name
            try:
                d.mkdir()
            except OSError:
                return cls._undo(dirs)
            dirs[controller] = d
        mem = dirs["memory"]
        if not (_write(mem / "memory.limit_in_bytes", str(memory_bytes))
                and _write(dirs["pids"] / "pids.max", str(max_pids))):
            return cls._undo(dirs)
        _write(mem / "memory.memsw.limit_in_bytes", str(memory_bytes))  # no swapping past it (where swap is counted)
        _write(mem / "memory.swappiness", "0")
        return cls(1, list(dirs.values()), dirs["cpuacct"], mem, memory_bytes,
                   [d / "cgroup.procs" for d in dirs.values()])

    @staticmethod
    def _undo(dirs: dict[str, Path]) -> None:
        for d in dirs.values():
            try:
                d.rmdir()
            except OSError:
                pass
        return None

    def join(self) -> None:
        """In the child before exec: move this process into the cgroup (its children follow)."""
        pid = str(os.getpid())
        for procs in self.procs:
            with open(procs, "w") as f:
                f.write(pid)

    def cpu_seconds(self) -> float:
        """CPU time of every process the program ever had, the dead ones included."""
        if self.cpu_dir is None:
            return 0.0
        if self.version == 2:
            try:
                for line in (self.cpu_dir / "cpu.stat").read_text().splitlines():
                    if line.startswith("usage_usec "):
                        return int(line.split()[1]) / 1e6
            except (OSError, ValueError):
                return 0.0
            return 0.0
        ns = _read_int(self.cpu_dir / "cpuacct.usage")
        return ns / 1e9 if ns else 0.0

    def memory_hit(self) -> bool:
        """Whether the kernel killed a process of the tree for passing the memory limit."""
        name, key = ("memory.events", "oom_kill") if self.version == 2 else ("memory.oom_control", "oom_kill")
        try:
            for line in (self.memory_dir / name).read_text().splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[0] == key:
                    return int(parts[1]) > 0
        except (OSError, ValueError):
            return False
        return False

    def pids(self) -> list[int]:
        out: set[int] = set()
        for procs in self.procs:
            try:
                out.update(int(p) for p in procs.read_text().split())
            except (OSError, ValueError):
                continue
        return sorted(out)

    def kill(self) -> None:
        """SIGKILL every process in the cgroup (new ones included: v2's cgroup.kill, else until it is empty)."""
        if self.version == 2 and _write(self.dirs[0] / "cgroup.kill", "1"):
            return
        for _ in range(100):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.01)

    def remove(self) -> None:
        """Kill what is left and remove the folder(s) (a dying process may take a moment to leave)."""
        self.kill()
        for d in self.dirs:
            for _ in range(200):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
            else:
                log.warning("could not remove the cgroup %s", d)
