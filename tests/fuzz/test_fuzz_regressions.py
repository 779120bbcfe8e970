"""What the fuzz targets found, one test each with the failing example, so it stays fixed."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest

from app.run.providers import fake_provider
from app.run.scheduler import Scheduler, resolve_inputs
from app.service.errors import UserError
from app.service.studio import StudioService
from app.share.deeplink import DeepLinkError, decode_payload, read_deep_link
from app.share.policy import SharePolicy, check_workflow_allowed
from app.traces import TraceStore, TraceStoreError
from app.workflow.problems import WorkflowError
from app.workflow.spec import load_workflow_text, workflow_from_dict
from app.workflow.validation import validate
from backends.grammar.grammar_check import MAX_PARSE_STACKS, grammar_problem, schema_problem
from nodes.registry import default_registry
from tests.fuzz.strategies import chain_grammar, example_data, example_texts
from tests.fuzz.targets import LlamaProbe, base_documents, integrity_problem

GENERATOR = """\
version: 1
name: regression
models:
  main: {source: bundled, 1: x, zz: 2}
inputs:
  question: {type: text, default: "What is 2 + 2?"}
nodes:
- id: gen
  kind: generator
  params:
    prompt: "{question}"
    PARAM
  inputs: {question: inputs.question}
outputs: {answer: gen.text}
"""


def workflow(param: str = "max_tokens: 8") -> str:
    return GENERATOR.replace("PARAM", param)


# ------------------------------------------------------------------ deep links


@pytest.mark.parametrize("payload", ["².eJwrSS0uAQAEXQHB", "١.eJwrSS0uAQAEXQHB", "1" * 5000 + ".eJwr"])
def test_a_link_version_of_unicode_digits_or_5000_digits_is_refused(payload: str) -> None:
    # was: ValueError from int() ("invalid literal", "Exceeds the limit (4300 digits)")
    with pytest.raises(DeepLinkError):
        decode_payload(payload)
    link = read_deep_link({"wf": payload})
    assert link is not None and link.error


# ------------------------------------------------------------------ params of the wrong shape

WRONG_SHAPES = {"list": [1, "x", [2]], "mapping": {"a": {"b": 1}}, "null": None, "negative": -5}


def test_every_param_of_every_example_given_a_wrong_shape_gets_issues_never_an_exception() -> None:
    # was: TypeError out of validate() for a voter's `method: [1, x, list]` (unhashable, in a dict lookup) and
    # ValueError for a diverse-beam sampler's `n: -5` (max() of no divisors): the editor's JSON reached both
    registry = default_registry()
    checked = 0
    for name, data in example_data().items():
        for index, node in enumerate(data.get("nodes", [])):
            keys = set(node.get("params", {})) | {p.name for p in registry.get(node["kind"]).params}
            for key in sorted(keys):
                for shape, value in WRONG_SHAPES.items():
                    changed = copy.deepcopy(data)
                    changed["nodes"][index].setdefault("params", {})[key] = value
                    try:
                        validate(workflow_from_dict(changed), registry)
                    except WorkflowError:
                        pass
                    except Exception as exc:  # what the test is for: any other exception
                        pytest.fail(f"{name}: {node['id']}.{key} = {shape} raised {type(exc).__name__}: {exc}")
                    checked += 1
    assert checked > 1000


# ------------------------------------------------------------------ grammars and schemas


def test_a_schema_pattern_count_of_unicode_digits_is_checked() -> None:
    # was: ValueError from int("²") out of schema_problem, and so out of validate()
    problem = schema_problem('{"type": "string", "pattern": "a{²}"}')
    assert problem is None or problem.message
    wf = load_workflow_text(workflow("json_schema: {type: string, pattern: 'a{²}'}"))
    assert {i.code for i in validate(wf, default_registry())} <= {"unknown_key", "bad_grammar"}


@pytest.mark.parametrize("grammar", ['root ::= "a"**', 'root ::= "a"?*', 'root ::= "a"?+', 'root ::= root "a" | "b"',
                                     'root ::= x\nx ::= y "a" | "b"\ny ::= "" | x'])
def test_left_recursion_is_refused_as_llama_cpp_refuses_it(grammar: str) -> None:
    # was: accepted, then llama.cpp's left-recursion check refused it at run time ("does not parse")
    problem = grammar_problem(grammar)
    assert problem is not None and "left recursion" in problem.message


@pytest.mark.parametrize(("grammar", "refused"), [
    ('root ::= "a"{40}{50}', False), ('root ::= "a"{40}{51}', True),
    ('root ::= ("a"{0,50}){39}', False), ('root ::= ("a"{0,50}){40}', True),
    ('root ::= "a"' + "{1,2}" * 10, False), ('root ::= "a"' + "{1,2}" * 11, True),
])
def test_stacked_repetitions_are_counted_as_llama_cpp_counts_them(grammar: str, refused: bool) -> None:
    # was: all accepted; llama.cpp refuses more than 2,000 copies of one item ("exceeds sane defaults")
    problem = grammar_problem(grammar)
    assert (problem is not None and "copies" in problem.message) == refused, problem


def test_a_long_literal_repeated_counts_every_copy() -> None:
    # was: accepted (the checker counted `"aaa...a"+` as one element): llama.cpp then held ~450 MB for it
    problem = grammar_problem('root ::= "' + "a" * 20_000 + '"+{1000}')
    assert problem is not None and "expands to more than" in problem.message


@pytest.mark.parametrize("nullable", [True, False])
def test_alternatives_that_begin_alike_are_refused_before_they_stall_llama_cpp(nullable: bool) -> None:
    # was: accepted; at 17-18 levels llama.cpp's grammar setup ran for minutes (tens of minutes at 20)
    assert grammar_problem(chain_grammar(10, nullable)) is None
    started = time.perf_counter()
    problem = grammar_problem(chain_grammar(20, nullable))
    assert time.perf_counter() - started < 1.0
    assert problem is not None and ("ways" in problem.message or "walk" in problem.message)
    assert f"more than {MAX_PARSE_STACKS:,} ways" in str(grammar_problem(chain_grammar(13, nullable)))


def test_json_schemas_with_many_optional_properties_still_pass() -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(100)}}
    assert schema_problem(json.dumps(schema)) is None


def test_the_limits_agree_with_llama_cpp_s_own_parser() -> None:
    """The grammars just inside the limits parse in llama.cpp, quickly (in a child process: it can crash)."""
    probe = LlamaProbe()
    try:
        for grammar in ('root ::= "a"{40}{50}', 'root ::= ("a"{0,50}){39}', chain_grammar(10, True),
                        chain_grammar(10, False), 'root ::= ("a"?)*'):
            assert grammar_problem(grammar) is None
            started = time.perf_counter()
            assert probe.parses(grammar), grammar
            assert time.perf_counter() - started < 10
        assert not probe.parses('root ::= "a"**')  # llama.cpp refuses what the checker refuses
    finally:
        probe.close()


# ------------------------------------------------------------------ workflows, share mode, runs


def test_share_mode_checks_a_model_entry_with_a_number_key(tmp_path: Path) -> None:
    # was: TypeError from sorted([1, "zz"]) out of check_workflow_allowed, so out of the editor's parse
    wf = load_workflow_text(workflow())
    policy = SharePolicy.for_serving("127.0.0.1", force_share_mode=True, model_choices=[])
    issues = check_workflow_allowed(wf, policy)
    assert any(i.code == "model_option_refused" and "1, zz" in i.message for i in issues)
    service = StudioService(workflows_dir=tmp_path / "wf", dry_run=True, policy=policy, models_dir=tmp_path)
    try:
        assert any(i["code"] == "model_option_refused" for i in service.parse_yaml(workflow())["issues"])
    finally:
        service.close()


@pytest.mark.parametrize("method", ["[llm_judge]", "{a: 1}"])
def test_a_verifier_method_that_is_a_list_or_mapping_is_reported(method: str) -> None:
    # was: TypeError (unhashable type) out of Verifier.required_inputs, so out of validate() and the editor
    wf = load_workflow_text(f"""version: 1
