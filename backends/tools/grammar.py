"""GBNF grammars that let a model sample only valid tool calls in its family's format (built from the tools' JSON
schemas), for tool_choice required, a named function, and auto when a tool is `strict` (text, or valid calls)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from backends.grammar.json_strings import schema_converter
from backends.tools.types import ToolRequest, ToolSpec

_GENERIC = "generic"
_MARKERS = {"hermes": "<tool_call>", "llama3": "<|python_tag|>", "mistral": "[TOOL_CALLS]",
            "gemma": "<start_function_call>"}
"""The marker a text answer must not contain (it would open a call the grammar did not check)."""
_PROSE_FIRST_EXCLUDED = {"hermes": "{ \t\r\n", "llama3": "{ \t\r\n;", "mistral": "[ \t\r\n", "gemma": " \t\r\n",
                         _GENERIC: ""}
"""Characters a text answer may not begin with: parse.py reads a bare call (no marker) at the answer's start."""


def literal(text: str) -> str:
    """A GBNF string literal matching `text` exactly."""
    out = []
    for c in text:
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _class_char(c: str) -> str:
    if c.isascii() and c.isalnum():
        return c
    code = ord(c)
    return f"\\x{code:02X}" if code < 0x100 else f"\\u{code:04X}" if code < 0x10000 else f"\\U{code:08X}"


def char_class(chars: str, negated: bool = True) -> str:
    return "[" + ("^" if negated else "") + "".join(_class_char(c) for c in sorted(set(chars))) + "]"


def _kmp_next(marker: str) -> list[dict[str, int]]:
    """For each matched prefix length of `marker`, where each of its characters leads (other characters lead to 0)."""
    fail = [0] * len(marker)
    k = 0
    for i in range(1, len(marker)):
        while k and marker[i] != marker[k]:
            k = fail[k - 1]
        if marker[i] == marker[k]:
            k += 1
        fail[i] = k
    table: list[dict[str, int]] = []
    for state in range(len(marker)):
        row = {}
        for c in set(marker):
            s = state
            while s and marker[s] != c:
                s = fail[s - 1]
            row[c] = s + 1 if marker[s] == c else 0
        table.append(row)
    return table


def text_without(rules: dict[str, str], name: str, marker: str, first_excluded: str = "") -> str:
    """Rules for any text (empty too) that never contains `marker` and does not begin with one of
    `first_excluded`; returns the start rule's name. Every state may end; each character leads to one state."""
    table = _kmp_next(marker)
    for state, row in enumerate(table):
        alts = [f"{char_class(''.join(c for c, s in row.items() if s != 0))} {name}-0"]
        alts += [f"{literal(c)} {name}-{s}" for c, s in sorted(row.items()) if 0 < s < len(marker)]
        rules[f"{name}-{state}"] = "( " + " | ".join(alts) + " )?"
    if not first_excluded:
        return f"{name}-0"
    row = table[0]
    first = [f"{char_class(first_excluded + ''.join(c for c, s in row.items() if s != 0))} {name}-0"]
    first += [f"{literal(c)} {name}-{s}" for c, s in sorted(row.items())
              if 0 < s < len(marker) and c not in first_excluded]
    rules[f"{name}-start"] = " | ".join(first)
    return f"{name}-start"


# -- FunctionGemma's argument syntax (strings between <escape> markers, keys bare) ----------------------------

