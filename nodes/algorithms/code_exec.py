"""Running untrusted programs confined: bubblewrap namespaces when they work, rlimits always, a uid of its own.

Each run gets a scratch folder (the only writable place besides a private /tmp), a fresh process as a
throw-away uid when we are root (so RLIMIT_NPROC bounds a fork bomb and root's files are unreadable), the
limits CPU time, address space, file size (which caps its output files too) and process count, and a wall
clock after which the whole process group is killed. The limits hold for the program's whole process tree: a
cgroup where one can be made (code_cgroup: memory, processes, CPU time), else fewer processes with the memory
divided among them; CPU seconds and scratch disk are watched while it runs (code_tree) and a size-limited tmpfs
holds the scratch under bubblewrap. With bubblewrap (`bwrap`) it also runs in new pid,
network, IPC and UTS namespaces with only the system's and Python's folders mounted read-only: no network,
no home, no survivors (the pid namespace dies with its first process). Where bwrap does not work (macOS,
containers without namespaces) `isolation()` says so and runs get the limits only; see docs/security.md.
Cancel and the run's cap (`ExecLimits.stop`) kill the tree within POLL_S.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from nodes.algorithms.code_cgroup import RunCgroup
from nodes.algorithms.code_leftovers import remove_uid_files
from nodes.algorithms.code_tree import TreeWatch
from nodes.algorithms.confined.prelude import SETTINGS_ENV, Settings

log = logging.getLogger(__name__)

ISOLATION_ENV = "METAGEN_CODE_ISOLATION"
"""`none` turns namespaces off (limits only), e.g. to measure their cost; anything else: automatic."""
MAX_PROCESSES = 32
"""Processes (threads included) one run may have at once: bounds a fork bomb."""
FALLBACK_PROCESSES = 4
"""Without a cgroup: processes (threads included) one run may have, each with its share of the memory."""
MIN_SHARE_MB = 64
"""Without a cgroup: the least memory one process gets (fewer processes rather than less each)."""
WATCH_EVERY = 4
"""The tree's CPU time and disk are measured every this many polls."""
WALL_FACTOR, WALL_EXTRA_S = 1.5, 1.0
"""A run's wall clock: WALL_FACTOR x timeout_s + WALL_EXTRA_S (waiting counts there, not in CPU time)."""
UID_RANGE = (1_900_000_000, 2_000_000_000)
"""Throw-away uids a run takes when we are root; no account uses them."""
SANDBOX_DIR = "/sandbox"
POLL_S = 0.05
"""How often a running program's stop check (cancel, the run's cap) is polled: it dies well within a second."""


@dataclass(frozen=True)
class ExecLimits:
    """What one run may use."""

    timeout_s: float = 5.0
    memory_mb: int = 512
    output_bytes: int = 1 << 20
    """Largest file the program may write, its stdout / stderr / result files included."""
    disk_mb: int = 64
    """Scratch space of the whole tree (the scratch folder; under bubblewrap each of /sandbox and /tmp)."""
    stop: Callable[[], bool] | None = field(default=None, compare=False, repr=False)
    """Polled while the program runs: True (the run was cancelled or reached its cap) kills it at once, and a
    program not yet started is not started."""


@dataclass
class ExecResult:
    """How a run ended: its (capped) output files' text and why it stopped."""

    returncode: int | None
    stdout: str
    stderr: str
    results: str
    """What the program wrote to the result file ($METAGEN_RESULT_FD: the harness's result lines)."""
    timed_out: bool
    isolated: bool
    refused: str = ""
    """Why the program was not run at all ('' when it ran)."""
    cancelled: bool = False
    """Killed (or never started) because `ExecLimits.stop` said so."""
    stopped_by: str = ""
    """The tree limit that ended it: 'cpu' (CPU seconds of the tree), 'disk', 'memory' (the cgroup's), or ''."""


STOPPED = "not run: the run was stopped (cancelled, or it reached its cap)"


def _python_roots() -> list[str]:
    """The folders the interpreter needs (read-only) besides /usr."""
    roots = {os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix) if p}
    return sorted(r for r in roots if not r.startswith("/usr/"))


