"""The tools, conversations and golden model outputs the tool-calling tests share: outputs rendered by each family's
own chat template (an assistant turn holding calls, as the model was trained to write it) and hand-written ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backends.tools.render import render_tool_prompt
from backends.tools.types import ToolChoice, ToolRequest, ToolSpec

TEMPLATES = Path(__file__).resolve().parents[2] / "fixtures" / "chat_templates"

WEATHER = ToolSpec("get_weather", "The weather of a city", {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "The city"},
                   "days": {"type": "integer", "minimum": 1, "maximum": 7},
                   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "days"], "additionalProperties": False})
SEARCH = ToolSpec("search_web", "Search the web", {
    "type": "object", "properties": {"query": {"type": "string"}, "safe": {"type": "boolean"}},
    "required": ["query"]})
TOOLS = (WEATHER, SEARCH)
AUTO = ToolRequest(TOOLS)
REQUIRED = ToolRequest(TOOLS, ToolChoice("required"))

FAMILY_TEMPLATES = {
    "Qwen-Qwen2.5-7B-Instruct.jinja": "hermes",
    "Qwen-Qwen3-0.6B.jinja": "hermes",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": "hermes",
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama3",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "mistral",
    "functiongemma-vllm-example.jinja": "gemma",
    "google-gemma-3n-it.jinja": "gemma",
    "google-gemma-2-2b-it.jinja": "gemma",
    "microsoft-Phi-3.5-mini-instruct.jinja": "generic",
}
NATIVE = {name: fam for name, fam in FAMILY_TEMPLATES.items()
          if name not in ("google-gemma-3n-it.jinja", "google-gemma-2-2b-it.jinja",
                          "microsoft-Phi-3.5-mini-instruct.jinja")}
"""The templates that render tools themselves (the others get the generic form)."""
BOS_EOS = {"hermes": ("", "<|im_end|>"), "llama3": ("<|begin_of_text|>", "<|eot_id|>"), "mistral": ("<s>", "</s>"),
           "gemma": ("<bos>", "<eos>"), "generic": ("<s>", "</s>")}
_TURN_ENDS = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>", "<end_of_turn>", "<|end|>")


def template(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


def call_message(*calls: tuple[str, dict[str, Any]], content: str | None = None) -> dict[str, Any]:
    import json

    return {"role": "assistant", "content": content, "tool_calls": [
        {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, (n, a) in enumerate(calls)]}


QUESTION = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is the weather in Paris for 3 days?"}]


def template_output(name: str, *calls: tuple[str, dict[str, Any]]) -> str:
    """What the model writes for these calls, as its own template renders an assistant turn holding them (the text
    after the generation prompt, without the end-of-turn token)."""
    family = FAMILY_TEMPLATES[name]
    bos, eos = BOS_EOS[family]
    text = template(name)
    prefix = render_tool_prompt(text, QUESTION, AUTO, bos_token=bos, eos_token=eos).text
    full = render_tool_prompt(text, [*QUESTION, call_message(*calls)], AUTO, bos_token=bos, eos_token=eos,
                              add_generation_prompt=False).text
    if family == "mistral":  # its template puts the system text into the last user turn only
        out = full[full.rindex("[/INST]") + len("[/INST]"):]
    else:
        assert full.startswith(prefix), (prefix[-200:], full[-300:])
        out = full[len(prefix):]
    out = out.rstrip("\n")
    for end in _TURN_ENDS:
        if out.endswith(end):
            out = out[: -len(end)]
    return out.rstrip("\n")


PARIS = ("get_weather", {"city": "Paris", "days": 3})
ROME = ("search_web", {"query": "Rome hotels"})

HAND_OUTPUTS: dict[str, list[tuple[str, str, list[tuple[str, dict[str, Any]]]]]] = {
    # family -> (model output, expected content, expected calls)
    "hermes": [
        ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>', "", [PARIS]),
        ('Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>\n'
         '<tool_call>\n{"name": "search_web", "arguments": {"query": "Rome hotels"}}\n</tool_call>',
         "Let me look.", [PARIS, ROME]),
        ('<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": '
         '{"city": "Paris", "days": 3}}\n</tool_call>', "<think>\nThe user wants weather.\n</think>", [PARIS]),
        ('{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}', "", [PARIS]),
        ('<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\", \\"days\\": 3}"}\n</tool_call>',
         "", [PARIS]),
        ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}', "", [PARIS]),
        ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par\n</tool_call> sorry',
         '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par\n</tool_call> sorry', []),
        ("It is 18 °C in Paris; 1 < 2 and <b>bold</b>.", "It is 18 °C in Paris; 1 < 2 and <b>bold</b>.", []),
        ('Use {"name": "x"} as a template.', 'Use {"name": "x"} as a template.', []),
    ],
    "llama3": [
        ('{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}', "", [PARIS]),
        ('<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}', "", [PARIS]),
        ('{"type": "function", "name": "get_weather", "parameters": {"city": "Paris", "days": 3}}; '
         '{"name": "search_web", "parameters": {"query": "Rome hotels"}}', "", [PARIS, ROME]),
        ('Sure! {"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}',
         'Sure! {"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}', []),
        ('{"name": "get_weather", "parameters": {"city": "Paris", "days": ', '{"name": "get_weather", '
         '"parameters": {"city": "Paris", "days":', []),
        ("The weather in Paris is mild.", "The weather in Paris is mild.", []),
    ],
    "mistral": [
        ('[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}, "id": "a1b2c3d4e"}]', "",
         [PARIS]),
        ('[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}, {"name": "search_web", "arguments": '
         '{"query": "Rome hotels"}}]', "", [PARIS, ROME]),
        ('Checking. [TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 3}', "Checking.", [PARIS]),
        ('[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": Paris}}]',
         '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": Paris}}]', []),
        ("[1] is a citation.", "[1] is a citation.", []),
    ],
    "gemma": [
        ("<start_function_call>call:get_weather{city:<escape>Paris<escape>,days:3}<end_function_call>", "", [PARIS]),
        ("Sure.<start_function_call>call:get_weather{city:<escape>Paris<escape>,days:3}<end_function_call>"
         "<start_function_call>call:search_web{query:<escape>Rome hotels<escape>}<end_function_call>", "Sure.",
         [PARIS, ROME]),
        ("<start_function_call>call:search_web{query:<escape>a, b {c}: d<escape>,safe:true}<end_function_call>", "",
         [("search_web", {"query": "a, b {c}: d", "safe": True})]),
        ("<start_function_call>call:get_weather{city:<escape>Paris<end_function_call>",
         "<start_function_call>call:get_weather{city:<escape>Paris<end_function_call>", []),
        # the call markers as control tokens the engine renders as nothing
        ("call:get_weather{city:<escape>Paris {1}<escape>,days:3}call:search_web{query:<escape>Rome hotels<escape>}",
         "", [("get_weather", {"city": "Paris {1}", "days": 3}), ROME]),
        ("call:get_weather{city:<escape>Paris", "call:get_weather{city:<escape>Paris", []),
        ("calling you later", "calling you later", []),
    ],
    "generic": [
        ('{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]}', "", [PARIS]),
        ('{\n  "tool_calls": [\n    {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}, "id": "c1"},\n'
         '    {"name": "search_web", "arguments": {"query": "Rome hotels"}}\n  ]\n}', "", [PARIS, ROME]),
        ('{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}', "", [PARIS]),
        ('```json\n{"response": "It is sunny in Paris."}\n```', "It is sunny in Paris.", []),
        ('{"response": "It is sunny in Paris."}', "It is sunny in Paris.", []),
        ('{"tool_calls": [{"name": "get_weather", "arguments": 3}]}',
         '{"tool_calls": [{"name": "get_weather", "arguments": 3}]}', []),
        ("It is sunny.", "It is sunny.", []),
        ('{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Pa',
         '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Pa', []),
    ],
}


def template_outputs() -> list[tuple[str, str, str, list[tuple[str, dict[str, Any]]]]]:
    """(template, family, output, calls) for each native template: one call, and two where it renders both."""
    out = []
    for name, family in NATIVE.items():
        if family == "gemma":  # its template writes every value as an <escape> string
            single = [("search_web", {"query": "Rome hotels"})]
            double = [*single, ("get_weather", {"city": "Paris"})]
        else:
            single, double = [PARIS], [PARIS, ROME]
        out.append((name, family, template_output(name, *single), single))
        if family != "llama3":  # Llama 3.1-3.3's templates hold one call per turn
            out.append((name, family, template_output(name, *double), double))
    return out
