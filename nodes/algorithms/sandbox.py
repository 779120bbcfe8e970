"""The python verifier's sandbox: user code scores one candidate in a confined child process with limits.

The code is either an expression over `candidate` (text), `answer` (extracted answer or None),
`reference` and `inputs` (the verifier's other inputs), e.g. `answer == "42"`, or statements that
define `def verify(candidate, inputs): ...` (called with those two arguments) or assign `score`.
The result may be a bool (1/0), a number, a (score, reason) pair or {"score": .., "reason": ..}.

The child runs through the confined runner of candidates' code (`code_exec.run_confined`: bubblewrap's pid,
network, IPC and UTS namespaces where it works, else a throw-away uid when the app runs as root; a cgroup, CPU,
memory, process and disk limits; [security.md](../../docs/security.md)), on the standard library only (`python -I
-S`). Inside it, before any user code runs, an audit hook refuses network access, new processes, ctypes and files
outside its own folder, so ordinary mistakes get a clear reason ("starting processes is blocked ..."); that hook is
a convenience, not the boundary: the boundary is the confinement around the process, which code that works around
the hook (`_posixsubprocess.fork_exec`) still meets. Every failure (timeout, exception, blocked call, memory)
becomes a clean `SandboxResult` with score 0, passed False and a one-line reason; nothing raises to the caller.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from nodes.algorithms.code_exec import ExecLimits, ExecResult, run_confined

RESULT_MARK = "\x00METAGEN_RESULT\x00"

_CHILD = r'''
import io, json, sys
MARK = "\x00METAGEN_RESULT\x00"
out = sys.stdout
def report(**data):
    out.write(MARK + json.dumps(data) + "\n")
    out.flush()
req = json.loads(sys.stdin.read())
try:
    import resource
    mem = req["memory_mb"] * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    cpu = max(1, int(req["timeout_s"] + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
except (ImportError, ValueError, OSError) as exc:  # no resource module (Windows) or limits refused
    limits_note = f"limits not applied: {exc}"
else:
    limits_note = ""

BLOCKED = {
    "socket.__new__": "network access", "socket.connect": "network access", "socket.bind": "network access",
    "socket.getaddrinfo": "network access", "socket.gethostbyname": "network access",
    "subprocess.Popen": "starting processes", "os.system": "starting processes", "os.exec": "starting processes",
    "os.posix_spawn": "starting processes", "os.spawn": "starting processes", "os.fork": "starting processes",
    "os.forkpty": "starting processes", "pty.spawn": "starting processes",
    "ctypes.dlopen": "loading native code", "ctypes.dlsym": "loading native code",
}

class Blocked(Exception):
    pass

import os
WORKDIR = os.path.realpath(os.getcwd())
READ_ROOTS = tuple(sorted({os.path.realpath(p) for p in
                           (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path)
                           if p}))
PATH_EVENTS = {"os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.rename": (0, 1),
               "os.link": (0, 1), "os.symlink": (0, 1), "os.chmod": (0,), "os.chown": (0,),
               "os.truncate": (0,), "os.utime": (0,), "shutil.rmtree": (0,), "shutil.copyfile": (1,),
               "shutil.copymode": (1,), "shutil.copystat": (1,), "shutil.move": (0, 1),
               "os.chdir": (0,)}

def _inside(path, roots):
    real = os.path.realpath(os.path.join(WORKDIR, os.fsdecode(path)))
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)

def _writes(mode, flags):
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return bool((flags or 0) & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC))

def hook(event, args):
    what = BLOCKED.get(event)
    if what is not None:
        raise Blocked(f"{what} is blocked in the python verifier ({event})")
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        path = args[0]
        if _inside(path, (WORKDIR,)):
            return
        mode = args[1] if len(args) > 1 else None
        flags = args[2] if len(args) > 2 else 0
        if not _writes(mode, flags) and _inside(path, READ_ROOTS):
            return
        raise Blocked(f"opening {os.fsdecode(path)!r} is blocked in the python verifier "
                      "(only files in its own temporary folder)")
    if event in PATH_EVENTS:
        for i in PATH_EVENTS[event]:
            if i < len(args) and isinstance(args[i], (str, bytes, os.PathLike)) and not _inside(args[i], (WORKDIR,)):
                raise Blocked(f"changing {os.fsdecode(args[i])!r} is blocked in the python verifier "
                              f"(only files in its own temporary folder; {event})")
    if event == "import" and args and args[0] in ("socket", "_socket", "ctypes", "_ctypes"):
        raise Blocked(f"importing {args[0]} is blocked in the python verifier (no network, no native code)")

sys.addaudithook(hook)
captured = io.StringIO()
sys.stdout = captured
env = {"candidate": req["candidate"], "answer": req["answer"], "reference": req["reference"],
       "inputs": req["inputs"], "__name__": "__verifier__"}
code = req["code"]
try:
    try:
        compiled = compile(code, "<verifier>", "eval")
        value = eval(compiled, env)
    except SyntaxError:
        exec(compile(code, "<verifier>", "exec"), env)
        if callable(env.get("verify")):
            value = env["verify"](req["candidate"], req["inputs"])
        elif "score" in env:
            value = env["score"]
        else:
            raise NameError("the code must be an expression, define verify(candidate, inputs), or set score")
    reason = ""
    if isinstance(value, dict):
        value, reason = value.get("score"), str(value.get("reason", ""))
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        value, reason = value[0], str(value[1])
    if isinstance(value, bool) or value is None:
        score = 1.0 if value else 0.0
    elif isinstance(value, (int, float)):
        score = float(value)
        if score != score:
            raise ValueError("the verifier returned NaN")
    else:
        raise TypeError(f"the verifier returned {type(value).__name__}; return a bool, a number, "
                        "(score, reason) or {'score': ..., 'reason': ...}")
    report(ok=True, score=score, reason=reason, stdout=captured.getvalue()[-2000:], note=limits_note)
except MemoryError:
    report(ok=False, reason=f"memory limit exceeded ({req['memory_mb']} MB)", stdout=captured.getvalue()[-2000:])
except Blocked as exc:
    report(ok=False, reason=str(exc), stdout=captured.getvalue()[-2000:])
except BaseException as exc:
    import traceback
    tb = traceback.extract_tb(exc.__traceback__)
    line = next((f.lineno for f in reversed(tb) if f.filename == "<verifier>"), None)
    where = f" (line {line})" if line else ""
    if isinstance(exc, Blocked) or type(exc).__name__ == "Blocked":
        msg = str(exc)
    else:
        msg = f"{type(exc).__name__}: {exc}{where}"
    report(ok=False, reason=msg[:500], stdout=captured.getvalue()[-2000:])
'''


@dataclass
class SandboxResult:
    """The verdict on one candidate; a failure has score 0, passed False and the reason."""

    score: float
    passed: bool
    reason: str
    ok: bool
    """False when the code failed (timeout, exception, blocked call, memory) rather than scored."""
    stdout: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"score": self.score, "passed": self.passed, "reason": self.reason, "ok": self.ok}


def _failure(reason: str, stdout: str = "") -> SandboxResult:
    return SandboxResult(0.0, False, reason, False, stdout)


def run_python_verifier(code: str, candidate: str, *, answer: str | None = None, reference: Any = None,
                        inputs: dict[str, Any] | None = None, timeout_s: float = 5.0, memory_mb: int = 256,
                        pass_threshold: float = 0.5) -> SandboxResult:
    """Score one candidate with user code in a confined child process (see the module docstring)."""
    request = json.dumps({
        "code": code, "candidate": candidate, "answer": answer, "reference": reference,
        "inputs": inputs or {}, "timeout_s": timeout_s, "memory_mb": memory_mb,
    }, default=str)
    # the runner's address-space share is larger than the child's own RLIMIT_AS, so a hog meets the child's
    # limit first and reports MemoryError rather than being killed
    limits = ExecLimits(timeout_s=timeout_s + 1.0, memory_mb=memory_mb + 256, output_bytes=1 << 20, disk_mb=16)
    result = run_confined(["-c", _CHILD], request, limits)
    return _verdict(result, timeout_s, memory_mb, pass_threshold)


def _verdict(result: ExecResult, timeout_s: float, memory_mb: int, pass_threshold: float) -> SandboxResult:
    if result.refused:
        return _failure(f"the python verifier could not run: {result.refused}")
    if result.timed_out or result.stopped_by == "cpu":
        return _failure(f"timed out after {timeout_s:g} s")
    if result.stopped_by == "memory":
        return _failure(f"memory limit exceeded ({memory_mb} MB)")
    line = next((ln for ln in reversed(result.stdout.splitlines()) if ln.startswith(RESULT_MARK)), None)
    if line is None:
        code = result.returncode if result.returncode is not None else -9
        if code > 128:  # bubblewrap (or a shell) reports its child's death by signal as 128 + the signal
            code = 128 - code
        return _failure(_death_reason(code, result.stderr, timeout_s, memory_mb))
    data = json.loads(line[len(RESULT_MARK):])
    if not data.get("ok"):
        return _failure(str(data.get("reason") or "the verifier failed"), data.get("stdout", ""))
    score = float(data["score"])
    return SandboxResult(score, score >= pass_threshold, str(data.get("reason") or ""), True,
                         data.get("stdout", ""))


def _death_reason(returncode: int, stderr: str, timeout_s: float, memory_mb: int) -> str:
    """Why the child died without reporting."""
    import signal

    if returncode < 0:
        sig = -returncode
        if sig in (signal.SIGXCPU, signal.SIGKILL):
            return f"timed out after {timeout_s:g} s (CPU limit)"
        if sig == signal.SIGSEGV:
            return f"crashed (segmentation fault; memory limit {memory_mb} MB?)"
        return f"killed by signal {signal.Signals(sig).name}"
    tail = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    if "MemoryError" in stderr:
        return f"memory limit exceeded ({memory_mb} MB)"
    return f"the verifier exited with status {returncode}" + (f": {tail[:300]}" if tail else "")