class _GemmaArgs:
    """Rules for FunctionGemma's argument syntax from a JSON schema (the subset tools use; anything else any
    value)."""

    def __init__(self, rules: dict[str, str]) -> None:
        self.rules = rules
        rules["fg-string"] = '"<escape>" [^<]* "<escape>"'
        rules["fg-number"] = '"-"? [0-9]+ ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?'
        rules["fg-integer"] = '"-"? [0-9]+'
        rules["fg-boolean"] = '"true" | "false"'
        rules["fg-any"] = ('fg-string | fg-number | fg-boolean | "null" | "[" ( fg-any ( "," fg-any )* )? "]" '
                           '| "{" ( fg-key ":" fg-any ( "," fg-key ":" fg-any )* )? "}"')
        rules["fg-key"] = "[A-Za-z_] [A-Za-z0-9_\\-]*"

    def value(self, schema: Any, name: str) -> str:
        if not isinstance(schema, Mapping):
            return "fg-any"
        if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
            return self._add(name, " | ".join(self._const(v) for v in schema["enum"]))
        if "const" in schema:
            return self._add(name, self._const(schema["const"]))
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                return self._add(name, " | ".join(self.value(s, f"{name}-{i}") for i, s in enumerate(schema[key])))
        kind = schema.get("type")
        if isinstance(kind, list):
            options = [{**schema, "type": k} for k in kind]
            return self._add(name, " | ".join(self.value(s, f"{name}-{i}") for i, s in enumerate(options)))
        if kind == "string":
            return "fg-string"
        if kind in ("number", "integer", "boolean"):
            return f"fg-{kind}"
        if kind == "null":
            return '"null"'
        if kind == "array":
            item = self.value(schema.get("items"), f"{name}-item")
            return self._add(name, f'"[" ( {item} ( "," {item} )* )? "]"')
        if kind == "object" or "properties" in schema:
            return self.object(schema, name)
        return "fg-any"

    def object(self, schema: Mapping[str, Any], name: str) -> str:
        props = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
        if not props:
            return self._add(name, '"{" "}"') if schema.get("additionalProperties") is False else \
                self._add(name, '"{" ( fg-key ":" fg-any ( "," fg-key ":" fg-any )* )? "}"')
        required = [k for k in props if k in (schema.get("required") or [])]
        optional = [k for k in props if k not in required]
        kv = {k: f"{literal(k + ':')} {self.value(props[k], f'{name}-{_rule_name(k)}')}" for k in props}
        rest = " ".join(f'( "," {kv[k]} )?' for k in optional)
        if required:
            body = ' "," '.join(kv[k] for k in required) + (" " + rest if rest else "")
        else:
            firsts = [kv[k] + "".join(f' ( "," {kv[o]} )?' for o in optional[i + 1:])
                      for i, k in enumerate(optional)]
            body = "( " + " | ".join(firsts) + " )?"
        return self._add(name, f'"{{" {body} "}}"')

    def _const(self, value: Any) -> str:
        if isinstance(value, str):
            return literal(f"<escape>{value}<escape>")
        return literal(json.dumps(value))

    def _add(self, name: str, rule: str) -> str:
        self.rules[name] = rule
        return name


def _rule_name(text: str) -> str:
    out = "".join(c if c.isascii() and (c.isalnum() or c == "-") else "-" for c in text)
    return out or "x"


# -- the grammars ---------------------------------------------------------------------------------------------

