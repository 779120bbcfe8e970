"""The breakdown's child program: one candidate's code run against the tests statement by statement, on probe
inputs and on stdin/stdout pairs, in the candidate's own process.

The supervisor (`code_supervisor.py`) starts it after it has decided the verdict, with a JSON request on stdin
and a pipe as `$METAGEN_RESULT_FD`; it writes one JSON line per event: `compile_error`, `load_error`, `test`
({index, source, passed, error, output}), `probe` ({index, output}), `io` ({index, passed, error, output}).
Each top-level `assert` of the tests is one test (other statements run as setup); with `entry_point`, each
statement of `check`'s body is one test, asserts or not (a top-level call of `check` is left out of the setup).
These results are the score's detail and the behaviour voter's signal, never the verdict: the candidate shares
this process and could forge them, so the supervisor passes on only these event types.
"""

CHILD_LIMITS = r'''SPEC = os.environ.get("METAGEN_SANDBOX", "::32:0").split(":")
RESULTS = os.fdopen(int(os.environ["METAGEN_RESULT_FD"]), "w", buffering=1)
RESULTS.write(json.dumps({"type": "start"}) + "\n")
RESULTS.flush()
req = json.loads(sys.stdin.read())
try:
    import resource
    if SPEC[3] == "1":  # under bwrap: bwrap ran as root, the candidate never does
        if SPEC[0]:
            os.setgroups([]); os.setgid(int(SPEC[0])); os.setuid(int(SPEC[0]))
        mem = int(SPEC[1]) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_NPROC, (int(SPEC[2]), int(SPEC[2])))
except Exception as exc:
    RESULTS.write(json.dumps({"type": "load_error", "error": f"limits refused: {exc}"}) + "\n")
    sys.exit(3)
'''
"""The start every confined child shares: its result channel, its request, then the sandbox's uid and limits
(refused: exit 3). Spliced into this harness and into the supervisor."""

HARNESS = r'''
import ast, io, json, os, sys
''' + CHILD_LIMITS + r'''del resource

def emit(**data):
    RESULTS.write(json.dumps(data) + "\n")
    RESULTS.flush()

def short(text, n=300):
    text = str(text)
    return text if len(text) <= n else text[:n] + "..."

def error_text(exc):
    if isinstance(exc, AssertionError) and not str(exc):
        return "AssertionError"
    return short(f"{type(exc).__name__}: {exc}")

class Captured(io.StringIO):
    """stdout of the candidate, kept to its last characters (a print loop fills memory slowly, not at once)."""
    def write(self, s):
        n = super().write(s)
        if self.tell() > 200_000:
            tail = self.getvalue()[-4000:]
            self.seek(0); self.truncate(); super().write(tail)
        return n

def run_code(code, ns, stdin_text=""):
    out = Captured()
    old = sys.stdin, sys.stdout
    sys.stdin, sys.stdout = io.StringIO(stdin_text), out
    try:
        exec(code, ns)
    finally:
        sys.stdin, sys.stdout = old
    return out.getvalue()

try:
    compiled = compile(req["code"], "<candidate>", "exec")
except (SyntaxError, ValueError) as exc:
    msg, line = getattr(exc, "msg", exc), getattr(exc, "lineno", "?")
    emit(type="compile_error", error=short(f"SyntaxError: {msg} (line {line})"))
    sys.exit(0)

def with_observed(stmt):
    """`assert f(x) == y` -> `__mg_out = f(x)`, then the assert on __mg_out (its value is the behaviour)."""
    if isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare):
        grab = ast.Assign(targets=[ast.Name("__mg_out", ast.Store())], value=stmt.test.left)
        test = ast.Compare(left=ast.Name("__mg_out", ast.Load()), ops=stmt.test.ops, comparators=stmt.test.comparators)
        return [grab, ast.Assert(test=test, msg=stmt.msg)]
    return [stmt]

def calls_check(stmt):
    """A top-level `check(...)` call (HumanEval's test program ends with one)."""
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == "check")

def find_check(tree):
    return next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "check"), None)

def split_tests(source, entry_point):
    tree = ast.parse(source)
    check = find_check(tree)
    if check is not None and entry_point:
        setup = [s for s in tree.body if s is not check and not calls_check(s)]
        body = [s for s in check.body if not isinstance(s, ast.Expr) or not isinstance(s.value, ast.Constant)]
        return setup, body, True
    return [], tree.body, False

def function_tests(ns):
    try:
        setup, stmts, in_check = split_tests(req["tests"], req["entry_point"])
    except SyntaxError as exc:
        emit(type="load_error", error=short(f"the tests are not valid Python: {exc.msg} (line {exc.lineno})"))
        return
    if setup:
        try:
            run_code(compile(ast.Module(body=setup, type_ignores=[]), "<tests>", "exec"), ns)
        except Exception as exc:
            emit(type="load_error", error="the tests' setup failed: " + error_text(exc))
            return
    if in_check:
        ns["candidate"] = ns.get(req["entry_point"])
    index = 0
    for stmt in stmts:
        body = with_observed(stmt)
        module = ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
        if not isinstance(stmt, ast.Assert):
            try:  # compiled alone, a statement of check() may not compile (a `return`): that is its result
                run_code(compile(module, "<tests>", "exec"), ns)
                passed, error = True, ""
            except Exception as exc:
                passed, error = False, error_text(exc)
            if in_check or not passed:  # every statement of check() is a test; top-level setup only when it fails
                emit(type="test", index=index, source=short(ast.unparse(stmt), 200), passed=passed,
                     error=error, output=None)
                index += 1
            continue
        ns.pop("__mg_out", None)
        try:
            run_code(compile(module, "<tests>", "exec"), ns)
            passed, error = True, ""
        except Exception as exc:
            passed, error = False, error_text(exc)
            if "__mg_out" in ns and isinstance(exc, AssertionError):
                error = short(f"got {ns['__mg_out']!r}")
        observed = short(repr(ns["__mg_out"]), 200) if "__mg_out" in ns else (None if passed else error)
        emit(type="test", index=index, source=short(ast.unparse(stmt), 200), passed=passed, error=error,
             output=observed)
        index += 1

def probes(ns):
    for i, probe in enumerate(req["probes"]):
        try:
            if req["entry_point"]:
                out = repr(eval(compile(f"{req['entry_point']}({probe})", "<input>", "eval"), ns))
            else:
                out = run_code(compiled, {"__name__": "__main__"}, probe)
        except Exception as exc:
            out = "!" + type(exc).__name__
        emit(type="probe", index=i, output=short(out, 2000))

def norm(text):
    return "\n".join(line.rstrip() for line in str(text).strip().splitlines())

def io_tests():
    for i, case in enumerate(req["io_tests"]):
        try:
            got = run_code(compiled, {"__name__": "__main__"}, str(case.get("input", "")))
            passed = norm(got) == norm(case.get("output", ""))
            error = "" if passed else short(f"expected {norm(case.get('output', ''))!r}, got {norm(got)!r}")
        except BaseException as exc:
            got, passed, error = "", False, error_text(exc)
        emit(type="io", index=i, passed=passed, error=error, output=short(norm(got), 2000))

ns = {"__name__": "solution"}
if req["tests"].strip() or (req["probes"] and req["entry_point"]):
    try:
        run_code(compiled, ns)
    except BaseException as exc:
        emit(type="load_error", error="running the code failed: " + error_text(exc))
        ns = None
if ns is not None and req["tests"].strip():
    function_tests(ns)
if req["io_tests"]:
    io_tests()
if ns is not None or not req["entry_point"]:
    probes(ns or {})
emit(type="done")
'''
