"""Decoding and prompt params shared by the generating kinds, and their translation to SamplingParams."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from backends.base import MAX_STOP_CHARS, MAX_STOP_STRINGS, ChatMessage, Prompt, SamplingParams
from backends.grammar.grammar_check import GRAMMAR_HINT, SCHEMA_HINT, grammar_problem, schema_problem
from nodes.base import Param, format_value, render_template, template_variables


def prompt_params(prompt_default: str = "", *, required: bool = True, name: str = "prompt",
                  description: str = "Prompt template; {name} fills in the input wired as `name`") -> tuple[Param, ...]:
    """The prompt template, the optional system prompt and the chat/raw mode."""
    return (
        Param(name, "text", prompt_default, description, required=required),
        Param("system", "text", "", "Optional system message (chat mode); may use {variables} too"),
        Param("mode", "choice", "chat", "chat: messages through the model's chat template; raw: plain completion",
              choices=("chat", "raw")),
    )


def decoding_params(*, temperature: float = 0.0, max_tokens: int = 128, logprobs: bool = False,
                    stop: Iterable[str] = ()) -> tuple[Param, ...]:
    """Sampling knobs with the given defaults (greedy unless a temperature is given)."""
    return (
        Param("max_tokens", "int", max_tokens, "Most tokens to generate per completion", min=1, max=8192),
        Param("temperature", "float", temperature, "0 = greedy; higher = more diverse samples", min=0.0, max=5.0),
        Param("top_k", "int", 40, "Sample only among the k most likely tokens (0 = all)", min=0, max=1000),
        Param("top_p", "float", 1.0, "Nucleus sampling: smallest token set with this much probability",
              min=0.0, max=1.0),
        Param("min_p", "float", 0.0, "Drop tokens less likely than min_p x the top token", min=0.0, max=1.0),
        Param("typical_p", "float", 1.0, "Locally typical sampling (1 = off)", min=0.0, max=1.0),
        Param("repeat_penalty", "float", 1.0, "Penalty for repeating recent tokens (1 = off)", min=0.5, max=2.0),
        Param("stop", "list", list(stop), "Stop strings: generation ends before any of them",
              max_items=MAX_STOP_STRINGS, max_chars=MAX_STOP_CHARS),
        Param("grammar", "str", "", "Optional GBNF grammar constraining the output"),
        Param("json_schema", "json", "", "Optional JSON schema constraining the output (JSON text or mapping)"),
        Param("logprobs", "bool", logprobs, "Record each chosen token's log-probability in the trace"),
    )


DECODING_KEYS = ("max_tokens", "temperature", "top_k", "top_p", "min_p", "typical_p", "repeat_penalty",
                 "stop", "grammar", "json_schema", "logprobs")


def sampling_params(params: Mapping[str, Any], seed: int, **overrides: Any) -> SamplingParams:
    """SamplingParams from resolved node params (missing keys take SamplingParams' defaults)."""
    values: dict[str, Any] = {k: params[k] for k in DECODING_KEYS if k in params}
    values.update(overrides)
    stop = values.get("stop") or ()
    if isinstance(stop, str):
        stop = (stop,)
    schema = values.get("json_schema")
    if isinstance(schema, dict | list):
        schema = json.dumps(schema)
    defaults = SamplingParams()
    # the casts stay at the backend's door: typed params pass through them unchanged, but a null (None)
    # value, which validation lets an optional param have, must fail here rather than in the engine
    return SamplingParams(
        max_tokens=int(values.get("max_tokens", defaults.max_tokens)),
        temperature=float(values.get("temperature", defaults.temperature)),
        top_k=int(values.get("top_k", defaults.top_k)),
        top_p=float(values.get("top_p", defaults.top_p)),
        min_p=float(values.get("min_p", defaults.min_p)),
        typical_p=float(values.get("typical_p", defaults.typical_p)),
        repeat_penalty=float(values.get("repeat_penalty", defaults.repeat_penalty)),
        stop=tuple(s for s in stop if s),
        seed=int(seed),
        grammar=values.get("grammar") or None,
        json_schema=schema or None,
        logprobs=0 if values.get("logprobs") else None,
    )


def decoding_problems(params: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Cross-param checks: a grammar and a JSON schema at once, a schema that is not JSON."""
    out: list[tuple[str, str]] = []
    schema = params.get("json_schema")
    if params.get("grammar") and schema:
        out.append(("json_schema", "set either grammar or json_schema, not both"))
    if isinstance(schema, str) and schema.strip():
        try:
            json.loads(schema)
        except json.JSONDecodeError as exc:
            out.append(("json_schema", f"is not valid JSON: {exc.msg} (line {exc.lineno})"))
    elif schema not in ("", None) and not isinstance(schema, dict):
        out.append(("json_schema", "must be a JSON schema object"))
    return out


def grammar_problems(params: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(param, message, hint) for a `grammar` or `json_schema` llama.cpp must not see: bad GBNF, no root, an
    undefined rule, or over a size/nesting/repetition limit (validation reports them as `bad_grammar`).
    Values of the wrong type and schemas that are not JSON are left to the param and decoding checks."""
    out: list[tuple[str, str, str]] = []
    grammar = params.get("grammar")
    if isinstance(grammar, str) and grammar:
        problem = grammar_problem(grammar)
        if problem is not None:
            where = f"line {problem.line} of the grammar: " if problem.line else ""
            out.append(("grammar", where + problem.message, GRAMMAR_HINT))
    schema = params.get("json_schema")
    text: str | None = None
    if isinstance(schema, dict | list):
        try:
            text = json.dumps(schema)
        except (TypeError, ValueError, RecursionError) as exc:  # a YAML date, a cycle, too deep
            out.append(("json_schema", f"the JSON schema cannot be written as JSON: {exc}", SCHEMA_HINT))
    elif isinstance(schema, str) and schema.strip():
        try:
            json.loads(schema)
            text = schema
        except (json.JSONDecodeError, RecursionError):
            text = None  # decoding_problems reports it
    if text is not None:
        problem = schema_problem(text)
        if problem is not None:
            out.append(("json_schema", str(problem), SCHEMA_HINT))
    return out


def template_values(inputs: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Values for {variables}: the node's inputs (candidate sets stay sets; render_template formats
    them as a numbered list) plus per-call extras such as {candidate} or {draft}."""
    values = dict(inputs)
    if extra:
        values.update(extra)
    return values


def render(template: str, values: Mapping[str, Any]) -> str:
    """render_template with a clear error naming the missing variable."""
    missing = [v for v in template_variables(template) if v not in values]
    if missing:
        from nodes.base import NodeError

        raise NodeError(f"the prompt uses {{{missing[0]}}} but no input named {missing[0]!r} is connected; "
                        f"wire an input called {missing[0]!r} or remove it from the template")
    return render_template(template, dict(values))


def is_raw(params: Mapping[str, Any]) -> bool:
    """Raw mode: the prompt is text the model continues (no chat template), its completion kept verbatim."""
    return params.get("mode") == "raw"


ECHO_PARAM = Param("echo", "bool", False, "Raw mode: each candidate is the prompt followed by its completion "
                   "(a base model completing a function body: the candidate is the whole program, as HumanEval "
                   "grades prompt + completion)", show_if=("mode", ("raw",)))


def completion_text(params: Mapping[str, Any], prompt: Prompt) -> dict[str, Any]:
    """How a completion becomes a candidate's text (candidate_from's keywords): stripped in chat mode; verbatim in
    raw mode, after the prompt itself when `echo` is on."""
    raw = is_raw(params)
    return {"verbatim": raw, "prefix": prompt if raw and params.get("echo") and isinstance(prompt, str) else ""}


def build_prompt(params: Mapping[str, Any], values: Mapping[str, Any], template_key: str = "prompt") -> Prompt:
    """Chat messages (system + user) or a raw prompt string from the node's templates."""
    user = render(params[template_key] or "", values)
    system = render(params["system"] or "", values)
    if is_raw(params):
        return f"{system}\n\n{user}" if system else user
    messages: list[ChatMessage] = []
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": user})
    return messages


def as_text(value: Any) -> str:
    """A port value as prompt text."""
    return value if isinstance(value, str) else format_value(value)
