"""The breakdown's child program: one candidate's code run against the tests statement by statement, on probe
inputs and on stdin/stdout pairs, in the candidate's own process.

The supervisor (supervisor.py) starts it by path after it has decided the verdict, with a JSON request on stdin
and a pipe as `$METAGEN_RESULT_FD`; it writes one JSON line per event: `compile_error`, `load_error`, `test`
({index, source, passed, error, output}), `probe` ({index, output}), `io` ({index, passed, error, output}).
Each top-level `assert` of the tests is one test (other statements run as setup); with `entry_point`, each
statement of `check`'s body is one test, asserts or not (a top-level call of `check` is left out of the setup).
These results are the score's detail and the behaviour voter's signal, never the verdict: the candidate shares
this process and could forge them, so the supervisor passes on only these event types.
"""

from __future__ import annotations

import ast
import io
import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time (a cost every confined run would pay)
if TYPE_CHECKING:
    from types import CodeType
    from typing import Any

if __package__:
    from nodes.algorithms.confined import prelude
else:  # run by path: `python -I` leaves this folder off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import prelude

    del sys.path[0]

short, exception_text = prelude.short, prelude.exception_text


class Captured(io.StringIO):
    """stdout of the candidate, kept to its last characters (a print loop fills memory slowly, not at once)."""

    def write(self, s: str) -> int:
        n = super().write(s)
        if self.tell() > 200_000:
            tail = self.getvalue()[-4000:]
            self.seek(0)
            self.truncate()
            super().write(tail)
        return n


def run_code(code: CodeType, ns: dict[str, Any], stdin_text: str = "") -> str:
    """exec `code` in `ns` with `stdin_text` as stdin; its captured stdout."""
    out = Captured()
    old = sys.stdin, sys.stdout
    sys.stdin, sys.stdout = io.StringIO(stdin_text), out
    try:
        exec(code, ns)
    finally:
        sys.stdin, sys.stdout = old
    return out.getvalue()


def with_observed(stmt: ast.stmt) -> list[ast.stmt]:
    """`assert f(x) == y` -> `__mg_out = f(x)`, then the assert on __mg_out (its value is the behaviour)."""
    if isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare):
        grab = ast.Assign(targets=[ast.Name("__mg_out", ast.Store())], value=stmt.test.left)
        test = ast.Compare(left=ast.Name("__mg_out", ast.Load()), ops=stmt.test.ops, comparators=stmt.test.comparators)
        return [grab, ast.Assert(test=test, msg=stmt.msg)]
    return [stmt]


def find_check(tree: ast.Module) -> ast.FunctionDef | None:
    return next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "check"), None)


def split_tests(source: str, entry_point: str) -> tuple[list[ast.stmt], list[ast.stmt], bool]:
    """(setup, tests, inside check()): check()'s statements with an entry point, else the top-level ones."""
    tree = ast.parse(source)
    check = find_check(tree)
    if check is not None and entry_point:
        setup = [s for s in tree.body if s is not check and not prelude.calls_check(s)]
        body = [s for s in check.body if not isinstance(s, ast.Expr) or not isinstance(s.value, ast.Constant)]
        return setup, body, True
    return [], tree.body, False


def norm(text: str) -> str:
    return "\n".join(line.rstrip() for line in str(text).strip().splitlines())


