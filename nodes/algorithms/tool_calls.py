"""Tool calls as plain data: their canonical form (BFCL's AST checker's notion of equal calls), a readable
`name(arg=value)` rendering, and the check of calls against their tools' JSON schemas and the request's choice.

Canonical equality, as BFCL's AST checker compares a call with a possible answer:
- the function's name, exactly;
- arguments by name (their order irrelevant); an optional argument given at its schema `default` equals the
  argument left out;
- numbers by value whatever their JSON type (`1` == `1.0`; booleans are never numbers);
- strings as BFCL's `standardize_string`: spaces and `,./-_*^` removed, lower-cased, `'` read as `"`;
- lists in order, element by element; objects key by key, order irrelevant;
- a set of parallel calls as a multiset: the order of the calls irrelevant.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from backends.tools.types import ToolAnswer, ToolCall, ToolRequest, parse_answer_json

NO_CALL = "(no call)"
"""The canonical answer of a candidate that answered text and made no call (a cluster of its own)."""
_STRIP = re.compile(r"[ ,./\-_*^]")

SCHEMA_TYPES = {"dict": "object", "float": "number", "tuple": "array", "double": "number", "bool": "boolean",
                "list": "array", "int": "integer", "str": "string"}
"""Type names some tool definitions use (BFCL's Python docs among them) for JSON schema's own."""


def standardize_string(text: str) -> str:
    """BFCL's string normalisation: spaces and `,./-_*^` removed, lower case, single quotes as double."""
    return _STRIP.sub("", text).lower().replace("'", '"')


def _schema_type(schema: Mapping[str, Any] | None) -> Any:
    t = schema.get("type") if isinstance(schema, Mapping) else None
    if isinstance(t, list):
        return [SCHEMA_TYPES.get(x, x) for x in t]
    return SCHEMA_TYPES.get(t, t) if isinstance(t, str) else None


def _number(value: float) -> int | float | str:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 63:
        return int(value)
    return value


def canonical_value(value: Any, schema: Mapping[str, Any] | None = None) -> Any:
    """A JSON value in its canonical form (see the module doc): what two equal arguments share."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return _number(value)
    if isinstance(value, str):
        return standardize_string(value)
    if isinstance(value, list | tuple):
        items = schema.get("items") if isinstance(schema, Mapping) else None
        return [canonical_value(v, items if isinstance(items, Mapping) else None) for v in value]
    if isinstance(value, Mapping):
        return canonical_arguments(value, schema)
    return str(value)


def canonical_arguments(arguments: Mapping[str, Any], schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Arguments canonical, sorted by name; an optional argument equal to its schema default left out."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    props = props if isinstance(props, Mapping) else {}
    required = schema.get("required") if isinstance(schema, Mapping) else None
    required = set(required) if isinstance(required, list) else set()
    out: dict[str, Any] = {}
    for key in sorted(arguments):
        sub = props.get(key) if isinstance(props.get(key), Mapping) else None
        value = canonical_value(arguments[key], sub)
        if sub is not None and key not in required and "default" in sub \
                and value == canonical_value(sub["default"], sub):
            continue
        out[key] = value
    return out


def canonical_call(call: ToolCall, request: ToolRequest | None = None) -> str:
    """One call's canonical key: its name and canonical arguments as sorted JSON."""
    tool = request.tool(call.name) if request is not None else None
    args = canonical_arguments(call.arguments, tool.parameters if tool is not None else None)
    return json.dumps([call.name, args], sort_keys=True, ensure_ascii=False)


def canonical_answer(answer: ToolAnswer, request: ToolRequest | None = None) -> str:
    """A whole answer's canonical key: its calls as a sorted multiset (parallel calls order-free), or NO_CALL."""
    if not answer.calls:
        return NO_CALL
    return json.dumps(sorted(canonical_call(c, request) for c in answer.calls), ensure_ascii=False)


def call_text(call: ToolCall) -> str:
    """`name(arg=value, ...)` with JSON values, arguments in the order given."""
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in call.arguments.items())
    return f"{call.name}({args})"


def answer_text(answer: ToolAnswer) -> str:
    """A tool answer as people read it: its calls as `name(args)` one a line, or its text when it made none."""
    if not answer.calls:
        return answer.content.strip() or NO_CALL
    return "\n".join(call_text(c) for c in answer.calls)


def readable(text: str) -> str:
    """A candidate's text for reading (a judge's prompt, a reward model, a trace): its calls as `name(args)` when
    it is a tool answer (answer_json), else the text as it is."""
    answer = parse_answer_json(text)
    return answer_text(answer) if answer is not None else text


