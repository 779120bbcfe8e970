"""Tool calls read from a streamed answer piece by piece: text as it comes (minus whatever could still be the start of
a call), each call once it is whole (start, its arguments' JSON, end), with the same reading as parse.py."""

from __future__ import annotations

from dataclasses import dataclass

from backends.tools.parse import CallItem, Item, Scanner, TextItem, answer_of, content_of
from backends.tools.types import ToolAnswer, ToolCall, ToolRequest


@dataclass(frozen=True)
class TextDelta:
    """More of the answer's text (the deltas joined are the answer's `content`)."""

    text: str


@dataclass(frozen=True)
class CallStart:
    """Call number `index` (from 0) begins: its id and the function's name."""

    index: int
    id: str
    name: str


@dataclass(frozen=True)
class ArgsDelta:
    """More of call `index`'s arguments as JSON text (joined: a JSON text equal to the call's arguments)."""

    index: int
    text: str


@dataclass(frozen=True)
class CallEnd:
    """Call `index` is complete."""

    index: int
    call: ToolCall


StreamEvent = TextDelta | CallStart | ArgsDelta | CallEnd


class ToolStreamParser:
    """Feed the pieces of an answer as they are decoded; `close()` at its end; `answer()` is then what
    `parse_tool_calls` reads from the whole text (the same calls, with the ids the events gave them)."""

    def __init__(self, family: str, request: ToolRequest) -> None:
        self._active = request.active
        self._scanner = Scanner(family, request)
        self._text = ""
        self._pos = 0
        self._items: list[Item] = []
        self._emitted = 0
        self._calls = 0
        self._closed = False

    def feed(self, piece: str) -> list[StreamEvent]:
        if self._closed:
            raise ValueError("ToolStreamParser.feed after close(): start a new parser for a new answer.")
        if not piece:
            return []
        self._text += piece
        if not self._active:
            return [TextDelta(piece)]
        items, self._pos = self._scanner.scan(self._text, self._pos, final=False)
        return self._events(items)

    def close(self) -> list[StreamEvent]:
        if self._closed:
            return []
        self._closed = True
        if not self._active:
            return []
        items, self._pos = self._scanner.scan(self._text, self._pos, final=True)
        return self._events(items)

    def answer(self) -> ToolAnswer:
        if not self._active:
            return ToolAnswer(self._text)
        return answer_of(self._items)

    @property
    def text(self) -> str:
        """Everything fed so far, as the model wrote it."""
        return self._text

    def _events(self, items: list[Item]) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for item in items:
            if isinstance(item, TextItem):
                if self._items and isinstance(self._items[-1], TextItem):
                    self._items[-1] = TextItem(self._items[-1].text + item.text)
                else:
                    self._items.append(item)
                continue
            self._text_delta(events)
            self._items.append(item)
            call = item.call if isinstance(item, CallItem) else None
            if call is None:
                continue
            index = self._calls
            self._calls += 1
            events.append(CallStart(index, call.id, call.name))
            events.append(ArgsDelta(index, call.arguments_json()))
            events.append(CallEnd(index, call))
        self._text_delta(events)
        return events

    def _text_delta(self, events: list[StreamEvent]) -> None:
        content = content_of(self._items)
        if len(content) > self._emitted:
            events.append(TextDelta(content[self._emitted:]))
            self._emitted = len(content)
