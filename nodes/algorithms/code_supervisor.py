"""The supervisor: the program a confined run starts, which decides the verdict and never runs candidate code.

It reads the request on stdin, drops to its throw-away uid and sets the last limits (as the harness did), makes
itself undumpable (no process of its uid can read its memory or its file descriptors through /proc), then:
- the verdict: the benchmark's program (code, then the tests, then `check(entry_point)` for a HumanEval-style
  check that is not called) runs in a child of its own (`VERDICT_RUNNER`) that gets no result file and no
  harness; it passes only by writing back a 128-bit token it read from a pipe before the candidate's code ran,
  after the program ran to its end. An audit hook, installed before the candidate's code runs and impossible to
  remove, refuses what would find the token or the tests (call frames, the garbage collector's object lists,
  tracing, ctypes, /proc, files outside the run's folder and Python's) and new processes. Every value returned
  by a function the candidate defines must be a plain value (builtin types by exact type, containers checked
  element by element, a few standard-library types whose comparisons were not patched): an object whose
  `__eq__` is always true fails, as EvalPlus grades. Each stdin/stdout pair runs in a child too, its output
  compared here.
- the breakdown (per-test results, probe outputs: detail and the behaviour voter's signal) runs afterwards in
  the harness (`code_harness.HARNESS`) as another child, whose events are passed on except those that decide
  (a forged `verdict`, `io` or `done` line is dropped).
See docs/security.md for what stays open.
"""

from nodes.algorithms.code_harness import CHILD_LIMITS

SUPERVISOR = r'''
import ast, builtins, json, os, secrets, subprocess, sys
''' + CHILD_LIMITS + r'''try:  # PR_SET_DUMPABLE 0: /proc/<pid>/mem, fd, environ stay root's, out of reach
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
except Exception:
    pass
TIMEOUT = float(req.get("timeout_s") or 5.0)
ENV = {k: v for k, v in os.environ.items() if k not in ("METAGEN_RESULT_FD", "METAGEN_SANDBOX")}

def emit(**data):
    RESULTS.write(json.dumps(data) + "\n")
    RESULTS.flush()

def short(text, n=300):
    text = str(text)
    return text if len(text) <= n else text[:n] + "..."

def calls_check(stmt):
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == "check")

def bound_names(tree):
    """Names a module binds at its top level (defs, classes, assignments, imports)."""
    names = set()
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
    def __init__(self, names):
        self.names = names
    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in self.names:
            return ast.Call(func=ast.Name("__mg_plain", ast.Load()), args=[node], keywords=[])
        return node

def guarded_tests(code, tests, entry_point):
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
    if entry_point and has_check and not any(calls_check(s) for s in tree.body):
        text += f"check({entry_point})\n"
    return text

def child(code, argv, stdin_text, pass_fds=(), extra_env=None):
    """Run `python -c code` as a child: (return code or None on timeout, stdout bytes)."""
    proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", code, *argv], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, pass_fds=pass_fds,
                            env={**ENV, **(extra_env or {})}, cwd=os.getcwd())
    for fd in pass_fds:
        os.close(fd)
    try:
        out, _ = proc.communicate(stdin_text.encode("utf-8", "replace"), timeout=TIMEOUT)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None, b""

def read_all(fd):
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)

def verdict():
    try:
        tests = guarded_tests(req["code"], req["tests"], req["entry_point"])
    except SyntaxError as exc:
        emit(type="verdict", passed=False, error=short(f"the tests are not valid Python: {exc.msg}"))
        return
    token = secrets.token_bytes(16)
    tok_r, tok_w = os.pipe()
    res_r, res_w = os.pipe()
    os.write(tok_w, token)
    os.close(tok_w)
    code, _ = child(VERDICT_RUNNER, [str(tok_r), str(res_w)], json.dumps({"code": req["code"], "tests": tests}),
                    pass_fds=(tok_r, res_w))
    got = read_all(res_r)
    if code is None:
        emit(type="verdict", passed=False, error=f"timed out after {TIMEOUT:g} s")
    elif got == b"P" + token and code == 0:
        emit(type="verdict", passed=True, error="")
    elif got.startswith(b"F"):
        emit(type="verdict", passed=False, error=short(got[1:].decode("utf-8", "replace")))
    elif got.startswith(b"P"):
        emit(type="verdict", passed=False, error="the program's result was forged (a wrong token)")
    else:
        emit(type="verdict", passed=False, error=f"the program ended before its tests did (exit status {code})")

def norm(text):
    return "\n".join(line.rstrip() for line in str(text).strip().splitlines())

def io_tests():
    for i, case in enumerate(req["io_tests"]):
        code, out = child(IO_RUNNER, [], json.dumps({"code": req["code"], "stdin": str(case.get("input", ""))}))
        got = out.decode("utf-8", "replace")[-200_000:]
        want = norm(case.get("output", ""))
        if code is None:
            passed, error = False, f"timed out after {TIMEOUT:g} s"
        elif code != 0:
            passed, error = False, short(f"the program failed (exit status {code})")
        else:
            passed = norm(got) == want
            error = "" if passed else short(f"expected {want!r}, got {norm(got)!r}")
        emit(type="io", index=i, passed=passed, error=error, output=short(norm(got), 2000))

def breakdown():
    """The harness in a child: per-test results and probe outputs, passed on; nothing it says decides."""
    r, w = os.pipe()
    sub = {**req, "io_tests": []}
    # its stdout / stderr are the run's own (their tails show in Traces); the verdict's child keeps none
    proc = subprocess.Popen([sys.executable, "-I", "-S", "harness.py"], stdin=subprocess.PIPE, pass_fds=(w,),
                            env={**ENV, "METAGEN_RESULT_FD": str(w)}, cwd=os.getcwd())
    os.close(w)
    proc.stdin.write(json.dumps(sub).encode())
    proc.stdin.close()
    with os.fdopen(r, "rb") as lines:
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("type") in ("compile_error", "load_error", "test", "probe"):
                RESULTS.write(json.dumps(event)[:20000] + "\n")
    proc.wait()

if req["tests"].strip():
    verdict()
if req["io_tests"]:
    io_tests()
if req["tests"].strip() or req["probes"]:
    breakdown()
emit(type="done")
'''

