"""Request bodies and answers of the remote backend, per server (pure functions: the shapes vLLM, SGLang, llama-server
and OpenAI document, including the ones no test here has a live server for)."""

from __future__ import annotations

import json

import pytest

from backends.base import BackendError, SamplingParams
from backends.grammar.grammar_check import check_grammar
from backends.remote.openai_caps import Capabilities, grammar_fields, prompt_logprobs, schema_fields
from backends.remote.openai_request import (
    Answer,
    constraint_fields,
    finish_reason,
    gbnf_literal,
    readable,
    sampling_fields,
    token_logprobs,
    usage_of,
)

SCHEMA = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})


def test_sampling_fields_follow_what_each_server_takes() -> None:
    params = SamplingParams(max_tokens=9, temperature=0.5, top_k=0, top_p=0.9, min_p=0.1, stop=("\n",))
    llama = sampling_fields(params, Capabilities(kind="llama_server"))
    assert llama == {"max_tokens": 9, "temperature": 0.5, "top_p": 0.9, "top_k": 0, "min_p": 0.1, "typical_p": 1.0,
                     "repeat_penalty": 1.0, "stop": ["\n"]}
    vllm = sampling_fields(params, Capabilities(kind="vllm"))
    assert vllm["top_k"] == -1 and vllm["repetition_penalty"] == 1.0 and "typical_p" not in vllm  # -1: no top-k
    assert set(sampling_fields(params, Capabilities(kind="openai"))) == {"max_tokens", "temperature", "top_p", "stop"}


def test_constraints_go_in_the_field_the_probe_found() -> None:
    grammar = 'root ::= "a" | "b"'
    assert constraint_fields(SamplingParams(grammar=grammar), Capabilities(kind="vllm", grammar="structured_outputs"),
                             "u") == {"structured_outputs": {"grammar": grammar}}
    assert constraint_fields(SamplingParams(grammar=grammar), Capabilities(kind="sglang", grammar="ebnf"), "u") == \
        {"ebnf": grammar}
    converted = constraint_fields(SamplingParams(json_schema=SCHEMA),
                                  Capabilities(kind="llama_server", grammar="grammar", json_schema="grammar"), "u")
    assert "root ::=" in converted["grammar"]
    as_format = constraint_fields(SamplingParams(json_schema=SCHEMA), Capabilities(kind="openai",
                                                                                   json_schema="response_format"), "u")
    assert as_format["response_format"]["json_schema"]["schema"] == json.loads(SCHEMA)
    assert schema_fields("guided_json", {"x": 1}) == {"guided_json": {"x": 1}}
    assert grammar_fields("guided_grammar", "g") == {"guided_grammar": "g"}


def test_a_missing_constraint_names_the_servers_that_have_it() -> None:
    metagen = Capabilities(kind="metagen", json_schema="response_format")
    with pytest.raises(BackendError, match=r"takes no GBNF grammar; it does take a JSON schema .* vLLM and SGLang"):
        constraint_fields(SamplingParams(grammar='root ::= "a"'), metagen, "http://h/v1")
    with pytest.raises(BackendError, match=r"takes no JSON schema constraint\. JSON schemas work with"):
        constraint_fields(SamplingParams(json_schema=SCHEMA), Capabilities(kind="unknown"), "http://h/v1")
    with pytest.raises(BackendError, match="not valid JSON"):
        constraint_fields(SamplingParams(json_schema="{nope"), metagen, "http://h/v1")


def test_finish_reasons_in_the_engines_words() -> None:
    plain = SamplingParams()
    stopped = SamplingParams(stop=("\n",))
    assert finish_reason({"finish_reason": "length"}, stopped) == "length"
    assert finish_reason({"finish_reason": "stop", "stop_reason": "\n"}, stopped) == "stop"  # vLLM: a stop string
    assert finish_reason({"finish_reason": "stop", "stop_reason": None}, stopped) == "eog"  # vLLM: end of text
    assert finish_reason({"finish_reason": "stop", "matched_stop": 2}, stopped) == "eog"  # SGLang: the EOS id
    assert finish_reason({"finish_reason": "stop"}, stopped) == "stop"  # others: stop strings were given
    assert finish_reason({"finish_reason": "stop"}, plain) == "eog"


def test_logprobs_from_both_shapes() -> None:
    text = token_logprobs({"tokens": [" a", " b"], "token_logprobs": [-0.5, -1.0],
                           "top_logprobs": [{" a": -0.5, " c": -2.0, " d": -0.9}, None]}, 2)
    assert [(t.token, t.logprob) for t in text] == [(" a", -0.5), (" b", -1.0)]
    assert text[0].top == [(" a", -0.5), (" d", -0.9)] and text[1].top == []
    chat = token_logprobs({"content": [{"token": "Yes", "logprob": -0.1, "top_logprobs": [
        {"token": "No", "logprob": -2.5}, {"token": "Yes", "logprob": -0.1}]}]}, None)
    assert chat[0].token == "Yes" and chat[0].top == [("Yes", -0.1), ("No", -2.5)]
    assert token_logprobs(None, 1) == []


def test_echoed_prompt_logprobs_by_text_offset() -> None:
    lp = {"tokens": ["The", " cat", " sat", "."], "token_logprobs": [None, -3.0, -2.0, -1.0],
          "text_offset": [0, 3, 7, 11]}
    assert prompt_logprobs(lp, 3, 11) == [-3.0, -2.0]
    assert prompt_logprobs(lp, 0, 7) is None  # the first token has none
    del lp["text_offset"]  # offsets rebuilt from the token texts
    assert prompt_logprobs(lp, 7, 12) == [-2.0, -1.0]


def test_usage_from_the_server_or_estimated() -> None:
    reported = Answer(texts={0: "x"}, usage={"prompt_tokens": 100, "completion_tokens": 7,
                                             "prompt_tokens_details": {"cached_tokens": 64}})
    u = usage_of(reported, 0)
    assert (u.prompt_tokens, u.prompt_tokens_evaluated, u.prompt_tokens_cached, u.completion_tokens) == (100, 36, 64, 7)
    timed = Answer(texts={0: "x"}, usage={"prompt_tokens": 10, "completion_tokens": 2},
                   timings={"cache_n": 4, "prompt_ms": 20.0, "predicted_ms": 50.0})
    u = usage_of(timed, 0)
    assert (u.prompt_tokens_cached, u.prefill_s, u.decode_s) == (4, 0.02, 0.05)
    streamed = Answer(texts={0: "a b c", 1: "d"}, pieces={0: 3, 1: 1})
    u = usage_of(streamed, 12)
    assert (u.prompt_tokens, u.completion_tokens) == (12, 4)


def test_a_literal_grammar_spells_exactly_the_text() -> None:
    text = 'say "hi"\\ then\n\tgo \x01 é'
    grammar = gbnf_literal(text)
    assert check_grammar(grammar) == grammar
    assert grammar == 'root ::= "say \\"hi\\"\\\\ then\\n\\tgo \\x01 é"'


def test_chat_prompts_read_as_role_blocks() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert readable(messages) == "<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n"
    assert readable("raw") == "raw"
