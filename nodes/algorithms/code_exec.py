"""Running untrusted programs confined: bubblewrap namespaces when they work, rlimits always, a uid of its own.

Each run gets a scratch folder (the only writable place besides a private /tmp), a fresh process as a
throw-away uid when we are root (so RLIMIT_NPROC bounds a fork bomb and root's files are unreadable), the
limits CPU time, address space, file size (which caps its output files too) and process count, and a wall
clock after which the whole process group is killed. With bubblewrap (`bwrap`) it also runs in new pid,
network, IPC and UTS namespaces with only the system's and Python's folders mounted read-only: no network,
no home, no survivors (the pid namespace dies with its first process). Where bwrap does not work (macOS,
containers without namespaces) `isolation()` says so and runs get the limits only; see docs/security.md.
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
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

log = logging.getLogger(__name__)

ISOLATION_ENV = "METAGEN_CODE_ISOLATION"
"""`none` turns namespaces off (limits only), e.g. to measure their cost; anything else: automatic."""
MAX_PROCESSES = 32
"""Processes (threads included) one run may have at once: bounds a fork bomb."""
UID_RANGE = (1_900_000_000, 2_000_000_000)
"""Throw-away uids a run takes when we are root; no account uses them."""
SANDBOX_DIR = "/sandbox"


@dataclass(frozen=True)
class ExecLimits:
    """What one run may use."""

    timeout_s: float = 5.0
    memory_mb: int = 512
    output_bytes: int = 1 << 20
    """Largest file the program may write, its stdout / stderr / result files included."""


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


def _bwrap_argv(scratch: Path) -> list[str]:
    argv = [bwrap_path() or "bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr", "--dev", "/dev",
            "--proc", "/proc", "--tmpfs", "/tmp", "--bind", str(scratch), SANDBOX_DIR, "--chdir", SANDBOX_DIR]
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


@lru_cache(maxsize=1)
def isolation() -> str:
    """'bwrap' when namespaces work here, else 'none' (limits only); checked once."""
    if os.environ.get(ISOLATION_ENV, "").lower() == "none":
        return "none"
    if sys.platform != "linux" or bwrap_path() is None:
        return "none"
    with tempfile.TemporaryDirectory(prefix="metagen-code-probe-") as tmp:
        try:
            proc = subprocess.run([*_bwrap_argv(Path(tmp)), sandbox_python(), "-I", "-S", "-c", "pass"],
                                  capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("bubblewrap does not work here (%s): code runs with limits only", exc)
            return "none"
    if proc.returncode != 0:
        log.warning("bubblewrap does not work here (%s): code runs with limits only",
                    proc.stderr.decode(errors="replace").strip()[:200])
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


def _limits_preexec(limits: ExecLimits, uid: int | None, isolated: bool) -> None:
    """In the child before exec: rlimits, and (root, limits only) the throw-away uid."""
    import resource

    mem = int(limits.memory_mb) * 1024 * 1024
    cpu = max(1, int(limits.timeout_s + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.output_bytes, limits.output_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if not isolated:  # under bwrap the harness sets these after dropping to its uid (bwrap itself needs more)
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_NPROC, (MAX_PROCESSES, MAX_PROCESSES))
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
    isolated = isolation() == "bwrap" if isolate is None else bool(isolate)
    uid = _pick_uid()
    python = sandbox_python() if isolated else _readable_python(uid)
    if python is None:  # as root without a uid of its own nothing would bound a fork bomb: refuse
        return ExecResult(None, "", "", "", False, False, refused=(
            "no Python interpreter that a throw-away uid can run (and running candidates as root leaves fork "
            "bombs unbounded); install bubblewrap or a system python3"))
    # a throw-away uid without namespaces reaches its folder by path: under /tmp, not a private temp folder
    base = "/tmp" if uid is not None and not isolated and os.path.isdir("/tmp") else None
    with tempfile.TemporaryDirectory(prefix="metagen-code-", dir=base) as tmp:
        scratch, out = Path(tmp) / "work", Path(tmp) / "out"
        os.chmod(tmp, 0o711)  # the run's uid passes through to its scratch folder, and sees nothing else here
        scratch.mkdir()
        out.mkdir(mode=0o700)
        for name, text in (files or {}).items():
            (scratch / name).write_text(text, encoding="utf-8")
        if uid is not None:
            os.chown(scratch, uid, uid)
        cwd = SANDBOX_DIR if isolated else str(scratch)
        env = {"PATH": "/usr/bin:/bin", "HOME": cwd, "TMPDIR": "/tmp", "LANG": "C.UTF-8",
               "PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1",
               "METAGEN_SANDBOX": f"{uid or ''}:{int(limits.memory_mb)}:{MAX_PROCESSES}:{int(isolated)}"}
        argv = [python, "-I", "-S", *args]
        if isolated:
            argv = [*_bwrap_argv(scratch), *argv]
        return _run(argv, stdin, limits, scratch, out, env, uid, isolated)


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
         uid: int | None, isolated: bool) -> ExecResult:
    paths = {name: out / name for name in ("stdin", "stdout", "stderr", "results")}
    paths["stdin"].write_text(stdin, encoding="utf-8")
    handles = {name: open(p, "rb" if name == "stdin" else "wb") for name, p in paths.items()}
    timed_out = False
    try:
        result_fd = handles["results"].fileno()
        try:
            proc = subprocess.Popen(
                argv, stdin=handles["stdin"], stdout=handles["stdout"], stderr=handles["stderr"], cwd=str(scratch),
                env={**env, "METAGEN_RESULT_FD": str(result_fd)}, start_new_session=True, pass_fds=(result_fd,),
                preexec_fn=lambda: _limits_preexec(limits, uid, isolated))
        except OSError as exc:  # the sandbox itself did not start: no verdict on the program
            return ExecResult(None, "", "", "", False, isolated,
                              refused=f"the sandbox could not start ({argv[0]}: {exc.strerror or exc})")
        try:
            returncode: int | None = proc.wait(timeout=limits.timeout_s * 1.5 + 1.0)
        except subprocess.TimeoutExpired:
            timed_out, returncode = True, None
    finally:
        if "proc" in locals():
            _end(proc, uid)
        for f in handles.values():
            f.close()
    cap = limits.output_bytes
    return ExecResult(returncode, _read_capped(paths["stdout"], cap), _read_capped(paths["stderr"], cap),
                      _read_capped(paths["results"], cap), timed_out, isolated)


def _end(proc: subprocess.Popen[bytes], uid: int | None) -> None:
    """Nothing of the run survives it: its process group, its namespace (bwrap's init), its uid."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    if uid is not None:
        _kill_uid(uid)
