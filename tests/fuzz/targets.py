"""The fuzz targets: for each entry point, the inputs to generate and the check of what it may do with them.

A check returns a label for the outcome (e.g. "issues", "refused:yaml_syntax", "succeeded") and raises when
the entry point did something it must not: an exception other than its documented refusal, an issue without
a known code, a run that escapes the scheduler or hangs, a damaged database. The tests in this folder run each
target with the active hypothesis profile; benchmarks/fuzz.py runs them long and counts the labels.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz import strategies as fs

KNOWN_CODES = frozenset({
    # loading (app/workflow/spec.py)
    "yaml_syntax", "too_large", "yaml_aliases", "empty", "bad_structure", "bad_version", "unsupported_version",
    "unknown_key", "bad_layout", "not_found",
    # validation (app/workflow/validation.py, model_specs.py)
    "bad_model", "model_not_pulled", "bad_input", "missing_id", "bad_id", "unknown_kind", "io_in_nodes", "bad_param",
    "bad_grammar",
    "unknown_model", "unknown_port", "unknown_ref", "type_mismatch", "missing_input", "duplicate_id", "cycle",
    "no_outputs", "unwired_output",
    # workflow tags (app/workflow/tags.py)
    "unknown_tag", "bad_tag", "route_mismatch",
    # speculative decoding (app/workflow/speculative_spec.py)
    "bad_speculative",
    # share mode (app/share/policy.py)
    "share_cap_exceeded", "too_many_child_runs",
    # reward models (app/workflow/reward_checks.py)
    "not_a_reward_model", "rank_model_generates", "rank_needs_head", "prm_needs_local_model",
    # run start, with the PRM loaded (app/run/preflight.py)
    "bad_token",
    # sub-workflows (app/workflow/subworkflows.py)
    "unknown_workflow", "workflow_path_refused", "workflow_cycle", "too_deep", "too_many_subworkflows",
    # share policy (app/share/policy.py) and run inputs (app/run/scheduler.py)
    "python_disabled", "model_path_refused", "model_option_refused", "model_source_refused", "unknown_input",
    "missing_value", "code_execution_disabled",
    # token-level beam search (app/workflow/beam_checks.py)
    "beam_ignores_sampling", "beam_needs_local_model",
})
"""Every issue code the app reports (tests/fuzz/test_fuzz_codes.py keeps it in step with the source)."""

RUN_TIMEOUT_S = 60.0
"""A run on the fake backend that takes longer than this is a hang."""
PROBE_TIMEOUT_S = 30.0
"""llama.cpp taking longer than this over one grammar is a hang."""

Check = Callable[[Any], str]


@dataclass(frozen=True)
class FuzzTarget:
    name: str
    description: str
    strategy: Callable[[], st.SearchStrategy[Any]]
    open: Callable[[Path], Any]
    """open(tmp_dir) -> a context manager that yields the check (resources live until it closes)."""


def assert_issues(issues: list[Any], *, nonempty: bool = False) -> None:
    """Each issue has a known code, a message, a severity and a sensible line."""
    assert not nonempty or issues, "a refusal without any issue"
    for issue in issues:
        assert issue.code in KNOWN_CODES, f"unknown issue code {issue.code!r}: {issue}"
        assert isinstance(issue.message, str) and issue.message, f"issue without a message: {issue}"
        assert issue.severity in ("error", "warning"), issue
        assert issue.line is None or (isinstance(issue.line, int) and issue.line >= 1), issue
        assert issue.node_id is None or isinstance(issue.node_id, str), issue


def run_property(target: FuzzTarget, tmp_dir: Path, share: float = 1.0) -> None:
    """Run `target` under the active hypothesis profile, with `share` of its max_examples (a failure is
    shrunk and reported by hypothesis)."""
    examples = max(1, round(settings.default.max_examples * share))
    with target.open(tmp_dir) as check:

        @settings(max_examples=examples)
        @given(target.strategy())
        def prop(example: Any) -> None:
            check(example)

        prop()


# ------------------------------------------------------------------ 1. load + validate


@contextmanager
def _services(tmp_dir: Path) -> Iterator[tuple[Any, Any]]:
    from app.service.studio import StudioService
    from app.share.policy import SharePolicy

    common = {"registry": fs.registry(), "dry_run": True, "examples_dir": fs.WORKFLOWS_DIR,
              "models_dir": tmp_dir / "models"}
    local = StudioService(workflows_dir=tmp_dir / "local", **common)
    shared = StudioService(workflows_dir=tmp_dir / "shared", policy=SharePolicy.for_serving(
        "127.0.0.1", force_share_mode=True, model_choices=[str(tmp_dir / "models" / "tiny.gguf")]), **common)
    try:
        yield local, shared
    finally:
        local.close()
        shared.close()


def _check_parsed(result: Any) -> None:
    """The editor's answer to a YAML text: an error with a known code, or the canvas with known issues."""
    from app.workflow.problems import Issue

    assert isinstance(result, dict), result
    error = result.get("error")
    if error:
        assert error.get("code") in KNOWN_CODES and error.get("message"), error
    assert_issues([Issue(**i) for i in result.get("issues", [])])


