"""The supervisor: the program a confined run starts, which decides the verdict and never runs candidate code.

It reads the request on stdin, drops to its throw-away uid and sets the last limits (prelude.start), makes
itself undumpable (no process of its uid can read its memory or its file descriptors through /proc), then:
- the verdict: the benchmark's program (code, then the tests, then `check(entry_point)` for a HumanEval-style
  check that is not called) runs in a child of its own (verdict_child.py) that gets no result file and no
  harness; it passes only by writing back a 128-bit token it read from a pipe before the candidate's code ran,
  after the program ran to its end. Every value returned by a function the candidate defines must be a plain
  value (the tests are rewritten here so each call goes through the child's check): an object whose `__eq__` is
  always true fails, as EvalPlus grades. Each stdin/stdout pair runs in a child too (io_child.py), its output
  compared here. Both children's sources are read when the supervisor starts, before any candidate code ran in
  this folder, and run with `python -c`.
- the breakdown (per-test results, probe outputs: detail and the behaviour voter's signal) runs afterwards in
  the harness (harness.py) as another child, whose events are passed on except those that decide (a forged
  `verdict`, `io` or `done` line is dropped); writing its request and waiting for it are bounded by the timeout.
Run by path in the run's folder: `python -I -S supervisor.py`, prelude.py beside it. See docs/security.md.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import secrets
import select
import subprocess
import sys
import time

TYPE_CHECKING = False  # typing is not imported at run time (a cost every confined run would pay)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

if __package__:
    from nodes.algorithms.confined import prelude
else:  # run by path: `python -I` leaves this folder off sys.path, and it must not stay there (the uid can write it)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import prelude

    del sys.path[0]

HERE = os.path.dirname(os.path.abspath(__file__))
PASSED_ON = ("compile_error", "load_error", "test", "probe")
"""The harness's events the supervisor passes on: none of them decides the verdict."""
EVENT_CAP = 20_000
"""Longest harness event line passed on (characters)."""


def bound_names(tree: ast.Module) -> set[str]:
    """Names a module binds at its top level (defs, classes, assignments, imports)."""
    names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in stmt.names)
        else:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
    return names


class Guard(ast.NodeTransformer):
    """`f(...)` -> `__mg_plain(f(...))` for every function of the candidate's the tests call."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in self.names:
            return ast.Call(func=ast.Name("__mg_plain", ast.Load()), args=[node], keywords=[])
        return node


def guarded_tests(code: str, tests: str, entry_point: str) -> str:
    """The tests as the verdict runs them: the candidate's functions' values checked, check() called."""
    tree = ast.parse(tests)
    try:
        theirs = bound_names(ast.parse(code))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        theirs = set()
    ours = bound_names(tree)
    names = ({"candidate", entry_point} | theirs) - ours - {""} - set(dir(builtins))
    if "check" in ours and entry_point:
        names.add("candidate")
    tree = ast.fix_missing_locations(Guard(names).visit(tree))
    text = ast.unparse(tree) + "\n"
    has_check = any(isinstance(s, ast.FunctionDef) and s.name == "check" for s in tree.body)
    if entry_point and has_check and not any(prelude.calls_check(s) for s in tree.body):
        text += f"check({entry_point})\n"
    return text


def norm(text: str) -> str:
    return "\n".join(line.rstrip() for line in str(text).strip().splitlines())


def read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def verdict_failure(got: bytes) -> str:
    """The verdict child's `F` report worded as a test failure (prelude.error_text)."""
    try:
        kind, message, assertion = json.loads(got.decode("utf-8", "replace"))
        return prelude.error_text(str(kind), str(message), bool(assertion))
    except (ValueError, TypeError):
        return prelude.short(got.decode("utf-8", "replace"))


def _write_some(fd: int, pending: memoryview) -> memoryview:
    """What is left of `pending` after one non-blocking write; nothing when the reader is gone."""
    try:
        return pending[os.write(fd, pending[:65536]):]
    except BlockingIOError:
        return pending
    except BrokenPipeError:  # it ended without reading all of it: its events (or their absence) say why
        return memoryview(b"")


def converse(proc: subprocess.Popen[bytes], request: bytes, result_fd: int, deadline: float,
             on_line: Callable[[bytes], None]) -> bool:
    """Write `request` to the child's stdin and hand each line it writes on `result_fd` to `on_line`, until it
    closes that pipe and exits; False when the deadline came first (the child is killed then). Neither a child
    that never reads its stdin nor one that never ends holds the supervisor."""
    assert proc.stdin is not None
    os.set_blocking(proc.stdin.fileno(), False)
    pending, buffer, open_ = memoryview(request), b"", True
    if not pending:
        proc.stdin.close()
    while open_:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        writing = [proc.stdin.fileno()] if pending else []
        readable, writable, _ = select.select([result_fd], writing, [], left)
        if writable:
            pending = _write_some(proc.stdin.fileno(), pending)
            if not pending:
                proc.stdin.close()
        if readable:
            chunk = os.read(result_fd, 65536)
            open_ = bool(chunk)
            *lines, buffer = (buffer + chunk).split(b"\n")
            for line in lines:
                on_line(line)
    if buffer:
        on_line(buffer)
    if not proc.stdin.closed:
        proc.stdin.close()
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()) if not open_ else 0.0)
        return not open_
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False


