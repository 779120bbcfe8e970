"""Golden model outputs of each family parsed into text and calls: outputs rendered by the family's own template,
and hand-written ones (parallel, leading text, thinking, malformed calls read as text, never an exception)."""

from __future__ import annotations

from typing import Any

import pytest

from backends.tools.parse import json_end, parse_gemma_call, parse_tool_calls
from backends.tools.types import ToolAnswer, ToolChoice, ToolRequest
from tests.backends.tools.tool_cases import AUTO, HAND_OUTPUTS, template_outputs

TEMPLATE_CASES = template_outputs()
HAND_CASES = [(family, out, content, calls) for family, cases in HAND_OUTPUTS.items()
              for out, content, calls in cases]


def _calls(answer: ToolAnswer) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, dict(c.arguments)) for c in answer.calls]


@pytest.mark.parametrize(("name", "family", "output", "calls"), TEMPLATE_CASES,
                         ids=[f"{c[0]}-{len(c[3])}" for c in TEMPLATE_CASES])
def test_what_a_template_writes_for_calls_parses_back_to_them(name: str, family: str, output: str,
                                                              calls: list) -> None:
    answer = parse_tool_calls(output, family, AUTO)
    assert _calls(answer) == calls
    assert answer.content in ("", "<think>\n\n</think>")  # Qwen 3's template writes an empty thinking block
    assert all(c.id for c in answer.calls)


@pytest.mark.parametrize(("family", "output", "content", "calls"), HAND_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(HAND_CASES)])
def test_golden_outputs(family: str, output: str, content: str, calls: list) -> None:
    answer = parse_tool_calls(output, family, AUTO)
    assert _calls(answer) == calls
    assert answer.content == content


@pytest.mark.parametrize(("family", "output"), [(c[0], c[1]) for c in HAND_CASES] +
                         [(c[1], c[2]) for c in TEMPLATE_CASES])
def test_every_prefix_of_an_output_parses_without_an_exception(family: str, output: str) -> None:
    for end in range(len(output) + 1):
        answer = parse_tool_calls(output[:end], family, AUTO)
        for call in answer.calls:  # a cut output holds only whole calls
            assert isinstance(call.arguments, dict) and call.name


def test_the_model_s_own_call_ids_are_kept() -> None:
    out = '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1b2c3d4e"}]'
    assert parse_tool_calls(out, "mistral", AUTO).calls[0].id == "a1b2c3d4e"


def test_without_active_tools_the_text_is_returned_as_it_is() -> None:
    out = '<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call> '
    assert parse_tool_calls(out, "hermes", ToolRequest(AUTO.tools, ToolChoice("none"))) == ToolAnswer(out)
    assert parse_tool_calls(out, "hermes", ToolRequest()) == ToolAnswer(out)


def test_an_unknown_family_reads_the_generic_form() -> None:
    out = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}'
    assert _calls(parse_tool_calls(out, "no-such-family", AUTO)) == [("get_weather", {"city": "Paris"})]


def test_a_raw_newline_in_an_unconstrained_string_still_parses_to_its_call() -> None:
    out = '<tool_call>\n{"name": "search_web", "arguments": {"query": "Paris\nweather"}}\n</tool_call>'
    assert _calls(parse_tool_calls(out, "hermes", AUTO)) == [("search_web", {"query": "Paris\nweather"})]


def test_a_call_without_arguments_has_none() -> None:
    assert _calls(parse_tool_calls('<tool_call>{"name": "pwd"}</tool_call>', "hermes", AUTO)) == [("pwd", {})]


def test_json_end_follows_strings_and_brackets() -> None:
    value = '{"a": "}{", "b": [1, {"c": "\\""}]}'
    assert json_end(value + " tail", 0) == len(value)
    assert json_end('{"a": [1, 2}', 0) == 12  # the first bracket that does not match ends a malformed value
    assert json_end('{"a": "open', 0) is None


def test_functiongemma_values() -> None:
    call = parse_gemma_call("call:f{a:<escape>x, y<escape>,n:-2.5,i:7,b:false,z:null,l:[1,<escape>s<escape>],"
                            "o:{k:<escape>v<escape>}}")
    assert call is not None and dict(call.arguments) == {"a": "x, y", "n": -2.5, "i": 7, "b": False, "z": None,
                                                         "l": [1, "s"], "o": {"k": "v"}}
    assert parse_gemma_call("call:f{a:<escape>open}") is None
    assert parse_gemma_call("call:f{a:1} trailing") is None
    assert parse_gemma_call("nothing") is None