def check_workflow_text(text: str, services: tuple[Any, Any]) -> str:
    from app.workflow.problems import WorkflowError, errors
    from app.workflow.spec import load_workflow_text
    from app.workflow.validation import validate

    try:
        wf = load_workflow_text(text)
    except WorkflowError as exc:
        assert_issues(exc.issues, nonempty=True)
        label = f"refused:{exc.issues[0].code}"
    else:
        issues = validate(wf, fs.registry())
        assert_issues(issues)
        label = f"issues, first {errors(issues)[0].code}" if errors(issues) else ("warnings" if issues else "clean")
        canonical = wf.to_yaml()  # the canonical dump is stable: dump(load(dump(x))) == dump(x)
        try:
            again = load_workflow_text(canonical)
        except WorkflowError as exc:
            assert exc.issues[0].code == "too_large", f"the canonical dump does not load again: {exc}"
        else:
            assert again.to_yaml() == canonical, "the canonical dump changed on a second round"
    for service in services:
        _check_parsed(service.parse_yaml(text))
    return label


@contextmanager
def open_workflow_text(tmp_dir: Path) -> Iterator[Check]:
    with _services(tmp_dir) as services:
        yield lambda text: check_workflow_text(text, services)


def check_editor_json(data: Any, services: tuple[Any, Any]) -> str:
    from app.service.errors import UserError
    from app.workflow.problems import Issue

    label = ""
    for service in services:
        try:
            result = service.from_editor(data)
        except UserError as exc:
            assert str(exc), "a refusal without a message"
            found = [(str(exc).find(f"{c}: "), c) for c in KNOWN_CODES if f"{c}: " in str(exc)]
            label = label or f"refused: {min(found)[1] if found else 'no code'}"
            continue
        assert isinstance(result, dict) and isinstance(result.get("yaml"), str), result
        issues = [Issue(**i) for i in result["issues"]]
        assert_issues(issues)
        label = label or (f"issues, first {issues[0].code}" if issues else "clean")
    return label


@contextmanager
def open_editor_json(tmp_dir: Path) -> Iterator[Check]:
    with _services(tmp_dir) as services:
        yield lambda data: check_editor_json(data, services)


def editor_json_strategy() -> st.SearchStrategy[Any]:
    return st.one_of(fs.mutated_examples(), fs.generated_workflows(), fs.json_values(10))


# ------------------------------------------------------------------ 2. the scheduler on the fake backend

NODE_FAILURE_CAUSES = ("NodeError", "BackendError")
"""How a node may fail; any other exception type in a node is a crash (the scheduler logs it as one)."""


def _run_with_timeout(run: Callable[[], Any], cancel: Any) -> Any:
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = run()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=work, name="fuzz-run", daemon=True)
    thread.start()
    thread.join(RUN_TIMEOUT_S)
    if thread.is_alive():
        cancel.cancel("the fuzz test's time limit")
        thread.join(10)
        raise AssertionError(f"the run did not end within {RUN_TIMEOUT_S:g} s (cancelled: "
                             f"{'ended' if not thread.is_alive() else 'still running'})")
    if "error" in box:
        raise box["error"]
    return box["result"]