class Supervisor:
    """One run's verdict, stdin/stdout pairs and breakdown, reported on the channel."""

    def __init__(self, channel: prelude.Channel, req: dict[str, Any], folder: str = HERE) -> None:
        self.channel, self.req, self.folder = channel, req, folder
        self.timeout = float(req.get("timeout_s") or 5.0)
        self.env = {k: v for k, v in os.environ.items() if k not in (prelude.RESULT_FD_ENV, prelude.SETTINGS_ENV)}
        self.sources = {name: _read(os.path.join(folder, f"{name}.py")) for name in ("verdict_child", "io_child")}

    def child(self, name: str, argv: list[str], stdin_text: str,
              pass_fds: tuple[int, ...] = ()) -> tuple[int | None, bytes]:
        """Run a child program's source as `python -c`: (return code or None on timeout, stdout bytes)."""
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", self.sources[name], *argv], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, pass_fds=pass_fds, env=self.env,
                                cwd=os.getcwd())
        for fd in pass_fds:
            os.close(fd)
        try:
            out, _ = proc.communicate(stdin_text.encode("utf-8", "replace"), timeout=self.timeout)
            return proc.returncode, out
        except subprocess.TimeoutExpired:
            proc.kill()  # not communicate() again: a grandchild holding its stdout would hold us too
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
            return None, b""

    def verdict(self) -> None:
        req = self.req
        try:
            tests = guarded_tests(req["code"], req["tests"], req["entry_point"])
        except SyntaxError as exc:
            self.channel.emit(type="verdict", passed=False,
                              error=prelude.short(f"the tests are not valid Python: {exc.msg}"))
            return
        token = secrets.token_bytes(16)
        tok_r, tok_w = os.pipe()
        res_r, res_w = os.pipe()
        os.write(tok_w, token)
        os.close(tok_w)
        code, _ = self.child("verdict_child", [str(tok_r), str(res_w)],
                             json.dumps({"code": req["code"], "tests": tests}), pass_fds=(tok_r, res_w))
        got = read_all(res_r)
        if code is None:
            error, passed = f"timed out after {self.timeout:g} s", False
        elif got == b"P" + token and code == 0:
            error, passed = "", True
        elif got.startswith(b"F"):
            error, passed = verdict_failure(got[1:]), False
        elif got.startswith(b"P"):
            error, passed = "the program's result was forged (a wrong token)", False
        else:
            error, passed = f"the program ended before its tests did (exit status {code})", False
        self.channel.emit(type="verdict", passed=passed, error=error)

    def io_tests(self) -> None:
        for i, case in enumerate(self.req["io_tests"]):
            stdin = json.dumps({"code": self.req["code"], "stdin": str(case.get("input", ""))})
            code, out = self.child("io_child", [], stdin)
            got = out.decode("utf-8", "replace")[-200_000:]
            want = norm(case.get("output", ""))
            if code is None:
                passed, error = False, f"timed out after {self.timeout:g} s"
            elif code != 0:
                passed, error = False, prelude.short(f"the program failed (exit status {code})")
            else:
                passed = norm(got) == want
                error = "" if passed else prelude.short(f"expected {want!r}, got {norm(got)!r}")
            self.channel.emit(type="io", index=i, passed=passed, error=error, output=prelude.short(norm(got), 2000))

    def breakdown(self) -> None:
        """The harness in a child: per-test results and probe outputs, passed on; nothing it says decides. Its
        stdout / stderr are the run's own (their tails show in Traces); the verdict's child keeps none."""
        r, w = os.pipe()
        proc = subprocess.Popen([sys.executable, "-I", "-S", os.path.join(self.folder, "harness.py")],
                                stdin=subprocess.PIPE, pass_fds=(w,), env={**self.env, prelude.RESULT_FD_ENV: str(w)},
                                cwd=os.getcwd())
        os.close(w)
        request = json.dumps({**self.req, "io_tests": []}).encode()
        try:
            finished = converse(proc, request, r, time.monotonic() + self.timeout, self.pass_on)
        finally:
            os.close(r)
        if not finished:
            self.channel.emit(type="breakdown_error",
                              error=f"the per-test breakdown did not finish within {self.timeout:g} s")

    def pass_on(self, line: bytes) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            return
        if isinstance(event, dict) and event.get("type") in PASSED_ON:
            self.channel.write_line(json.dumps(event)[:EVENT_CAP])

    def run(self) -> None:
        req = self.req
        if req["tests"].strip():
            self.verdict()
        if req["io_tests"]:
            self.io_tests()
        if req["tests"].strip() or req["probes"]:
            self.breakdown()
        self.channel.emit(type="done")


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def undumpable() -> None:
    """PR_SET_DUMPABLE 0: /proc/<pid>/mem, fd, environ stay root's, out of the candidate's reach."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
    except Exception:
        pass


def main() -> None:
    channel, req = prelude.start()
    undumpable()
    Supervisor(channel, req).run()


if __name__ == "__main__":
    main()