VERDICT_RUNNER = r'''
import os, sys
def _checker():
    # every name below is a local of this generator's frame, which the audit hook keeps out of reach
    import collections
    _type, _vars, _all, _dict = type, vars, all, dict
    plain_types = frozenset({type(None), bool, int, float, complex, str, bytes, bytearray, range, list, tuple,
                             dict, set, frozenset})
    stdlib = {cls: {k: v for k, v in vars(cls).items() if k.startswith("__")}
              for cls in (collections.OrderedDict, collections.Counter, collections.defaultdict, collections.deque)}
    sequences = (list, tuple, set, frozenset, collections.deque)
    iterators = frozenset({type(map(int, [])), type(filter(None, [])), type(zip()), type(enumerate([])),
                           type(reversed([])), type(iter([])), type(iter(())), type(iter("")), type(iter(range(0))),
                           type({}.keys()), type({}.values()), type({}.items()), type((x for x in ()))})

    def check(value, depth=0):
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

def _main():
    import io, json
    tok_fd, res_fd = int(sys.argv[1]), int(sys.argv[2])
    token = os.read(tok_fd, 64)
    os.close(tok_fd)
    req = json.loads(sys.stdin.read())
    sys.stdin = io.StringIO("")
    sys.stdout = sys.stderr = io.StringIO()
    checker = _checker()
    next(checker)
    write, leave = os.write, os._exit
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

    def hook(event, args):
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
            mode, flags = (tuple(args) + (None, None))[1:3]
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
        text = "AssertionError" if isinstance(exc, AssertionError) and not str(exc) else f"{type(exc).__name__}: {exc}"
        write(res_fd, b"F" + text[:300].encode("utf-8", "replace"))
        leave(1)
    write(res_fd, b"P" + token)
    leave(0)
_main()
'''

IO_RUNNER = r'''
import io, json, os, sys
req = json.loads(sys.stdin.read())
sys.stdin = io.StringIO(req["stdin"])
code = compile(req["code"], "<candidate>", "exec")
del req
exec(code, {"__name__": "__main__"})
'''


def supervisor_program() -> str:
    """The supervisor's file: its two child programs, then its own code."""
    return f"VERDICT_RUNNER = {VERDICT_RUNNER!r}\nIO_RUNNER = {IO_RUNNER!r}\n" + SUPERVISOR
