"""The verdict's child: the benchmark's program (the candidate's code, then the guarded tests) run under an audit
hook; it passes only by writing back the token it read from a pipe before the candidate's code ran.

Run by the supervisor with `python -I -S -c <this file's text> TOKEN_FD RESULT_FD` and the request on stdin. It
writes `P<token>` after the program ran to its end, or `F` and a JSON `[kind, message, is_assertion]` for the
supervisor to word (prelude.error_text); it imports nothing of the sandbox's, so nothing the candidate can reach
holds the token: every name that does is a local of `_main`'s or `_checker`'s frame, which the hook keeps out of
reach (call frames, the garbage collector's object lists, tracing, ctypes, /proc, files outside the run's folder
and Python's, new processes).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time (a cost every graded program would pay)
if TYPE_CHECKING:
    from collections.abc import Generator
    from typing import Any


def _checker() -> Generator[Any, Any, None]:
    """A generator: each value sent is checked to be a plain value (EvalPlus grades an always-equal object wrong)."""
    import collections

    _type, _vars, _all, _dict = type, vars, all, dict
    plain_types = frozenset({type(None), bool, int, float, complex, str, bytes, bytearray, range, list, tuple,
                             dict, set, frozenset})
    stdlib = {cls: {k: v for k, v in vars(cls).items() if k.startswith("__")}
              for cls in (collections.OrderedDict, collections.Counter, collections.defaultdict, collections.deque)}
    sequences = (list, tuple, set, frozenset, collections.deque)
    iterators = frozenset({type(map(int, [])), type(filter(None, [])), type(zip()), type(enumerate([])),
                           type(reversed([])), type(iter([])), type(iter(())), type(iter("")), type(iter(range(0))),
                           type({}.keys()), type({}.values()), type({}.items()), type(x for x in ())})

    def check(value: Any, depth: int = 0) -> Any:
        kind = _type(value)
        if depth > 100:
            raise TypeError("the value is nested too deep to check")
        if kind in iterators:
            return (check(x, depth + 1) for x in value)
        if kind not in plain_types and not (kind in stdlib and _all(
                _vars(kind).get(k) is v for k, v in stdlib[kind].items())):
            raise TypeError(f"the candidate returned a value of type {kind.__name__}, not a plain value")
        if kind in sequences:
            for x in value:
                check(x, depth + 1)
        elif kind in stdlib or kind is _dict:
            for k, v in value.items():
                check(k, depth + 1)
                check(v, depth + 1)
        return value

    value = yield None
    while True:
        value = yield check(value)


def _main() -> None:
    import io
    import json

    tok_fd, res_fd = int(sys.argv[1]), int(sys.argv[2])
    token = os.read(tok_fd, 64)
    os.close(tok_fd)
    req = json.loads(sys.stdin.read())
    sys.stdin = io.StringIO("")
    sys.stdout = sys.stderr = io.StringIO()
    checker = _checker()
    next(checker)
    write, leave, dumps = os.write, os._exit, json.dumps
    roots = tuple(os.path.realpath(p) + os.sep for p in {sys.prefix, sys.base_prefix, sys.exec_prefix,
                                                         sys.base_exec_prefix, os.path.dirname(os.__file__)})
    here = os.path.realpath(os.getcwd()) + os.sep
    refused = frozenset({"sys._current_frames", "sys._current_exceptions", "sys.settrace", "sys.setprofile",
                         "gc.get_objects", "gc.get_referrers", "gc.get_referents", "os.fork", "os.forkpty",
                         "os.system", "os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen", "pty.spawn",
                         "os.kill", "os.killpg", "sys.addaudithook"})
    hidden = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back", "f_locals", "f_globals",
                        "gi_code", "cr_code", "ag_code"})
    realpath, fsdecode, writing = os.path.realpath, os.fsdecode, os.O_WRONLY | os.O_RDWR | os.O_CREAT

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "sys._getframe":
            raise ValueError("call frames are not available while grading")
        if event in refused or event.startswith("ctypes."):
            raise RuntimeError(f"{event} is not allowed while grading")
        if event == "object.__getattr__" and len(args) > 1 and args[1] in hidden:
            raise AttributeError(f"{args[1]} is not available while grading")
        if event == "import" and args and str(args[0]).split(".")[0] in ("ctypes", "_ctypes"):
            raise ImportError(f"{args[0]} is not available while grading")
        if event == "open" and args and not isinstance(args[0], int):
            path = realpath(fsdecode(args[0]))
            mode, flags = (*tuple(args), None, None)[1:3]
            writes = (any(c in str(mode) for c in "wax+") if mode is not None else bool(int(flags or 0) & writing))
            if path.startswith(here) or (path.startswith(roots) and not writes):
                return
            raise PermissionError(f"opening {args[0]} is not allowed while grading")

    sys.addaudithook(hook)
    ns = {"__name__": "solution"}
    try:
        exec(compile(req["code"], "<candidate>", "exec"), ns)
        ns["__mg_plain"] = checker.send
        exec(compile(req["tests"], "<tests>", "exec"), ns)
    except BaseException as exc:
        failure = dumps([type(exc).__name__, str(exc)[:300], isinstance(exc, AssertionError)])
        write(res_fd, b"F" + failure.encode("utf-8", "replace"))
        leave(1)
    write(res_fd, b"P" + token)
    leave(0)


if __name__ == "__main__":
    _main()