def check_run(case: dict[str, Any], store: Any, cache: Any) -> str:
    from app.run.providers import fake_provider
    from app.run.scheduler import Budget, Scheduler
    from app.run.status import END_STATUSES, FAILED, SUCCEEDED
    from app.workflow.problems import WorkflowError
    from app.workflow.spec import load_workflow_text
    from backends.base import CancelToken

    text = yaml.safe_dump(case["data"], allow_unicode=True, sort_keys=False)
    try:
        wf = load_workflow_text(text)
    except WorkflowError as exc:
        assert_issues(exc.issues, nonempty=True)
        return f"load refused:{exc.issues[0].code}"
    fake = {"replies": case["replies"]} if case["replies"] else {}
    scheduler = Scheduler(fs.registry(), fake_provider(**fake), cache=cache, allow_python=False)
    cancel = CancelToken()
    try:
        result = _run_with_timeout(lambda: scheduler.run(wf, case["inputs"], seed=case["seed"],
                                                         budget=Budget(**case["budget"]), cancel=cancel,
                                                         observers=[store]), cancel)
    except WorkflowError as exc:  # the documented refusal: invalid workflow or inputs, before any model call
        assert_issues(exc.issues, nonempty=True)
        return f"refused:{exc.issues[0].code}"
    assert result.status in END_STATUSES, result.status
    if result.status == SUCCEEDED:
        assert set(result.outputs) == set(wf.outputs), (result.outputs, wf.outputs)
    else:
        assert isinstance(result.error, str) and result.error, f"a {result.status} run without a message"
    if result.status == FAILED:
        assert result.failure is not None
        assert result.failure.cause in NODE_FAILURE_CAUSES, f"a node crashed: {result.error}"
    recorded = store.get_run(result.run_id)["run"]["status"]
    assert recorded == result.status, f"the trace says {recorded!r}, the run {result.status!r}"
    return result.status if result.status != FAILED else f"failed:{result.failure.cause}"


def integrity_problem(store: Any) -> str | None:
    with store.engine.connect() as conn:
        rows = [r[0] for r in conn.exec_driver_sql("PRAGMA integrity_check").fetchall()]
    return None if rows == ["ok"] else "; ".join(rows)


@contextmanager
def _store(path: Path) -> Iterator[Any]:
    from app.traces import TraceStore

    store = TraceStore(path)
    try:
        yield store
        problem = integrity_problem(store)
        assert problem is None, f"PRAGMA integrity_check: {problem}"
    finally:
        store.close()


@contextmanager
def open_scheduler(tmp_dir: Path) -> Iterator[Check]:
    from app.run.scheduler import NodeCache

    cache = NodeCache()
    with _store(tmp_dir / "fuzz-runs.db") as store:
        yield lambda case: check_run(case, store, cache)


# ------------------------------------------------------------------ 3. deep links


def check_link(example: tuple[str, Any]) -> str:
    from app.share.deeplink import (
        _RUN_ID_RE,
        DeepLink,
        DeepLinkError,
        check_run_id,
        decode_payload,
        encode_workflow,
        read_deep_link,
        workflow_from_payload,
    )
    from app.workflow.spec import Workflow

    kind, value = example
    if kind == "payload":
        try:
            text = decode_payload(value)
        except DeepLinkError as exc:
            assert str(exc)
            try:
                workflow_from_payload(value)
            except DeepLinkError:
                return "payload refused"
            raise AssertionError("workflow_from_payload opened a payload decode_payload refused") from None
        assert isinstance(text, str)
        try:
            assert isinstance(workflow_from_payload(value), Workflow)
        except DeepLinkError:
            return "payload decoded, workflow refused"
        return "payload opened"
    if kind == "query":
        link = read_deep_link(value)
        if link is None:
            return "query: no link"
        assert isinstance(link, DeepLink)
        if link.error:
            return f"query {link.kind}: refused"
        assert (link.name, link.workflow, link.run_id).count(None) == 2, link
        return f"query {link.kind}: opened"
    if kind == "run_id":
        try:
            run_id = check_run_id(value)
        except DeepLinkError:
            return "run id refused"
        assert _RUN_ID_RE.fullmatch(run_id)
        return "run id accepted"
    assert kind == "encode"
    try:
        payload = encode_workflow(value)
    except DeepLinkError:
        return "encode refused"
    assert decode_payload(payload) == value, "a payload did not decode to the text it was made from"
    return "encode round trip"


