"""Tool conversations rendered through each family's real chat template: the tools, a call and its result in the
family's own format (native), or llama.cpp's generic form for templates that ignore tools."""

from __future__ import annotations

import json
import re

import pytest

from backends.base import BackendError
from backends.tools.render import detect_family, render_tool_prompt, template_caps
from backends.tools.types import ToolChoice, ToolRequest
from tests.backends.tools.tool_cases import (
    AUTO,
    BOS_EOS,
    FAMILY_TEMPLATES,
    NATIVE,
    PARIS,
    QUESTION,
    ROME,
    WEATHER,
    call_message,
    template,
)

ROUND_TRIP = [*QUESTION, call_message(PARIS), {"role": "tool", "tool_call_id": "call_0", "content": "18 C, sunny"}]

CALL_TEXT = {
    "hermes": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>',
    "llama3": '<|start_header_id|>assistant<|end_header_id|>\n\n'
              '{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}<|eot_id|>',
    "mistral": '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}, "id": "',
    "gemma": "<start_function_call>call:get_weather{city:<escape>Paris<escape>,days:<escape>3<escape>}"
             "<end_function_call>",
}
RESULT_TEXT = {
    "hermes": "<tool_response>\n18 C, sunny\n</tool_response>",
    "llama3": '<|start_header_id|>ipython<|end_header_id|>\n\n"18 C, sunny"<|eot_id|>',
    "mistral": '[TOOL_RESULTS]{"content": 18 C, sunny, "call_id": "',
    "gemma": "Function result for get_weather: 18 C, sunny",
}


def _render(name: str, messages: list[dict], request: ToolRequest = AUTO, **kw: object):  # type: ignore[no-untyped-def]
    bos, eos = BOS_EOS[FAMILY_TEMPLATES[name]]
    return render_tool_prompt(template(name), messages, request, bos_token=bos, eos_token=eos, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "family"), sorted(FAMILY_TEMPLATES.items()))
def test_each_real_template_is_told_apart(name: str, family: str) -> None:
    assert detect_family(template(name)) == family


def test_no_template_is_generic() -> None:
    assert detect_family(None) == detect_family("") == "generic"


@pytest.mark.parametrize(("name", "family"), sorted(NATIVE.items()))
def test_a_native_round_trip_holds_the_tools_the_call_and_its_result(name: str, family: str) -> None:
    out = _render(name, ROUND_TRIP)
    assert out.native and out.family == family
    text = out.text
    assert "get_weather" in text and "The weather of a city" in text and "search_web" in text
    assert '"enum": ["celsius", "fahrenheit"]' in text or '"celsius"' in text  # the schema itself, as JSON
    assert CALL_TEXT[family] in text
    assert RESULT_TEXT[family] in text
    assert '\\"city\\"' not in text  # arguments reach the template as it expects them, never JSON in a JSON string
    assert text.index("get_weather") < text.index(RESULT_TEXT[family])


def test_mistral_call_ids_become_nine_alphanumerics_shared_by_the_call_and_its_result() -> None:
    text = _render("mistralai-Mistral-Nemo-Instruct-2407.jinja", ROUND_TRIP).text
    ids = re.findall(r'"id": "([^"]*)"', text)
    result_ids = re.findall(r'"call_id": "([^"]*)"', text)
    assert len(ids) == 1 and len(ids[0]) == 9 and ids[0].isalnum() and result_ids == ids


def test_templates_that_hold_one_call_per_turn_get_parallel_calls_one_by_one() -> None:
    messages = [*QUESTION, call_message(PARIS, ROME),
                {"role": "tool", "tool_call_id": "call_0", "content": "18 C"},
                {"role": "tool", "tool_call_id": "call_1", "content": "3 hotels"}]
    name = "meta-llama-Llama-3.1-8B-Instruct.jinja"
    assert not template_caps(template(name)).supports_parallel_tool_calls
    text = _render(name, messages).text  # the template itself raises "only supports single tool-calls"
    assert '{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}' in text
    assert '{"name": "search_web", "parameters": {"query": "Rome hotels"}}' in text
    assert text.count("<|start_header_id|>ipython<|end_header_id|>") == 2


def test_a_tool_result_without_a_name_is_named_from_its_call() -> None:
    messages = [*QUESTION, call_message(PARIS), {"role": "tool", "tool_call_id": "call_0", "content": "18 C"}]
    out = _render("functiongemma-vllm-example.jinja", messages)
    assert "Function result for get_weather: 18 C" in out.text


def test_functiongemma_gets_its_developer_prompt_when_there_is_none() -> None:
    out = _render("functiongemma-vllm-example.jinja", [{"role": "user", "content": "Weather in Paris?"}])
    assert out.native and out.family == "gemma"
    assert "You are a model that can do function calling" in out.text and "Function: get_weather" in out.text


