"""A model's output as text and tool calls, in each family's call format (Hermes / Qwen `<tool_call>`, Llama 3.x
JSON, Mistral `[TOOL_CALLS]`, FunctionGemma `<start_function_call>`, llama.cpp's generic JSON); a malformed call
is text, never an exception. The scanner here is shared with stream.py, so both read a text the same way."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from backends.tools.types import ToolAnswer, ToolCall, ToolRequest, new_call_id

WAIT = object()
"""A form that cannot be decided before more text arrives."""

MARKERS: dict[str, tuple[str, ...]] = {
    "hermes": ("<tool_call>",),
    "llama3": ("<|python_tag|>",),
    "mistral": ("[TOOL_CALLS]",),
    "gemma": ("<start_function_call>",),
    "generic": (),
}
"""The texts that open a call anywhere in an answer, per family."""
_END_MARKERS = {"<tool_call>": "</tool_call>", "<start_function_call>": "<end_function_call>"}
_FENCES = ("```json", "```")
_DROPPABLE = frozenset(" \t\r\n;")
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


@dataclass(frozen=True)
class TextItem:
    text: str


@dataclass(frozen=True)
class CallItem:
    call: ToolCall


Item = TextItem | CallItem


def json_end(text: str, start: int) -> int | None:
    """The index just past the JSON object or array opening at `start` (brackets balanced outside strings), the
    index just past the first bracket that does not match (a malformed value), or None when it is not closed yet."""
    return _JsonWalk(start).run(text)


class _JsonWalk:
    """json_end's walk, resumable: a stream's text only grows, so a value not closed yet is walked on from where the
    last call stopped (each character once, however many pieces arrive)."""

    def __init__(self, start: int) -> None:
        self.i = start
        self.stack: list[str] = []
        self.in_string = self.escaped = False

    def run(self, text: str) -> int | None:
        stack = self.stack
        in_string, escaped = self.in_string, self.escaped
        i, n = self.i, len(text)
        while i < n:
            c = text[i]
            i += 1
            if in_string:
                if escaped:
                    escaped = False
                elif c == "\\":
                    escaped = True
                elif c == '"':
                    in_string = False
            elif c == '"':
                in_string = True
            elif c == "{" or c == "[":
                stack.append("}" if c == "{" else "]")
            elif c == "}" or c == "]":
                if not stack or stack.pop() != c or not stack:
                    return i
            elif not stack:
                return i
        self.i, self.in_string, self.escaped = i, in_string, escaped
        return None


def _load(text: str) -> Any:
    try:
        return json.loads(text, strict=False)  # a raw newline in a string: what a model writes, JSON or not
    except (ValueError, RecursionError):
        return None


def _arguments(value: Any) -> dict[str, Any] | None:
    """A call's arguments as a dict (a JSON text of an object is decoded; missing means none)."""
    if value is None:
        return {}
    if isinstance(value, str):
        value = _load(value) if value.strip() else {}
    return dict(value) if isinstance(value, Mapping) else None


def call_from_object(obj: Any, arg_keys: tuple[str, ...] = ("arguments", "parameters")) -> ToolCall | None:
    """A ToolCall from `{"name": ..., "arguments": {...}}` (or `parameters`, an OpenAI-shaped `function` object, an
    optional `"type": "function"` and `id`); None when it is not one."""
    if not isinstance(obj, Mapping):
        return None
    if isinstance(obj.get("function"), Mapping) and "name" not in obj:
        inner = obj["function"]
        obj = {**inner, "id": obj.get("id", inner.get("id"))}
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    if obj.get("type", "function") != "function":
        return None
    raw = next((obj[k] for k in arg_keys if k in obj), None)
    args = _arguments(raw)
    if args is None:
        return None
    call_id = obj.get("id")
    return ToolCall(name.strip(), args, call_id if isinstance(call_id, str) and call_id else new_call_id())


# -- FunctionGemma's argument syntax: {key:<escape>text<escape>,n:5,flag:true,list:[...],obj:{...}} -------------

_ESCAPE = "<escape>"


class _FgError(ValueError):
    pass