def canonical_label(key: str) -> str:
    """A canonical key (canonical_answer) as `name(args)` lines, for vote clusters."""
    if key == NO_CALL:
        return key
    calls = [json.loads(k) for k in json.loads(key)]
    return "\n".join(call_text(ToolCall(name, args)) for name, args in calls)


# ------------------------------------------------------------------ schema checks


@dataclass(frozen=True)
class SchemaVerdict:
    ok: bool
    reason: str


def _type_matches(value: Any, t: str) -> bool:
    if t == "string":
        return isinstance(value, str)
    if t == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if t == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "array":
        return isinstance(value, list)
    if t == "object":
        return isinstance(value, dict)
    if t == "null":
        return value is None
    return True  # "any" or a type this check does not know: no constraint


def value_problem(value: Any, schema: Mapping[str, Any] | None, where: str) -> str | None:
    """Why `value` does not fit `schema` (type, enum, an object's required and unknown keys, array items,
    anyOf / oneOf alternatives), or None when it fits. Schemas it does not understand accept anything."""
    if not isinstance(schema, Mapping):
        return None
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(alternatives, list) and alternatives:
        problems = [value_problem(value, s, where) for s in alternatives]
        if all(p is not None for p in problems):
            return f"{where} fits none of its alternatives ({problems[0]})"
    t = _schema_type(schema)
    types = t if isinstance(t, list) else [t] if t else []
    if types and not any(_type_matches(value, x) for x in types):
        return f"{where} must be {' or '.join(types)}, got {json.dumps(value, ensure_ascii=False)[:60]}"
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and value not in enum:
        return f"{where} must be one of {json.dumps(enum, ensure_ascii=False)[:120]}, got " \
               f"{json.dumps(value, ensure_ascii=False)[:60]}"
    if isinstance(value, dict) and ("properties" in schema or "required" in schema):
        return object_problem(value, schema, where)
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            problem = value_problem(item, schema["items"], f"{where}[{i}]")
            if problem:
                return problem
    return None


def object_problem(value: Mapping[str, Any], schema: Mapping[str, Any], where: str) -> str | None:
    props = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    missing = [k for k in required if k not in value]
    if missing:
        return f"{where} lacks the required argument {missing[0]!r}"
    if schema.get("additionalProperties") is not True:
        unknown = [k for k in value if k not in props]
        if unknown:
            known = ", ".join(props) or "none"
            return f"{where} has the unknown argument {unknown[0]!r} (known: {known})"
    for key, sub in value.items():
        problem = value_problem(sub, props.get(key), f"{where}.{key}" if where else key)
        if problem:
            return problem
    return None


def check_call(call: ToolCall, request: ToolRequest) -> str | None:
    """Why one call is invalid against its tool's schema (unknown tool, missing / unknown / mistyped arguments),
    or None when it is valid."""
    tool = request.tool(call.name)
    if tool is None:
        names = ", ".join(t.name for t in request.tools) or "none"
        return f"{call.name}: no such tool (tools: {names})"
    return object_problem(call.arguments, tool.parameters, call.name)


def check_answer(answer: ToolAnswer, request: ToolRequest) -> SchemaVerdict:
    """Whether an answer's calls are valid against their tools' schemas and allowed by the request's choice
    (none: no calls; required: at least one; a named function: calls of it alone; parallel off: one call)."""
    choice = request.choice
    calls = answer.calls
    if choice.mode == "none" and calls:
        return SchemaVerdict(False, f"tool_choice none allows no calls; it made {len(calls)}")
    if choice.mode in ("required", "function") and not calls:
        wanted = f"a call of {choice.name}" if choice.mode == "function" else "at least one call"
        return SchemaVerdict(False, f"tool_choice {choice.mode} needs {wanted}; it answered text")
    if choice.mode == "function":
        other = next((c for c in calls if c.name != choice.name), None)
        if other is not None:
            return SchemaVerdict(False, f"tool_choice names {choice.name}; it called {other.name}")
    if not request.parallel and len(calls) > 1:
        return SchemaVerdict(False, f"parallel tool calls are off; it made {len(calls)} calls")
    for call in calls:
        problem = check_call(call, request)
        if problem:
            return SchemaVerdict(False, problem)
    if not calls:
        return SchemaVerdict(True, "text answer, no call (allowed by tool_choice " + choice.mode + ")")
    return SchemaVerdict(True, f"{len(calls)} valid call{'s' if len(calls) != 1 else ''}: " +
                         "; ".join(call_text(c) for c in calls)[:200])


def answers_of(texts: Sequence[str]) -> list[ToolAnswer | None]:
    """Each text's tool answer (None where the text is not answer_json)."""
    return [parse_answer_json(t) for t in texts]