SMALL_INT_RANGE = 64
"""An integer whose minimum and maximum are at most this far apart is written as the list of its values (the
converter leaves integer bounds out)."""


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def bounded(schema: Any) -> Any:
    """The schema with small integer ranges as enums, so the grammar keeps to them (everything else as given)."""
    if isinstance(schema, list):
        return [bounded(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {k: bounded(v) for k, v in schema.items()}
    if out.get("type") == "integer" and "enum" not in out:
        low, high = _number(out.get("minimum")), _number(out.get("maximum"))
        if _number(out.get("exclusiveMinimum")) is not None:
            low = math.floor(_number(out["exclusiveMinimum"])) + 1  # type: ignore[arg-type]
        if _number(out.get("exclusiveMaximum")) is not None:
            high = math.ceil(_number(out["exclusiveMaximum"])) - 1  # type: ignore[arg-type]
        if low is not None and high is not None and 0 <= high - low <= SMALL_INT_RANGE:
            values = list(range(math.ceil(low), math.floor(high) + 1))
            if values:
                out = {k: v for k, v in out.items()
                       if k not in ("type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")}
                out["enum"] = values
    return out


def _chosen_tools(request: ToolRequest) -> tuple[ToolSpec, ...]:
    if request.choice.mode == "function":
        tool = request.tool(request.choice.name or "")
        if tool is None:
            names = ", ".join(t.name for t in request.tools) or "none"
            raise ValueError(f"tool_choice names the function {request.choice.name!r}, which is not among the "
                             f"request's tools ({names}); name one of them.")
        return (tool,)
    return request.tools


def tool_call_grammar(request: ToolRequest, family: str) -> str | None:
    """The GBNF grammar constraining an answer in `family`'s format (render.detect_family / RenderedPrompt.family):
    tool_choice required -> one or more valid calls (one only when not `parallel`), a named function -> a call of
    it, auto with a `strict` tool -> a text answer or valid calls; None when nothing is constrained."""
    if not request.tools or request.choice.mode == "none":
        return None
    mode = request.choice.mode
    if mode == "auto" and not any(t.strict for t in request.tools):
        return None
    tools = _chosen_tools(request)
    converter = schema_converter()  # the JSON-schema converter llama.cpp's server uses, its strings strict
    rules: dict[str, str] = {}
    family = family if family in _MARKERS or family == _GENERIC else _GENERIC
    gemma = _GemmaArgs(rules) if family == "gemma" else None
    calls = []
    for i, tool in enumerate(tools):
        base = f"tool{i}-{_rule_name(tool.name)}"
        if gemma is not None:
            args = gemma.object(bounded(dict(tool.parameters)), f"{base}-args")
            rules[f"{base}-call"] = f'{literal("<start_function_call>call:" + tool.name)} {args} ' \
                                    f'"<end_function_call>"'
        else:
            schema = converter.resolve_refs(bounded(json.loads(json.dumps(dict(tool.parameters)))), base)
            args = converter.visit(schema, f"{base}-args")
            rules[f"{base}-call"] = _json_call(family, tool.name, args)
        calls.append(f"{base}-call")
    rules["call"] = " | ".join(calls)
    many = request.parallel
    if family == _GENERIC:
        items = 'call ( "," space call )*' if many else "call"
        rules["calls"] = f'"{{" space "\\"tool_calls\\"" space ":" space "[" space {items} "]" space "}}" space'
        if mode == "auto":
            response = converter.visit({"type": "string"}, "response-string")
            rules["reply"] = f'"{{" space "\\"response\\"" space ":" space {response} "}}" space'
            rules["root"] = "calls | reply"
        else:
            rules["root"] = "calls"
    else:
        sep = {"hermes": '"\\n"', "llama3": '";" space', "mistral": '"," space', "gemma": '""'}[family]
        items = f"call ( {sep} call )*" if many else "call"
        if family == "mistral":
            rules["calls"] = f'"[TOOL_CALLS]" "[" {items} "]"'
        else:
            rules["calls"] = items
        if mode == "auto":
            prose = text_without(rules, "prose", _MARKERS[family], _PROSE_FIRST_EXCLUDED[family])
            rules["root"] = f"calls | {prose}" if family == "llama3" else f"calls | {prose} calls?"
        else:
            rules["root"] = "calls"
    merged = dict(converter._rules)  # the converter's value rules (space, string, number...) beside ours
    merged.update(rules)
    return "\n".join(f"{name} ::= {rule}" for name, rule in merged.items() if name != "root") + \
        f"\nroot ::= {merged['root']}\n"


def _json_call(family: str, name: str, args_rule: str) -> str:
    """One call of `name` as the JSON object the family writes."""
    key = "parameters" if family == "llama3" else "arguments"
    head = f'"{{" space "\\"name\\"" space ":" space {literal(json.dumps(name))} space "," space ' \
           f'{literal(json.dumps(key))} space ":" space {args_rule}'
    if family == "hermes":
        return f'"<tool_call>\\n" {head} "}}" "\\n</tool_call>"'
    if family == "mistral":
        return f'{head} ( "," space "\\"id\\"" space ":" space "\\"" [a-zA-Z0-9]{{9}} "\\"" space )? "}}" space'
    return f'{head} "}}" space'

