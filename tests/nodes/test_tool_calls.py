"""Tool calls' canonical form and schema check (nodes/algorithms/tool_calls.py), by hand-computed cases."""

from __future__ import annotations

import json

from backends.tools.types import ToolAnswer, ToolCall, ToolChoice, ToolRequest, answer_json, tools_from_openai
from nodes.algorithms.tool_calls import (
    NO_CALL,
    answer_text,
    canonical_answer,
    canonical_label,
    check_answer,
    readable,
    standardize_string,
)

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "required": ["city"],
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                                                        "default": "celsius"},
                   "days": {"type": "integer", "default": 1}, "scale": {"type": "number"},
                   "tags": {"type": "array", "items": {"type": "string"}},
                   "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]}}}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string"}}}}}
REQUEST = ToolRequest(tools_from_openai([WEATHER, TIME]))


def key(*calls: ToolCall, request: ToolRequest | None = REQUEST) -> str:
    return canonical_answer(ToolAnswer("", calls), request)


def call(name: str = "get_weather", **args: object) -> ToolCall:
    return ToolCall(name, args)


def test_argument_order_does_not_matter() -> None:
    a = ToolCall("get_weather", {"city": "Paris", "days": 3})
    b = ToolCall("get_weather", {"days": 3, "city": "Paris"})
    assert key(a) == key(b)


def test_numbers_compare_by_value_whatever_their_json_type() -> None:
    assert key(call(city="Paris", scale=1)) == key(call(city="Paris", scale=1.0))
    assert key(call(city="Paris", days=2)) == key(call(city="Paris", days=2.0))
    assert key(call(city="Paris", scale=1.5)) != key(call(city="Paris", scale=1))
    assert key(call(city="Paris", scale=True)) != key(call(city="Paris", scale=1))  # a boolean is no number


def test_an_optional_argument_at_its_default_equals_it_left_out() -> None:
    assert key(call(city="Paris", unit="celsius")) == key(call(city="Paris"))
    assert key(call(city="Paris", days=1.0)) == key(call(city="Paris"))
    assert key(call(city="Paris", unit="fahrenheit")) != key(call(city="Paris"))
    # without the schema there is no default to know of
    assert key(call(city="Paris", unit="celsius"), request=None) != key(call(city="Paris"), request=None)


def test_strings_compare_as_bfcl_standardises_them() -> None:
    assert standardize_string("New York, NY") == "newyorkny"
    assert standardize_string("It's") == 'it"s'
    assert key(call(city="New York, NY")) == key(call(city="new york ny"))
    assert key(call(city="Paris")) != key(call(city="Lyon"))


def test_lists_keep_their_order_and_objects_do_not() -> None:
    assert key(call(city="x", tags=["a", "b"])) != key(call(city="x", tags=["b", "a"]))
    assert key(call(city="x", where={"lat": 1, "lon": 2.0})) == key(call(city="x", where={"lon": 2, "lat": 1.0}))


def test_parallel_calls_are_compared_order_free_as_a_multiset() -> None:
    paris, lyon = call(city="Paris"), call(city="Lyon")
    assert key(paris, lyon) == key(lyon, paris)
    assert key(paris, paris) != key(paris)
    assert key(call("get_time")) != key(paris)
    assert canonical_answer(ToolAnswer("It is sunny."), REQUEST) == NO_CALL == key()


def test_labels_and_readable_text() -> None:
    label = canonical_label(key(call(city="Paris", unit="celsius", days=3)))
    assert label == 'get_weather(city="paris", days=3)'
    answer = ToolAnswer("", (call(city="Paris"), ToolCall("get_time", {"zone": "CET"})))
    assert answer_text(answer) == 'get_weather(city="Paris")\nget_time(zone="CET")'
    assert readable(answer_json(answer)) == answer_text(answer)
    assert readable("plain text") == "plain text" and answer_text(ToolAnswer("hello")) == "hello"


AUTO = ToolChoice()


def verdict(*calls: ToolCall, choice: ToolChoice = AUTO, parallel: bool = True) -> tuple[bool, str]:
    request = ToolRequest(REQUEST.tools, choice, parallel)
    v = check_answer(ToolAnswer("text" if not calls else "", calls), request)
    return v.ok, v.reason


def test_schema_check_accepts_valid_calls() -> None:
    ok, reason = verdict(call(city="Paris", unit="fahrenheit", days=2.0, scale=1, tags=["a"], where={"lat": 4.5}))
    assert ok and reason.startswith("1 valid call: get_weather(")


def test_schema_check_names_what_is_wrong() -> None:
    cases = {
        "no such tool": call("get_news"),
        "lacks the required argument 'city'": call(unit="celsius"),
        "unknown argument 'country'": call(city="Paris", country="FR"),
        "get_weather.days must be integer": call(city="Paris", days=1.5),
        "get_weather.city must be string": call(city=3),
        "get_weather.unit must be one of": call(city="Paris", unit="kelvin"),
        "get_weather.tags[1] must be string": call(city="Paris", tags=["a", 2]),
        "get_weather.where lacks the required argument 'lat'": call(city="Paris", where={}),
        "get_weather.scale must be number": call(city="Paris", scale=True),
    }
    for expected, bad in cases.items():
        ok, reason = verdict(bad)
        assert not ok and expected in reason, (expected, reason)


def test_schema_check_applies_the_tool_choice() -> None:
    paris = call(city="Paris")
    assert verdict()[0] and verdict(paris)[0]
    assert not verdict(paris, choice=ToolChoice("none"))[0]
    assert verdict(choice=ToolChoice("none"))[0]
    ok, reason = verdict(choice=ToolChoice("required"))
    assert not ok and "at least one call" in reason
    assert verdict(paris, choice=ToolChoice("required"))[0]
    ok, reason = verdict(paris, choice=ToolChoice("function", "get_time"))
    assert not ok and "names get_time" in reason
    assert verdict(ToolCall("get_time", {}), choice=ToolChoice("function", "get_time"))[0]
    ok, reason = verdict(paris, call(city="Lyon"), parallel=False)
    assert not ok and "parallel" in reason
    assert json.loads(key(paris)) == [json.dumps(["get_weather", {"city": "paris"}])]