@contextmanager
def open_links(tmp_dir: Path) -> Iterator[Check]:
    yield check_link


def link_strategy() -> st.SearchStrategy[tuple[str, Any]]:
    valid_texts = st.one_of(st.text(max_size=300), st.sampled_from(sorted(fs.example_texts().values())),
                            st.builds(lambda n: "x" * n, st.sampled_from((262_144, 262_145, 100_000))),
                            st.binary(min_size=1000, max_size=30_000).map(lambda b: b.hex()))
    return st.one_of(
        fs.payloads().map(lambda p: ("payload", p)),
        fs.link_queries().map(lambda q: ("query", q)),
        fs.texts(80).map(lambda s: ("run_id", s)),
        valid_texts.map(lambda t: ("encode", t)),
    )


# ------------------------------------------------------------------ 4. trace import

_BASE_EXAMPLES = ("self_consistency", "beam_search", "best_of_n", "mbr", "self_refine", "universal_self_consistency")
_base_documents: list[dict[str, Any]] = []


def base_documents() -> list[dict[str, Any]]:
    """Export documents of real runs: some examples run on the fake backend into a scratch trace database."""
    if _base_documents:
        return _base_documents
    import tempfile

    from app.run.providers import fake_provider
    from app.run.scheduler import Scheduler
    from app.workflow.spec import load_workflow_text

    with tempfile.TemporaryDirectory(prefix="metagen-fuzz-") as tmp, _store(Path(tmp) / "base.db") as store:
        scheduler = Scheduler(fs.registry(), fake_provider(replies=["Answer: 42", "Yes", "41", "No issues"]),
                              allow_python=True)
        for name in _BASE_EXAMPLES:
            result = scheduler.run(load_workflow_text(fs.example_texts()[name]), {}, seed=1, observers=[store])
            _base_documents.append(store.export_run(result.run_id))
    return _base_documents


INTEGRITY_EVERY = 500
"""Imports between two PRAGMA integrity_check runs (and one when the target closes)."""


def check_import(doc: Any, store: Any, count: list[int]) -> str:
    from app.traces import TraceStoreError

    count[0] += 1
    if count[0] % INTEGRITY_EVERY == 0:
        assert integrity_problem(store) is None, integrity_problem(store)
    try:
        run_id = store.import_run(doc)
    except TraceStoreError as exc:
        assert str(exc)
        return f"refused: {_import_reason(str(exc))}"
    assert isinstance(run_id, str) and run_id
    record = store.get_run(run_id)
    assert record["run"]["id"] == run_id
    exported = store.export_run(run_id)
    json.dumps(exported, default=str)  # what `metagen traces export` writes
    again = store.import_run(exported)  # an accepted run survives its own export
    assert again != run_id and store.get_run(again)["provenance"]["imported_from"] == run_id
    return "imported"


def _import_reason(message: str) -> str:
    if "not a Metagen trace export" in message:
        return "not an export"
    if "format_version" in message:
        return "format version"
    cause = message.partition("damaged: ")[2].split(":")[0]
    return f"damaged, {cause if cause.endswith('Error') else reason(cause, 40)}"


@contextmanager
def open_trace_import(tmp_dir: Path) -> Iterator[Check]:
    base_documents()
    count = [0]
    with _store(tmp_dir / "fuzz-import.db") as store:
        yield lambda doc: check_import(doc, store, count)