class Harness:
    """One request's breakdown, reported on the channel."""

    def __init__(self, channel: prelude.Channel, req: dict[str, Any], compiled: CodeType) -> None:
        self.channel, self.req, self.compiled = channel, req, compiled

    def function_tests(self, ns: dict[str, Any]) -> None:
        req, emit = self.req, self.channel.emit
        try:
            setup, stmts, in_check = split_tests(req["tests"], req["entry_point"])
        except SyntaxError as exc:
            emit(type="load_error", error=short(f"the tests are not valid Python: {exc.msg} (line {exc.lineno})"))
            return
        if setup:
            try:
                run_code(compile(ast.Module(body=setup, type_ignores=[]), "<tests>", "exec"), ns)
            except Exception as exc:
                emit(type="load_error", error="the tests' setup failed: " + exception_text(exc))
                return
        if in_check:
            ns["candidate"] = ns.get(req["entry_point"])
        index = 0
        for stmt in stmts:
            if isinstance(stmt, ast.Assert):
                self.assert_test(index, stmt, ns)
                index += 1
            elif self.statement_test(index, stmt, ns, in_check):
                index += 1

    def statement_test(self, index: int, stmt: ast.stmt, ns: dict[str, Any], in_check: bool) -> bool:
        """A statement other than an assert: a test inside check(), else setup reported only when it fails."""
        module = ast.fix_missing_locations(ast.Module(body=[stmt], type_ignores=[]))
        try:  # compiled alone, a statement of check() may not compile (a `return`): that is its result
            run_code(compile(module, "<tests>", "exec"), ns)
            passed, error = True, ""
        except Exception as exc:
            passed, error = False, exception_text(exc)
        if not (in_check or not passed):
            return False
        self.channel.emit(type="test", index=index, source=short(ast.unparse(stmt), 200), passed=passed,
                          error=error, output=None)
        return True

    def assert_test(self, index: int, stmt: ast.Assert, ns: dict[str, Any]) -> None:
        module = ast.fix_missing_locations(ast.Module(body=with_observed(stmt), type_ignores=[]))
        ns.pop("__mg_out", None)
        try:
            run_code(compile(module, "<tests>", "exec"), ns)
            passed, error = True, ""
        except Exception as exc:
            passed, error = False, exception_text(exc)
            if "__mg_out" in ns and isinstance(exc, AssertionError):
                error = short(f"got {ns['__mg_out']!r}")
        observed = short(repr(ns["__mg_out"]), 200) if "__mg_out" in ns else (None if passed else error)
        self.channel.emit(type="test", index=index, source=short(ast.unparse(stmt), 200), passed=passed,
                          error=error, output=observed)

    def probes(self, ns: dict[str, Any]) -> None:
        entry = self.req["entry_point"]
        for i, probe in enumerate(self.req["probes"]):
            try:
                if entry:
                    out = repr(eval(compile(f"{entry}({probe})", "<input>", "eval"), ns))
                else:
                    out = run_code(self.compiled, {"__name__": "__main__"}, probe)
            except Exception as exc:
                out = "!" + type(exc).__name__
            self.channel.emit(type="probe", index=i, output=short(out, 2000))

    def io_tests(self) -> None:
        for i, case in enumerate(self.req["io_tests"]):
            try:
                got = run_code(self.compiled, {"__name__": "__main__"}, str(case.get("input", "")))
                passed = norm(got) == norm(case.get("output", ""))
                error = "" if passed else short(f"expected {norm(case.get('output', ''))!r}, got {norm(got)!r}")
            except BaseException as exc:
                got, passed, error = "", False, exception_text(exc)
            self.channel.emit(type="io", index=i, passed=passed, error=error, output=short(norm(got), 2000))

    def run(self) -> None:
        req = self.req
        ns: dict[str, Any] | None = {"__name__": "solution"}
        if req["tests"].strip() or (req["probes"] and req["entry_point"]):
            try:
                run_code(self.compiled, ns or {})
            except BaseException as exc:
                self.channel.emit(type="load_error", error="running the code failed: " + exception_text(exc))
                ns = None
        if ns is not None and req["tests"].strip():
            self.function_tests(ns)
        if req["io_tests"]:
            self.io_tests()
        if ns is not None or not req["entry_point"]:
            self.probes(ns or {})
        self.channel.emit(type="done")


def main() -> None:
    channel, req = prelude.start()
    try:
        compiled = compile(req["code"], "<candidate>", "exec")
    except (SyntaxError, ValueError) as exc:
        msg, line = getattr(exc, "msg", exc), getattr(exc, "lineno", "?")
        channel.emit(type="compile_error", error=short(f"SyntaxError: {msg} (line {line})"))
        sys.exit(0)
    Harness(channel, req, compiled).run()


if __name__ == "__main__":
    main()
