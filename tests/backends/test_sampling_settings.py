"""Sampling-setting validation and JSON-schema → GBNF conversion (no model needed)."""

from __future__ import annotations

import json

import pytest

from backends.base import BackendError, SamplingParams, validate_params
from backends.grammar.grammar_constraints import grammar_for, schema_to_grammar
from backends.llama.worker.sampling_chain import seed32


def test_defaults_are_valid() -> None:
    validate_params(SamplingParams())
    validate_params(SamplingParams(temperature=0.7, top_p=0.9, min_p=0.05, typical_p=0.95, logprobs=5))


def test_every_bad_setting_is_named_in_one_error() -> None:
    bad = SamplingParams(max_tokens=-1, temperature=-0.5, top_p=1.5, min_p=1.0, typical_p=0.0,
                         repeat_penalty=0.0, logprobs=99, grammar="root ::= x", json_schema="{}")
    with pytest.raises(BackendError) as caught:
        validate_params(bad)
    message = str(caught.value)
    for name in ("max_tokens", "temperature", "top_p", "min_p", "typical_p", "repeat_penalty", "logprobs",
                 "either grammar or json_schema"):
        assert name in message


def test_json_schema_becomes_a_grammar() -> None:
    schema = json.dumps({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})
    grammar = schema_to_grammar(schema)
    assert "root ::=" in grammar and "true" in grammar
    assert grammar_for(SamplingParams(json_schema=schema)) == grammar
    assert grammar_for(SamplingParams(grammar='root ::= "a"')) == 'root ::= "a"'
    assert grammar_for(SamplingParams()) is None
    with pytest.raises(BackendError, match="not valid JSON"):
        schema_to_grammar("{oops")


def test_seeds_fit_llama_cpp_and_never_mean_random() -> None:
    assert seed32(7) == 7
    assert seed32(-1) != 0xFFFFFFFF  # llama.cpp reads 0xFFFFFFFF as "random seed"
    assert 0 <= seed32(2**40 + 5) < 2**32
