"""Stop strings are bounded (count and length) wherever they enter: workflow params (validation, `bad_param`),
/v1's `stop` (an OpenAI-shaped 400 naming the field) and the backend's door (issue 32, finding 10: sixteen 60 KB
stop strings cost ~1.5 s per token)."""

from __future__ import annotations

from typing import Any

import pytest

from app.serve.errors import ApiError
from app.serve.params import parse_chat
from app.workflow.spec import workflow_from_dict
from app.workflow.validation import validate
from backends.base import MAX_STOP_CHARS, MAX_STOP_STRINGS, BackendError, SamplingParams, validate_params
from nodes.registry import default_registry

LONG = "x" * 60_000
TOO_MANY = [f"stop{i}" for i in range(MAX_STOP_STRINGS + 1)]


def _generator(stop: Any) -> dict[str, Any]:
    return {"version": 1, "name": "g", "models": {"main": {"source": "fake"}},
            "inputs": {"q": {"type": "text", "default": "hi"}},
            "nodes": [{"id": "gen", "kind": "generator", "model": "main",
                       "params": {"prompt": "{q}", "stop": stop}, "inputs": {"q": "inputs.q"}}],
            "outputs": {"answer": "gen.text"}}


@pytest.mark.parametrize("stop", [[LONG] * 16, LONG, TOO_MANY], ids=["16-long", "one-long-string", "17"])
def test_workflow_params_refuse_unbounded_stops(stop: Any) -> None:
    issues = [i for i in validate(workflow_from_dict(_generator(stop)), default_registry()) if i.severity == "error"]
    assert [i.code for i in issues] == ["bad_param"], issues
    assert "stop" in issues[0].message and len(issues[0].message) < 500  # the strings are not echoed


def test_bounded_stops_validate() -> None:
    stop = ["y" * MAX_STOP_CHARS] * MAX_STOP_STRINGS
    assert not [i for i in validate(workflow_from_dict(_generator(stop)), default_registry())
                if i.severity == "error"]


@pytest.mark.parametrize("stop", [[LONG] * 16, LONG, TOO_MANY], ids=["16-long", "one-long-string", "17"])
def test_v1_refuses_unbounded_stops_with_a_400_naming_the_field(stop: Any) -> None:
    with pytest.raises(ApiError) as caught:
        parse_chat({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stop": stop})
    assert caught.value.status == 400 and caught.value.param == "stop"


def test_the_backend_door_refuses_them_too() -> None:
    with pytest.raises(BackendError, match="stop"):
        validate_params(SamplingParams(stop=(LONG,)))
    validate_params(SamplingParams(stop=tuple(TOO_MANY)))  # room for the stops nodes add (a step delimiter)