def _fg_value(s: str, i: int) -> tuple[Any, int]:
    if s.startswith(_ESCAPE, i):
        j = s.find(_ESCAPE, i + len(_ESCAPE))
        if j < 0:
            raise _FgError("unclosed <escape>")
        return s[i + len(_ESCAPE):j], j + len(_ESCAPE)
    if i < len(s) and s[i] == "{":
        return _fg_object(s, i)
    if i < len(s) and s[i] == "[":
        out: list[Any] = []
        i += 1
        while i < len(s) and s[i] != "]":
            value, i = _fg_value(s, i)
            out.append(value)
            if i < len(s) and s[i] == ",":
                i += 1
        if i >= len(s):
            raise _FgError("unclosed [")
        return out, i + 1
    j = i
    while j < len(s) and s[j] not in ",}]":
        j += 1
    token = s[i:j].strip()
    if not token:
        raise _FgError("empty value")
    if token in ("true", "false", "null"):
        return {"true": True, "false": False, "null": None}[token], j
    try:
        return (int(token) if re.fullmatch(r"-?\d+", token) else float(token)), j
    except ValueError:
        return token, j


def _fg_object(s: str, i: int) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    i += 1
    while i < len(s) and s[i] != "}":
        if s.startswith(_ESCAPE, i):
            key, i = _fg_value(s, i)
        else:
            j = s.find(":", i)
            if j < 0:
                raise _FgError("a key without a value")
            key, i = s[i:j].strip(), j
        if i >= len(s) or s[i] != ":":
            raise _FgError("a key without ':'")
        value, i = _fg_value(s, i + 1)
        out[str(key)] = value
        if i < len(s) and s[i] == ",":
            i += 1
    if i >= len(s):
        raise _FgError("unclosed {")
    return out, i + 1


def gemma_call_end(text: str, start: int) -> int | None:
    """The index just past `call:NAME{...}` opening at `start` (braces balanced outside <escape> strings), or None
    while it is not closed (or not a call's shape)."""
    m = re.compile(r"call:[A-Za-z0-9_.\-]+\{").match(text, start)
    if m is None:
        return None if "{" not in text[start:] else start + 1
    depth, i = 0, m.end() - 1
    while i < len(text):
        if text.startswith(_ESCAPE, i):
            j = text.find(_ESCAPE, i + len(_ESCAPE))
            if j < 0:
                return None
            i = j + len(_ESCAPE)
            continue
        if text[i] in "{[":
            depth += 1
        elif text[i] in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def parse_gemma_call(body: str) -> ToolCall | None:
    """`call:NAME{args}` (what FunctionGemma writes between its call markers) as a ToolCall, or None."""
    m = re.match(r"\s*call:([A-Za-z0-9_.\-]+)", body)
    if not m:
        return None
    rest = body[m.end():].strip()
    if not rest:
        return ToolCall(m.group(1), {}, new_call_id())
    try:
        args, end = _fg_object(rest, 0) if rest.startswith("{") else (None, 0)
    except _FgError:
        return None
    if args is None or rest[end:].strip():
        return None
    return ToolCall(m.group(1), args, new_call_id())