def trace_document_strategy() -> st.SearchStrategy[Any]:
    docs = base_documents()
    mutated = st.sampled_from(range(len(docs))).flatmap(lambda i: fs.mutate_document(docs[i]))
    return st.one_of(fs.generated_documents(), mutated, mutated, mutated)


# ------------------------------------------------------------------ 5. grammars and JSON schemas


def reason(message: str, width: int = 80) -> str:
    """A refusal message as a kind: quoted parts, numbers and the JSON converter's details blanked."""
    message = re.sub(r"(cannot be turned into a grammar|is not valid JSON).*", r"\1", message)
    message = message.replace("the grammar made from the JSON schema is refused: ", "its grammar: ")
    message = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`|\\\S+|\d[\d,.]*", "_", message)
    return message[:width].strip()


def check_gbnf(text: str) -> str:
    from backends.grammar.grammar_check import GrammarError, GrammarProblem, check_grammar, grammar_problem

    problem = grammar_problem(text)
    if problem is None:
        assert check_grammar(text) == text
        return "accepted"
    assert isinstance(problem, GrammarProblem) and problem.message, problem
    assert problem.line is None or 1 <= problem.line <= text.count("\n") + 1, problem
    try:
        check_grammar(text)
    except GrammarError as exc:
        assert exc.problem == problem
        return f"refused: {reason(problem.message)}"
    raise AssertionError("check_grammar accepted what grammar_problem refused")


def check_schema(text: str) -> str:
    from backends.grammar.grammar_check import (
        GrammarError,
        GrammarProblem,
        grammar_problem,
        schema_grammar,
        schema_problem,
    )

    problem = schema_problem(text)
    if problem is None:
        grammar = schema_grammar(text)
        assert isinstance(grammar, str) and grammar_problem(grammar) is None
        return "accepted"
    assert isinstance(problem, GrammarProblem) and problem.message, problem
    try:
        schema_grammar(text)
    except GrammarError:
        return f"refused: {reason(problem.message)}"
    raise AssertionError("schema_grammar accepted what schema_problem refused")


@contextmanager
def open_plain(check: Check) -> Iterator[Check]:
    yield check


class LlamaProbe:
    """llama.cpp's grammar parser in a child process (it can crash): `parses(grammar)` -> bool."""

    SCRIPT = Path(__file__).with_name("llama_grammar_probe.py")

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.started = 0

    def _start(self) -> subprocess.Popen[str]:
        env = {**os.environ, "PYTHONPATH": str(fs.ROOT)}
        proc = subprocess.Popen([sys.executable, str(self.SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, encoding="utf-8", env=env)
        self.started += 1
        assert self._read(proc, 120) == "ready", "the llama.cpp probe did not start"
        return proc

    @staticmethod
    def _read(proc: subprocess.Popen[str], timeout: float) -> str:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        return proc.stdout.readline().strip() if ready else ""

    def parses(self, grammar: str) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        proc = self.proc
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(grammar) + "\n")
            proc.stdin.flush()
        except BrokenPipeError:
            pass
        answer = self._read(proc, PROBE_TIMEOUT_S)
        if not answer:
            proc.kill()
            proc.wait()
            self.proc = None
            raise AssertionError(f"llama.cpp's grammar parser crashed or hung (exit code {proc.returncode}) "
                                 "on a grammar the checker accepted")
        return answer == "ok 1"

    def close(self) -> None:
        if self.proc is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            code = self.proc.wait(30)
            self.proc = None
            assert code == 0, f"the llama.cpp probe exited with {code}"


def check_llama(example: tuple[str, str], probe: LlamaProbe) -> str:
    from backends.grammar.grammar_check import GrammarError, check_grammar, schema_grammar

    kind, text = example
    try:
        grammar = check_grammar(text) if kind == "gbnf" else schema_grammar(text)
    except GrammarError:
        return f"{kind}: refused by the checker"
    assert probe.parses(grammar), f"llama.cpp refused a grammar the checker accepted: {grammar[:300]!r}"
    return f"{kind}: accepted, llama.cpp parsed it"


@contextmanager
def open_llama(tmp_dir: Path) -> Iterator[Check]:
    probe = LlamaProbe()
    with ExitStack() as stack:
        stack.callback(probe.close)
        yield lambda example: check_llama(example, probe)


def llama_strategy() -> st.SearchStrategy[tuple[str, str]]:
    return st.one_of(fs.gbnf_grammars(define_all=True).map(lambda g: ("gbnf", g)),
                     fs.schema_texts().map(lambda s: ("schema", s)))


# ------------------------------------------------------------------ 6. grammar-constrained sampling

SAMPLING_CAP_S = 2.0
"""Each grammar-sampling example's time cap: its cancel must stop it there, even inside llama.cpp's grammar work
(RUN_TIMEOUT_S is the hang guard)."""


def check_sampling(example: tuple[str, str], backend: Any) -> str:
    from backends.base import BackendError, CancelledError, CancelToken, SamplingParams

    kind, text = example
    constraint = {"grammar": text} if kind == "gbnf" else {"json_schema": text}
    params = SamplingParams(max_tokens=40, temperature=1.0, seed=len(text), **constraint)
    cancel = CancelToken()
    timer = threading.Timer(SAMPLING_CAP_S, cancel.cancel, args=("the example's time cap",))
    timer.start()
    try:
        _run_with_timeout(lambda: backend.generate("Write letters:", params, n=2, cancel=cancel), cancel)
    except CancelledError:
        return f"{kind}: cancelled at its cap"
    except BackendError as exc:
        return f"{kind}: {reason(str(exc), 60)}"
    finally:
        timer.cancel()
    return f"{kind}: finished"


@contextmanager
def open_sampling(tmp_dir: Path) -> Iterator[Check]:
    from backends.base import ModelSpec
    from backends.llama.models.bundled import bundled_model_path
    from backends.llama.worker.llama_backend import LlamaBackend

    backend = LlamaBackend(bundled_model_path(), ModelSpec(device="cpu", n_ctx=512, options=(
        ("kv_size", 1024), ("n_seq_max", 4))))
    try:
        yield lambda example: check_sampling(example, backend)
    finally:
        backend.close()


# ------------------------------------------------------------------ the registry

TARGETS: dict[str, FuzzTarget] = {t.name: t for t in (
    FuzzTarget("workflow_text", "YAML texts -> load + validate, the editor's parse (local and share mode)",
               fs.workflow_texts, open_workflow_text),
    FuzzTarget("editor_json", "canvas JSON -> StudioService.from_editor (local and share mode)",
               editor_json_strategy, open_editor_json),
    FuzzTarget("scheduler", "runs of tweaked examples on the fake backend, traced to SQLite",
               fs.run_cases, open_scheduler),
    FuzzTarget("deeplink", "?wf= payloads, page queries, run ids, encode/decode round trips",
               link_strategy, open_links),
    FuzzTarget("trace_import", "export documents, generated and mutated -> TraceStore.import_run",
               trace_document_strategy, open_trace_import),
    FuzzTarget("grammar", "GBNF texts -> grammar_problem / check_grammar",
               fs.gbnf_grammars, lambda tmp: open_plain(check_gbnf)),
    FuzzTarget("json_schema", "JSON schema texts -> schema_problem / schema_grammar",
               fs.schema_texts, lambda tmp: open_plain(check_schema)),
    FuzzTarget("llama_grammar", "grammars the checker accepts -> llama.cpp's parser in a child process",
               llama_strategy, open_llama),
    FuzzTarget("grammar_sampling", "ambiguous recursive grammars and schemas -> sampling on the bundled model, "
               f"each under a {SAMPLING_CAP_S:g} s cap", fs.ambiguous_grammars, open_sampling),
)}

SOURCE_CODE_RE = re.compile(r'(?:Issue\(\s*|self\.add\(\s*|ChildRefError\(\s*)"([a-z_]+)"')
"""Where the source names an issue code: Issue("code", ...), _NodeCheck.add("code", ...) and
ChildRefError("code", ...) (a sub-workflow reference that does not resolve)."""