inputs: {{question: q}}
nodes:
- {{id: check, kind: verifier, params: {{method: {method}}}, inputs: {{question: inputs.question}}}}
outputs: {{score: check.scores}}
""")
    issues = validate(wf, default_registry())
    assert any(i.code == "bad_param" and "'method'" in i.message for i in issues)


@pytest.mark.parametrize("code", ["-" * 100_000 + "1", "not " * 100_000 + "x", "1" + "+1" * 300_000])
def test_python_code_nested_past_the_parser_is_reported(code: str) -> None:
    # was: MemoryError / RecursionError from compile() in Verifier.validate_params, out of validate()
    wf = load_workflow_text(f"""version: 1
inputs: {{question: q}}
nodes:
- {{id: check, kind: verifier, params: {{method: python, code: '{code}'}}, inputs: {{question: inputs.question}}}}
outputs: {{score: check.scores}}
""")
    issues = validate(wf, default_registry())
    assert any(i.code == "bad_param" and "'code'" in i.message and "Python" in i.message for i in issues)


@pytest.mark.parametrize("x", ["99.96", "-1e-320", "-0.04"])
def test_the_canonical_dump_of_a_layout_is_stable(x: str) -> None:
    # was: `[99.96, 5]` dumped as [100.0, 5], then as [100, 5] (and -1e-320 as -0.0, then 0): every save a diff
    canonical = load_workflow_text(workflow() + f"layout: {{gen: [{x}, 5]}}\n").to_yaml()
    assert load_workflow_text(canonical).to_yaml() == canonical


@pytest.mark.parametrize("text", ["!!timestamp 2001-12-140version: 1\n", "version: !!int \n", "name: !!float \n",
                                  "version: 1\nname: !!bool 2001-12-140\n"])
def test_a_value_that_does_not_fit_its_tag_is_a_syntax_error(text: str, tmp_path: Path) -> None:
    # was: AttributeError / IndexError / KeyError from PyYAML's constructors, out of load_workflow_text
    with pytest.raises(WorkflowError) as caught:
        load_workflow_text(text)
    assert caught.value.issues[0].code == "yaml_syntax"
    service = StudioService(workflows_dir=tmp_path / "wf", dry_run=True, models_dir=tmp_path)
    try:
        assert service.parse_yaml(text)["error"]["code"] == "yaml_syntax"
    finally:
        service.close()


def test_a_param_named_by_a_number_is_reported() -> None:
    # was: TypeError ("'int' object is not iterable") from difflib in the "did you mean" hint, out of validate()
    wf = load_workflow_text(workflow("1: x"))
    assert any(i.code == "bad_param" and "no param 1" in i.message for i in validate(wf, default_registry()))


def test_a_lone_surrogate_in_a_workflow_is_refused_at_load(tmp_path: Path) -> None:
    # was: loaded, then wf.to_yaml() raised UnicodeEncodeError (the editor's parse and from_editor crashed)
    text = workflow('system: "be brief \\ud800"')
    with pytest.raises(WorkflowError) as caught:
        load_workflow_text(text)
    issue = caught.value.issues[0]
    assert issue.code == "yaml_syntax" and issue.line == 12 and "nodes[0].params.system" in issue.message
    service = StudioService(workflows_dir=tmp_path / "wf", dry_run=True, models_dir=tmp_path)
    try:
        assert service.parse_yaml(text)["error"]["code"] == "yaml_syntax"
        canvas = load_workflow_text(workflow()).to_dict()
        canvas["name"] = "\udfff"
        with pytest.raises(UserError, match="surrogate"):
            service.from_editor(canvas)
    finally:
        service.close()


def test_a_lone_surrogate_in_a_run_input_is_refused_before_the_run(tmp_path: Path) -> None:
    # was: the fake backend crashed in the node, and the trace store lost the whole run (UnicodeEncodeError)
    wf = load_workflow_text(example_texts()["chain_of_thought"])
    with pytest.raises(WorkflowError) as caught:
        resolve_inputs(wf, {"question": "a\udcffb"})  # what a command line makes of bytes that are not UTF-8
    assert caught.value.issues[0].code == "bad_input"
    with TraceStore(tmp_path / "t.db") as store:
        with pytest.raises(WorkflowError):
            Scheduler(default_registry(), fake_provider()).run(wf, {"question": "\ud800"}, observers=[store])
        assert store.list_runs() == []


@pytest.mark.parametrize("seed", [2**63, -(2**63) - 1, 10**30])
def test_a_run_seed_beyond_64_bits_is_refused_before_the_run(seed: int, tmp_path: Path) -> None:
    # was: the run succeeded but the trace store lost it ("Python int too large to convert to SQLite INTEGER")
    wf = load_workflow_text(example_texts()["instruction_greedy"])
    scheduler = Scheduler(default_registry(), fake_provider())
    with TraceStore(tmp_path / "t.db") as store:
        with pytest.raises(WorkflowError) as caught:
            scheduler.run(wf, seed=seed, observers=[store])
        assert caught.value.issues[0].code == "bad_input"
        result = scheduler.run(wf, seed=2**63 - 1, observers=[store])
        assert store.get_run(result.run_id)["run"]["seed"] == 2**63 - 1


# ------------------------------------------------------------------ trace import


def test_damaged_trace_documents_are_refused_and_leave_nothing(tmp_path: Path) -> None:
    # was: sqlalchemy IntegrityError / StatementError out of import_run instead of TraceStoreError
    document = base_documents()[0]
    twice = {**document, "nodes": document["nodes"] + document["nodes"][:1]}  # two nodes with one id
    wrong_type = json.loads(json.dumps(document))
    wrong_type["lm_calls"][0]["start"] = "F¤"  # text where a number is stored
    with TraceStore(tmp_path / "t.db") as store:
        for damaged in (twice, wrong_type):
            with pytest.raises(TraceStoreError, match="damaged"):
                store.import_run(damaged)
        assert store.list_runs() == [] and integrity_problem(store) is None
        assert store.get_run(store.import_run(document))["run"]["status"] == document["run"]["status"]
