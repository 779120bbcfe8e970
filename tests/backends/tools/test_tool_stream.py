"""The streamed reading of every golden output, split at every position, is the whole-text reading: the same text
(as deltas) and calls (start, arguments JSON, end), nothing of a call ever shown as text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backends.tools.parse import MARKERS, parse_tool_calls
from backends.tools.stream import ArgsDelta, CallEnd, CallStart, TextDelta, ToolStreamParser
from backends.tools.types import ToolAnswer, ToolChoice, ToolRequest
from tests.backends.tools.tool_cases import AUTO, HAND_OUTPUTS, template_outputs

CASES = [(family, out) for family, cases in HAND_OUTPUTS.items() for out, _, _ in cases] + \
        [(c[1], c[2]) for c in template_outputs()]


def _key(answer: ToolAnswer) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    return answer.content, [(c.name, dict(c.arguments)) for c in answer.calls]


def _stream(family: str, pieces: list[str]) -> tuple[list, ToolAnswer]:
    parser = ToolStreamParser(family, AUTO)
    events = []
    for piece in pieces:
        events += parser.feed(piece)
    events += parser.close()
    return events, parser.answer()


def _check(family: str, output: str, pieces: list[str]) -> None:
    whole = parse_tool_calls(output, family, AUTO)
    events, answer = _stream(family, pieces)
    assert _key(answer) == _key(whole), pieces
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == whole.content, pieces
    starts = [e for e in events if isinstance(e, CallStart)]
    ends = [e for e in events if isinstance(e, CallEnd)]
    assert [e.index for e in starts] == [e.index for e in ends] == list(range(len(answer.calls)))
    for start, end, call in zip(starts, ends, answer.calls, strict=True):
        args = "".join(e.text for e in events if isinstance(e, ArgsDelta) and e.index == start.index)
        assert json.loads(args) == dict(call.arguments)
        assert start.id == end.call.id == call.id and start.name == call.name
        assert events.index(start) < events.index(end)
    if answer.calls:
        shown = "".join(e.text for e in events if isinstance(e, TextDelta))
        assert not any(m in shown for m in MARKERS[family])


@pytest.mark.parametrize(("family", "output"), CASES)
def test_every_split_in_two_reads_as_the_whole(family: str, output: str) -> None:
    for i in range(len(output) + 1):
        _check(family, output, [output[:i], output[i:]])


@pytest.mark.parametrize(("family", "output"), CASES)
def test_character_by_character_and_three_way_splits_read_as_the_whole(family: str, output: str) -> None:
    _check(family, output, list(output))
    step = max(1, len(output) // 9)
    for i in range(0, len(output) + 1, step):
        for j in range(i, len(output) + 1, step):
            _check(family, output, [output[:i], output[i:j], output[j:]])


def test_text_flows_before_a_call_and_a_marker_prefix_is_held_back() -> None:
    parser = ToolStreamParser("hermes", AUTO)
    assert parser.feed("Let me check") == [TextDelta("Let me check")]
    assert parser.feed(". <tool_") == [TextDelta(".")]  # "<tool_" may open a call: held, with the space before it
    assert parser.feed('call>\n{"name": "get_weather", "arguments": {"city": ') == []
    events = parser.feed('"Paris"}}\n</tool_call>')
    assert [type(e) for e in events] == [CallStart, ArgsDelta, CallEnd]
    assert events[0].name == "get_weather" and json.loads(events[1].text) == {"city": "Paris"}
    assert parser.close() == []


def test_a_held_marker_prefix_that_is_not_one_comes_out_as_text() -> None:
    parser = ToolStreamParser("hermes", AUTO)
    assert parser.feed("1 <tool") == [TextDelta("1")]
    assert parser.feed("box") == [TextDelta(" <toolbox")]


def test_a_call_malformed_at_the_end_is_text() -> None:
    parser = ToolStreamParser("hermes", AUTO)
    assert parser.feed('<tool_call>\n{"name": "get_weather", "arguments": {"city"') == []
    events = parser.close()
    assert events == [TextDelta('<tool_call>\n{"name": "get_weather", "arguments": {"city"')]
    assert parser.answer().calls == ()


def test_without_active_tools_every_piece_is_text_at_once() -> None:
    parser = ToolStreamParser("hermes", ToolRequest(AUTO.tools, ToolChoice("none")))
    assert parser.feed("<tool_call>") == [TextDelta("<tool_call>")]
    assert parser.close() == [] and parser.answer() == ToolAnswer("<tool_call>")


def test_feeding_after_close_is_refused() -> None:
    parser = ToolStreamParser("generic", AUTO)
    parser.close()
    with pytest.raises(ValueError, match="after close"):
        parser.feed("x")