def sandbox_python() -> str:
    """The interpreter runs use: the base installation's, not a virtual environment's."""
    base = getattr(sys, "_base_executable", "") or sys.executable
    return os.path.realpath(base)


@lru_cache(maxsize=1)
def bwrap_path() -> str | None:
    """bubblewrap's absolute path, looked up once on the app's own PATH (runs get PATH=/usr/bin:/bin, where a
    bwrap installed elsewhere would not be found), or None when there is none."""
    found = shutil.which("bwrap")
    return os.path.abspath(found) if found else None


@lru_cache(maxsize=1)
def _bwrap_sizes() -> bool:
    """Whether this bubblewrap can size a tmpfs (`--size`, bubblewrap 0.8)."""
    try:
        out = subprocess.run([bwrap_path() or "bwrap", "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--size" in out.stdout + out.stderr


def _bwrap_argv(scratch: Path, disk_bytes: int | None = None, files: tuple[str, ...] = ()) -> list[str]:
    """bwrap's arguments; with `disk_bytes` /tmp and /sandbox are tmpfs of that size (the files read-only in it),
    else /sandbox is the host's scratch folder."""
    argv = [bwrap_path() or "bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr", "--dev", "/dev", "--proc", "/proc"]
    if disk_bytes is None:
        argv += ["--tmpfs", "/tmp", "--bind", str(scratch), SANDBOX_DIR]
    else:
        size = str(max(1 << 20, disk_bytes))
        argv += ["--size", size, "--tmpfs", "/tmp", "--perms", "01777", "--size", size, "--tmpfs", SANDBOX_DIR]
        for name in files:
            argv += ["--ro-bind", str(scratch / name), f"{SANDBOX_DIR}/{name}"]
    argv += ["--chdir", SANDBOX_DIR]
    for link in ("bin", "lib", "lib64", "sbin"):
        target = Path("/") / link
        if target.is_symlink():
            argv += ["--symlink", os.readlink(target), f"/{link}"]
        elif target.is_dir():
            argv += ["--ro-bind", str(target), f"/{link}"]
    for root in _python_roots():  # its parents (e.g. /root) readable by the run's uid, holding nothing else
        for parent in reversed(Path(root).parents):
            if parent != Path("/"):
                argv += ["--perms", "0755", "--dir", str(parent)]
        argv += ["--ro-bind", root, root]
    return [*argv, "--"]


def isolation_probe() -> tuple[bool, str]:
    """Runs `python -c pass` under bubblewrap as code runs get it: (works, what was found or why not)."""
    if os.environ.get(ISOLATION_ENV, "").lower() == "none":
        return False, f"turned off by {ISOLATION_ENV}=none"
    if sys.platform != "linux":
        return False, f"bubblewrap namespaces are Linux only (this is {sys.platform})"
    bwrap = bwrap_path()
    if bwrap is None:
        return False, "bubblewrap (bwrap) is not installed"
    with tempfile.TemporaryDirectory(prefix="metagen-code-probe-") as tmp:
        try:
            proc = subprocess.run([*_bwrap_argv(Path(tmp)), sandbox_python(), "-I", "-S", "-c", "pass"],
                                  capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"{bwrap} did not run: {exc}"
    if proc.returncode != 0:
        return False, f"{bwrap} failed: {proc.stderr.decode(errors='replace').strip()[:200] or proc.returncode}"
    return True, f"{bwrap} works (new pid, network, IPC and UTS namespaces)"


@lru_cache(maxsize=1)
def isolation() -> str:
    """'bwrap' when namespaces work here, else 'none' (limits only); checked once."""
    works, why = isolation_probe()
    if not works:
        if os.environ.get(ISOLATION_ENV, "").lower() != "none" and bwrap_path() is not None:
            log.warning("bubblewrap does not work here (%s): code runs with limits only", why)
        return "none"
    return "bwrap"


def isolation_note() -> str:
    """One line for the trace: what confines the candidates' code here."""
    if isolation() == "bwrap":
        return f"isolated: bubblewrap ({bwrap_path()}) namespaces (no network, private /tmp, no home) and limits"
    return ("NOT isolated: namespaces are unavailable here (no working bubblewrap), so candidate code runs with "
            "limits only (CPU, memory, file size, processes); it can read your files and reach the network")


def _pick_uid() -> int | None:
    return secrets.randbelow(UID_RANGE[1] - UID_RANGE[0]) + UID_RANGE[0] if os.geteuid() == 0 else None


def process_shares(memory_mb: int, cgroup: bool) -> tuple[int, int]:
    """(memory MB per process, processes): the whole memory and MAX_PROCESSES under a cgroup (it bounds the tree),
    else FALLBACK_PROCESSES at most, each with an equal share of at least MIN_SHARE_MB (the tree stays within it)."""
    if cgroup:
        return int(memory_mb), MAX_PROCESSES
    n = max(1, min(FALLBACK_PROCESSES, int(memory_mb) // MIN_SHARE_MB))
    return int(memory_mb) // n, n


def _limits_preexec(limits: ExecLimits, uid: int | None, isolated: bool, cgroup: RunCgroup | None) -> None:
    """In the child before exec: into the cgroup, rlimits, and (root, limits only) the throw-away uid."""
    import resource

    if cgroup is not None:
        cgroup.join()
    mem_mb, nproc = process_shares(limits.memory_mb, cgroup is not None)
    mem = mem_mb * 1024 * 1024
    cpu = max(1, int(limits.timeout_s + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.output_bytes, limits.output_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if not isolated:  # under bwrap the harness sets these after dropping to its uid (bwrap itself needs more)
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)


def _kill_uid(uid: int) -> None:
    """Kill every process of the throw-away uid (survivors that left the process group)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _read_capped(path: Path, cap: int) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(cap).decode("utf-8", errors="replace")
    except OSError:
        return ""


def run_confined(args: list[str], stdin: str, limits: ExecLimits, *, files: dict[str, str] | None = None,
                 isolate: bool | None = None) -> ExecResult:
    """Run `python <args>` in a fresh scratch folder holding `files`, confined as the module says."""
    if limits.stop is not None and limits.stop():
        return ExecResult(None, "", "", "", False, False, refused=STOPPED, cancelled=True)
    isolated = isolation() == "bwrap" if isolate is None else bool(isolate)
    uid = _pick_uid()
    python = sandbox_python() if isolated else _readable_python(uid)
    if python is None:  # as root without a uid of its own nothing would bound a fork bomb: refuse
        return ExecResult(None, "", "", "", False, False, refused=(
            "no Python interpreter that a throw-away uid can run (and running candidates as root leaves fork "
            "bombs unbounded); install bubblewrap or a system python3"))
    # a throw-away uid without namespaces reaches its folder by path: under /tmp, not a private temp folder
    base = "/tmp" if uid is not None and not isolated and os.path.isdir("/tmp") else None
    cgroup = RunCgroup.create(int(limits.memory_mb) * 1024 * 1024, MAX_PROCESSES + 2)  # + bwrap and its init
    try:
        with tempfile.TemporaryDirectory(prefix="metagen-code-", dir=base) as tmp:
            scratch, out = Path(tmp) / "work", Path(tmp) / "out"
            os.chmod(tmp, 0o711)  # the run's uid passes through to its scratch folder, and sees nothing else here
            scratch.mkdir()
            out.mkdir(mode=0o700)
            for name, text in (files or {}).items():
                (scratch / name).write_text(text, encoding="utf-8")
            if uid is not None:
                os.chown(scratch, uid, uid)
            sized = isolated and _bwrap_sizes()  # the scratch is a tmpfs of disk_mb: nothing to watch
            watch = TreeWatch(cpu_seconds=max(1.0, float(limits.timeout_s)), disk_bytes=int(limits.disk_mb) << 20,
                              cgroup=cgroup, uid=uid, scratch=None if sized else scratch)
            mem_mb, nproc = process_shares(limits.memory_mb, cgroup is not None)
            cwd = SANDBOX_DIR if isolated else str(scratch)
            env = {"PATH": "/usr/bin:/bin", "HOME": cwd, "TMPDIR": "/tmp", "LANG": "C.UTF-8",
                   "PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1",
                   SETTINGS_ENV: Settings(uid, mem_mb, nproc, isolated).to_json()}
            argv = [python, "-I", "-S", *args]
            if isolated:
                disk = int(limits.disk_mb) << 20 if sized else None
                argv = [*_bwrap_argv(scratch, disk, tuple(files or ())), *argv]
            return _run(argv, stdin, limits, scratch, out, env, uid, isolated, watch)
    finally:
        if cgroup is not None:
            cgroup.remove()
        if uid is not None and not isolated:  # its processes are gone: now its files outside the scratch
            remove_uid_files(uid)


def _readable_python(uid: int | None) -> str | None:
    """Without namespaces: the interpreter the run's uid can execute (ours, else the system's python3)."""
    if uid is None:
        return sandbox_python()
    for candidate in (sandbox_python(), shutil.which("python3", path="/usr/bin:/bin")):
        if candidate and _world_readable(os.path.realpath(candidate)):
            return os.path.realpath(candidate)
    return None


def _world_readable(path: str) -> bool:
    p = Path(path)
    return all(os.stat(d).st_mode & 0o005 == 0o005 for d in [*reversed(p.parents), p] if d != Path("/"))


def _run(argv: list[str], stdin: str, limits: ExecLimits, scratch: Path, out: Path, env: dict[str, str],
         uid: int | None, isolated: bool, watch: TreeWatch) -> ExecResult:
    paths = {name: out / name for name in ("stdin", "stdout", "stderr", "results")}
    paths["stdin"].write_text(stdin, encoding="utf-8")
    handles = {name: open(p, "rb" if name == "stdin" else "wb") for name, p in paths.items()}
    timed_out = cancelled = False
    returncode: int | None = None
    stopped_by = ""
    try:
        result_fd = handles["results"].fileno()
        try:
            proc = subprocess.Popen(
                argv, stdin=handles["stdin"], stdout=handles["stdout"], stderr=handles["stderr"], cwd=str(scratch),
                env={**env, "METAGEN_RESULT_FD": str(result_fd)}, start_new_session=True, pass_fds=(result_fd,),
                preexec_fn=lambda: _limits_preexec(limits, uid, isolated, watch.cgroup))
        except OSError as exc:  # the sandbox itself did not start: no verdict on the program
            return ExecResult(None, "", "", "", False, isolated,
                              refused=f"the sandbox could not start ({argv[0]}: {exc.strerror or exc})")
        returncode, timed_out, cancelled, stopped_by = _wait(proc, limits, watch)
    finally:
        if "proc" in locals():
            code = _end(proc, uid, watch.cgroup)
            returncode = code if stopped_by else returncode
        for f in handles.values():
            f.close()
    if not stopped_by and watch.cgroup is not None and watch.cgroup.memory_hit():
        stopped_by = "memory"
    cap = limits.output_bytes
    return ExecResult(returncode, _read_capped(paths["stdout"], cap), _read_capped(paths["stderr"], cap),
                      _read_capped(paths["results"], cap), timed_out, isolated, cancelled=cancelled,
                      stopped_by=stopped_by)


def _wait(proc: subprocess.Popen[bytes], limits: ExecLimits, watch: TreeWatch) -> tuple[int | None, bool, bool, str]:
    """(returncode, timed_out, cancelled, stopped_by): wait for the program up to its wall clock (1.5 x timeout_s
    + 1 s), polling `limits.stop` every POLL_S so a cancelled run or one at its cap does not wait for its programs,
    and the tree's CPU time and disk every WATCH_EVERY polls."""
    deadline = time.monotonic() + limits.timeout_s * WALL_FACTOR + WALL_EXTRA_S
    polls = 0
    while True:
        try:
            return proc.wait(timeout=max(0.0, min(POLL_S, deadline - time.monotonic()))), False, False, ""
        except subprocess.TimeoutExpired:
            pass
        if limits.stop is not None and limits.stop():
            return None, False, True, ""
        if time.monotonic() >= deadline:
            return None, True, False, ""
        polls += 1
        if polls % WATCH_EVERY == 0:
            over = watch.over()
            if over:
                return None, False, False, over


def _end(proc: subprocess.Popen[bytes], uid: int | None, cgroup: RunCgroup | None) -> int:
    """Nothing of the run survives it: its cgroup, its process group, its namespace (bwrap's init), its uid.
    Returns the program's exit status."""
    if cgroup is not None:
        cgroup.kill()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    code = proc.wait()
    if uid is not None:
        _kill_uid(uid)
    return code