@pytest.mark.parametrize("name", ["google-gemma-3n-it.jinja", "google-gemma-2-2b-it.jinja",
                                  "microsoft-Phi-3.5-mini-instruct.jinja", None])
def test_templates_that_ignore_tools_get_the_generic_form(name: str | None) -> None:
    text_of = template(name) if name else None
    out = render_tool_prompt(text_of, ROUND_TRIP, AUTO, bos_token="<bos>", eos_token="<eos>")
    assert not out.native and out.family == "generic"
    text = out.text
    assert "You can call any of the following tools" in text and '"name": "get_weather"' in text
    assert "`tool_calls`" in text and "`response`" in text
    # the past call as the generic answer JSON, its result as a tool_response object
    assert '"tool_calls": [\n    {\n      "name": "get_weather",\n      "arguments": {\n        "city": "Paris"' in text
    assert '"tool_response": {\n    "tool": "get_weather",\n    "content": "18 C, sunny"' in text
    assert "You are a helpful assistant." in text


def test_gemma_turns_alternate_after_tool_results_become_user_text() -> None:
    messages = [*QUESTION, call_message(PARIS, ROME),
                {"role": "tool", "tool_call_id": "call_0", "content": "18 C"},
                {"role": "tool", "tool_call_id": "call_1", "content": "3 hotels"},
                {"role": "user", "content": "And tomorrow?"}]
    text = _render("google-gemma-3n-it.jinja", messages).text  # the template raises if two user turns follow
    assert text.count("<start_of_turn>user") == 2 and '"content": "3 hotels"' in text


def test_the_generic_form_says_what_the_choice_asks() -> None:
    required = render_tool_prompt(None, QUESTION, ToolRequest((WEATHER,), ToolChoice("required"), parallel=False))
    assert "`response`" not in required.text and "exactly one item" in required.text
    named = render_tool_prompt(None, QUESTION, ToolRequest((WEATHER,), ToolChoice("function", "get_weather")))
    assert "calling the tool `get_weather`" in named.text


def test_tool_choice_none_shows_no_tools_but_keeps_the_history() -> None:
    out = _render("Qwen-Qwen2.5-7B-Instruct.jinja", ROUND_TRIP, ToolRequest(AUTO.tools, ToolChoice("none")))
    assert "# Tools" not in out.text and "<tool_response>\n18 C, sunny" in out.text


def test_developer_messages_are_system_messages_and_content_parts_are_joined() -> None:
    messages = [{"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
                {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]}]
    text = _render("Qwen-Qwen2.5-7B-Instruct.jinja", messages).text
    assert text.startswith("<|im_start|>system\nBe brief.") and "<|im_start|>user\nHi there<|im_end|>" in text


def test_the_bos_token_is_written_once_by_the_template() -> None:
    text = _render("meta-llama-Llama-3.1-8B-Instruct.jinja", ROUND_TRIP).text
    assert text.startswith("<|begin_of_text|>") and text.count("<|begin_of_text|>") == 1


def test_string_and_object_arguments_render_alike() -> None:
    as_object = [*QUESTION, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": dict(PARIS[1])}}]}]
    for name in NATIVE:
        assert _render(name, as_object).text == _render(name, [*QUESTION, call_message(PARIS)]).text, name


def test_a_template_that_refuses_the_conversation_is_a_clear_error() -> None:
    with pytest.raises(BackendError, match="chat template rejected"):
        render_tool_prompt("{{ raise_exception('no tools here') }}", QUESTION, AUTO)
    with pytest.raises(BackendError, match="must be a mapping"):
        render_tool_prompt(None, [{"content": "no role"}], AUTO)


def test_the_generic_tools_listing_is_the_openai_shape() -> None:
    text = render_tool_prompt(None, QUESTION, AUTO).text
    start = text.index("[", text.index("following tools"))
    listed = json.JSONDecoder().raw_decode(text[start:])[0]
    assert listed == [t.to_openai() for t in AUTO.tools]


def test_several_system_and_developer_messages_become_one_at_the_head() -> None:
    messages = [{"role": "system", "content": "Rule one."}, {"role": "user", "content": "Hi"},
                {"role": "developer", "content": "Rule two."}, {"role": "user", "content": "Weather?"}]
    text = _render("mistralai-Mistral-Nemo-Instruct-2407.jinja", messages).text  # its template takes one, first
    assert "[INST]Rule one.\n\nRule two.\n\nHi\n\nWeather?[/INST]" in text
    gemma = _render("google-gemma-3n-it.jinja", messages).text
    assert gemma.count("<start_of_turn>user") == 1 and "Rule one.\n\nRule two." in gemma