def gemma_arguments_text(value: Any) -> str:
    """A value in FunctionGemma's argument syntax (strings between <escape> markers)."""
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{gemma_arguments_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(gemma_arguments_text(v) for v in value) + "]"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return json.dumps(value)
    return f"{_ESCAPE}{value}{_ESCAPE}"


# -- the scanner -----------------------------------------------------------------------------------------------

class Scanner:
    """Reads a growing text into items (text and calls), deciding only what more text cannot change: `scan` with
    final=False stops before anything undecided (a call not closed yet, a possible start of a marker)."""

    def __init__(self, family: str, request: ToolRequest) -> None:
        self.family = family if family in MARKERS else "generic"
        self.request = request
        self.markers = MARKERS[self.family]
        self.text_seen = False
        """Whether text other than whitespace was read: bare calls (no marker) count only at the answer's start."""
        self._walks: dict[int, _JsonWalk] = {}

    def _json_end(self, text: str, start: int) -> int | None:
        walk = self._walks.get(start)
        if walk is None:
            walk = self._walks[start] = _JsonWalk(start)
        end = walk.run(text)
        if end is not None:
            del self._walks[start]
        return end

    def scan(self, text: str, pos: int, final: bool) -> tuple[list[Item], int]:
        items: list[Item] = []
        n = len(text)
        while pos < n:
            if not self.text_seen:
                j = pos
                while j < n and text[j] in _DROPPABLE:
                    j += 1
                if j > pos:
                    items.append(TextItem(text[pos:j]))
                    pos = j
                    continue
                got = self._bare(text, pos, final)
                if got is WAIT:
                    return items, pos
                if got is not None:
                    found, pos = got
                    items.extend(found)
                    continue
            k, marker = self._next_marker(text, pos)
            if marker is None:
                end = n if final else n - self._held(text, pos)
                if end > pos:
                    self._text(items, text[pos:end])
                return items, end
            if k > pos:
                self._text(items, text[pos:k])
                pos = k
            got = self._marked(text, k, marker, final)
            if got is WAIT:
                return items, pos
            found, pos = got
            items.extend(found)
        return items, pos

    def _text(self, items: list[Item], text: str) -> None:
        if not self.text_seen and any(c not in _DROPPABLE for c in text):
            self.text_seen = True
        items.append(TextItem(text))

    def _next_marker(self, text: str, pos: int) -> tuple[int, str | None]:
        best, which = len(text), None
        for marker in self.markers:
            k = text.find(marker, pos)
            if 0 <= k < best:
                best, which = k, marker
        return best, which

    def _held(self, text: str, pos: int) -> int:
        """How many trailing characters might be the start of a marker."""
        longest = 0
        tail = text[pos:]
        for marker in self.markers:
            for size in range(min(len(marker) - 1, len(tail)), longest, -1):
                if marker.startswith(tail[-size:]):
                    longest = size
                    break
        return longest

    # -- forms --------------------------------------------------------------------------------------------

    def _bad(self, text: str, start: int, end: int) -> tuple[list[Item], int]:
        self.text_seen = True
        return [TextItem(text[start:end])], end

    def _bare(self, text: str, pos: int, final: bool) -> Any:
        """A call without a marker at the answer's start (JSON the family's models write bare), WAIT, or None."""
        c = text[pos]
        if self.family == "generic":
            return self._generic(text, pos, final)
        if self.family in ("hermes", "llama3") and c == "{":
            end = self._json_end(text, pos)
            if end is None:
                return None if final else WAIT
            call = call_from_object(_load(text[pos:end]))
            return ([CallItem(call)], end) if call is not None else None
        if self.family == "gemma" and c == "c":  # FunctionGemma's markers may be control tokens that render empty
            if not final and len(text) - pos < len("call:") and "call:".startswith(text[pos:]):
                return WAIT
            if not text.startswith("call:", pos):
                return None
            end = gemma_call_end(text, pos)
            if end is None:
                return None if final else WAIT
            call = parse_gemma_call(text[pos:end])
            return ([CallItem(call)], end) if call is not None else None
        if self.family == "mistral" and c == "[":  # [TOOL_CALLS] is a control token: its text may be empty
            end = self._json_end(text, pos)
            if end is None:
                return None if final else WAIT
            calls = self._call_list(_load(text[pos:end]))
            return ([CallItem(c) for c in calls], end) if calls else None
        return None

    def _generic(self, text: str, pos: int, final: bool) -> Any:
        fence = ""
        if text.startswith("`", pos):
            rest = text[pos:pos + 7]
            if not final and len(rest) < 7 and "```json".startswith(rest):
                return WAIT
            fence = next((f for f in _FENCES if rest.startswith(f)), "")
            if not fence:
                return None
            pos += len(fence)
            while pos < len(text) and text[pos] in " \t\r\n":
                pos += 1
            if pos >= len(text):
                return None if final else WAIT
        if text[pos] != "{":
            return None
        end = self._json_end(text, pos)
        if end is None:
            return None if final else WAIT
        obj = _load(text[pos:end])
        items: list[Item] = []
        if isinstance(obj, Mapping) and isinstance(obj.get("tool_calls"), list):
            calls = self._call_list(obj["tool_calls"])
            if not calls:
                return None
            items = [CallItem(c) for c in calls]
            if isinstance(obj.get("content"), str) and obj["content"].strip():
                items.insert(0, TextItem(obj["content"]))
        elif isinstance(obj, Mapping) and isinstance(obj.get("tool_call"), Mapping):
            call = call_from_object(obj["tool_call"])
            if call is None:
                return None
            items = [CallItem(call)]
        elif isinstance(obj, Mapping) and "response" in obj:
            response = obj["response"]
            items = [TextItem(response if isinstance(response, str) else json.dumps(response, indent=2))]
        else:
            return None
        if fence:
            j = end
            while j < len(text) and text[j] in " \t\r\n":
                j += 1
            if text.startswith("```", j):
                end = j + 3
            elif not final and "```".startswith(text[j:]):
                return WAIT
        if any(isinstance(i, TextItem) for i in items):
            self.text_seen = True
        return items, end

    def _call_list(self, value: Any) -> list[ToolCall]:
        if not isinstance(value, list) or not value:
            return []
        calls = [call_from_object(v) for v in value]
        return [] if any(c is None for c in calls) else [c for c in calls if c is not None]

    def _marked(self, text: str, k: int, marker: str, final: bool) -> Any:
        body_start = k + len(marker)
        end_marker = _END_MARKERS.get(marker)
        if end_marker is not None:
            j = text.find(end_marker, body_start)
            if j < 0:
                if not final:
                    return WAIT
                body, end = text[body_start:], len(text)
            else:
                body, end = text[body_start:j], j + len(end_marker)
            if marker == "<tool_call>":
                call = call_from_object(_load(body.strip()))
            else:
                call = parse_gemma_call(body)
            return ([CallItem(call)], end) if call is not None else self._bad(text, k, end)
        j = body_start
        while j < len(text) and text[j] in " \t\r\n":
            j += 1
        if j >= len(text):
            return WAIT if not final else self._bad(text, k, len(text))
        if marker == "[TOOL_CALLS]" and text[j] != "[":
            return self._mistral_named(text, k, j, final)
        if text[j] not in "[{":
            return self._bad(text, k, j)
        end = self._json_end(text, j)
        if end is None:
            return WAIT if not final else self._bad(text, k, len(text))
        value = _load(text[j:end])
        if marker == "[TOOL_CALLS]":
            calls = self._call_list(value)
        else:
            call = call_from_object(value)
            calls = [call] if call is not None else []
        return ([CallItem(c) for c in calls], end) if calls else self._bad(text, k, end)

    def _mistral_named(self, text: str, k: int, j: int, final: bool) -> Any:
        """Mistral's newer form: `[TOOL_CALLS]name[ARGS]{...}` (one call per marker)."""
        m = _NAME.match(text, j)
        if m is None:
            return self._bad(text, k, j)
        after = m.end()
        tag = "[ARGS]"
        if not text.startswith(tag, after):
            if not final and tag.startswith(text[after:after + len(tag)]) and len(text) - after < len(tag):
                return WAIT
            return self._bad(text, k, after)
        start = after + len(tag)
        if start >= len(text):
            return WAIT if not final else self._bad(text, k, len(text))
        if text[start] != "{":
            return self._bad(text, k, start)
        end = self._json_end(text, start)
        if end is None:
            return WAIT if not final else self._bad(text, k, len(text))
        args = _arguments(_load(text[start:end]))
        if args is None:
            return self._bad(text, k, end)
        return [CallItem(ToolCall(m.group(0), args, new_call_id()))], end


def content_of(items: list[Item]) -> str:
    """The answer's text: the text items in order, without the whitespace (and `;` separators) around and between
    calls."""
    parts: list[str] = []
    segment: list[str] = []
    seen_call = False
    for item in items:
        if isinstance(item, TextItem):
            segment.append(item.text)
            continue
        text = "".join(segment)
        if not (seen_call and all(c in _DROPPABLE for c in text)):
            parts.append(text)
        segment = []
        seen_call = True
    text = "".join(segment)
    if not (seen_call and all(c in _DROPPABLE for c in text)):
        parts.append(text)
    return "".join(parts).strip()


def answer_of(items: list[Item]) -> ToolAnswer:
    return ToolAnswer(content_of(items), tuple(i.call for i in items if isinstance(i, CallItem)))


def parse_tool_calls(text: str, family: str, request: ToolRequest) -> ToolAnswer:
    """The text and calls of a whole answer in `family`'s format (see render.detect_family). A request whose tools
    take no part (none given, or tool_choice none) gets its text back as it is; every call has an id (the model's,
    else a new one)."""
    if not request.active:
        return ToolAnswer(text)
    items, _ = Scanner(family, request).scan(text, 0, final=True)
    return answer_of(items)
