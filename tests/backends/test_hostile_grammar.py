"""Hostile grammars and JSON schemas are refused by the bounded checker before llama.cpp can crash on them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backends.base import BackendError, SamplingParams
from backends.grammar import grammar_check
from backends.grammar.grammar_check import (
    MAX_NESTING,
    MAX_REPETITION,
    MAX_RULES,
    grammar_problem,
    schema_problem,
)
from backends.grammar.grammar_constraints import grammar_for, schema_to_grammar
from backends.llama.worker.sampling_chain import SequenceSampler

NESTED_5000 = "root ::= " + "(" * 5000 + '"a"' + ")" * 5000
"""Segfaults llama.cpp's recursive grammar parser (exit 139) when it gets that far."""


class RecordingLib:
    """Stands in for the llama.cpp library: records every function asked for, so a test can show that a
    refused grammar never reached it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.calls.append(name)
        return lambda *args: 1


def test_thousands_of_nested_groups_are_refused_with_their_line() -> None:
    problem = grammar_problem(NESTED_5000)
    assert problem is not None and f"nested more than {MAX_NESTING} deep" in problem.message
    assert problem.line == 1
    on_line_3 = 'root ::= item\n# the items\nitem ::= ' + "(" * 20_000 + '"x"' + ")" * 20_000
    problem = grammar_problem(on_line_3)  # under the size limit: the parse itself refuses it
    assert problem is not None and problem.line == 3 and "nested" in problem.message


def test_grammar_for_and_the_sampler_refuse_it_before_llama_cpp() -> None:
    with pytest.raises(BackendError, match=f"nested more than {MAX_NESTING} deep"):
        grammar_for(SamplingParams(grammar=NESTED_5000))
    lib = RecordingLib()
    with pytest.raises(BackendError, match=r"llama\.cpp never sees it"):
        SequenceSampler(lib, object(), SamplingParams(), 0, grammar=NESTED_5000)
    assert lib.calls == []  # not even a sampler chain was made


def test_a_valid_grammar_reaches_the_sampler() -> None:
    assert grammar_for(SamplingParams(grammar='root ::= "yes" | "no"')) == 'root ::= "yes" | "no"'
    lib = RecordingLib()
    SequenceSampler(lib, object(), SamplingParams(), 0, grammar='root ::= "yes" | "no"')
    assert "llama_sampler_init_grammar" in lib.calls


def test_llama_cpp_s_own_example_grammars_pass() -> None:
    from llama_cpp import llama_grammar

    for name in ("ARITHMETIC_GBNF", "C_GBNF", "CHESS_GBNF", "JAPANESE_GBNF", "JSON_ARR_GBNF", "JSON_GBNF",
                 "LIST_GBNF"):
        assert grammar_problem(getattr(llama_grammar, name)) is None, name
    assert grammar_problem('root ::= item+\nitem ::= [a-z]{1,3} ("," | "\\n")  # a comment\n') is None
    assert grammar_problem('root ::= <[12]> !<|im_end|> .* "\\u00e9" [^"\\\\\\]]') is None


@pytest.mark.parametrize(("grammar", "says"), [
    ('root ::= "a"{2,1}', "below the minimum"),  # llama.cpp loops forever on this one
    (f'root ::= "a"{{{MAX_REPETITION + 1}}}', "over the limit"),
    ('root ::= "a"{99999999999999999999}', "over the limit"),
    ('root ::= "' + "a" * 300 + '"{1000}', "expands to more than"),
    ("root ::= x", "'x' is used but never defined"),
    ('item ::= "a"', "no `root` rule"),
    ('root ::= "abc', "unterminated string"),
    ("root ::= [a-", "unterminated character class"),
    ('root ::= ("a"', "never closed"),
    ('root ::= "a")', "without its '('"),
    ('root ::= "\\q"', "unknown escape"),
    ('root ::= "\\x4"', "needs 2 hex digits"),
    ("root ::= *", "nothing before * to repeat"),
    ('root ::= "a"\n  | "b"', "a line cannot start with '|'"),
    ('root ::= "a\x00b"', "NUL"),
    ("", "empty"),
    ('root ::= "' + "a" * (64 * 1024) + '"', "the limit is 65,536 bytes"),
    ("root ::= r0\n" + "".join(f'r{i} ::= "a"\n' for i in range(MAX_RULES + 1)), f"more than {MAX_RULES} rules"),
])
def test_every_limit_and_syntax_error_is_a_message(grammar: str, says: str) -> None:
    problem = grammar_problem(grammar)
    assert problem is not None and says in problem.message


def test_json_schemas_are_bounded_before_the_converter_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def must_not_run(schema_text: str) -> str:
        raise AssertionError("the converter ran on a schema over the limits")

    monkeypatch.setattr(grammar_check, "_convert_schema", must_not_run)
    deep: dict[str, Any] = {"type": "array"}
    node = deep
    for _ in range(40):
        node["items"] = {"type": "array"}
        node = node["items"]
    for schema, says in [
        ({"type": "array", "items": {"type": "string"}, "minItems": 10**9}, "minItems"),
        ({"type": "string", "maxLength": 10**9}, "maxLength"),
        ({"type": "string", "pattern": "a{100000}"}, "repetition count"),
        (deep, "nested more than"),
    ]:
        problem = schema_problem(json.dumps(schema))
        assert problem is not None and says in problem.message, (schema, problem)
    with pytest.raises(BackendError, match="maxLength"):
        schema_to_grammar(json.dumps({"type": "string", "maxLength": 10**6}))


def test_a_schema_whose_grammar_nests_too_deep_is_refused_and_a_real_one_passes() -> None:
    too_deep = json.dumps({"type": "string", "maxLength": MAX_NESTING + 50})  # one nested group per optional char
    with pytest.raises(BackendError, match="grammar made from the JSON schema"):
        grammar_for(SamplingParams(json_schema=too_deep))
    real = json.dumps({"type": "object", "properties": {"name": {"type": "string", "maxLength": 40},
                                                        "tags": {"type": "array", "items": {"type": "string"},
                                                                 "maxItems": 5},
                                                        "age": {"type": "integer", "minimum": 0}},
                       "required": ["name", "age"]})
    grammar = grammar_for(SamplingParams(json_schema=real))
    assert grammar is not None and "root ::=" in grammar and grammar_problem(grammar) is None


@pytest.mark.model
def test_the_real_engine_refuses_hostile_grammars_and_still_serves(llama: Any) -> None:
    """Through the llama.cpp backend: the refusals come back as BackendError (the process lives), and the same
    engine then constrains a request with a valid grammar."""
    with pytest.raises(BackendError, match="nested more than"):
        llama.generate("x", SamplingParams(max_tokens=4, grammar=NESTED_5000))
    with pytest.raises(BackendError, match="below the minimum"):
        llama.generate("x", SamplingParams(max_tokens=4, grammar='root ::= "a"{2,1}'))
    with pytest.raises(BackendError, match="maxLength"):
        llama.generate("x", SamplingParams(max_tokens=4, json_schema=json.dumps({"type": "string",
                                                                                  "maxLength": 10**9})))
    result = llama.generate("Is water wet? Answer:", SamplingParams(max_tokens=4, temperature=1.0,
                                                                    grammar='root ::= "yes" | "no"'), n=2)
    assert all(c.text in ("yes", "no") for c in result.completions)
