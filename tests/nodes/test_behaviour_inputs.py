"""AlphaCode's generated inputs: those that cannot make a call are named and left out; errors-only clusters marked."""

from __future__ import annotations

from typing import Any

import pytest

from app.run.events import EventRecorder
from app.run.providers import fake_provider
from app.run.scheduler import FAILED, SUCCEEDED, Scheduler
from app.workflow.spec import workflow_from_dict
from nodes.algorithms.behaviour import errors_only, failing_everywhere, inputs_note, parse_inputs, usable_inputs
from nodes.registry import default_registry

REGISTRY = default_registry()
TESTS = "assert add(1, 2) == 3\nassert add(2, 2) == 4"
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
RIGHT_TOO = "```python\ndef add(a, b):\n    return sum([a, b])\n```"
OFF_BY_ONE = "```python\ndef add(a, b):\n    return a + b + 1\n```"
RAISES = "```python\ndef add(a, b):\n    raise ValueError('no')\n```"
# what a small model writes when asked for a JSON list of argument lists: prose, numbered calls, cut-off lists
PROSE = "Here are three test inputs:\n1. add(2, 3)\n2. add(-1, 1\n3. add(0, k=0)"
UNPARSEABLE = "Here are three test inputs:\nthe empty list and a large number\n[[1, 2], [3"


def workflow(wire_tests: bool = True, **voter: Any) -> Any:
    nodes = [{"id": "s", "kind": "sampler", "params": {"n": 4, "prompt": "{question}"},
              "inputs": {"question": "inputs.question"}},
             {"id": "v", "kind": "verifier", "params": {"method": "tests"},
              "inputs": {"candidates": "s.candidates", "tests": "inputs.tests"}},
             {"id": "vote", "kind": "voter", "params": {"method": "behaviour", "entry_point": "add",
                                                         "filter_passing": False, **voter},
              "inputs": {"candidates": "v.candidates", "generated_inputs": "inputs.generated",
                         **({"tests": "inputs.tests"} if wire_tests else {})}}]
    return workflow_from_dict({"version": 1, "name": "t", "nodes": nodes,
                               "outputs": {"answer": "vote.answer", "result": "vote.result"}, "inputs": {
                                   "question": {"type": "text", "default": "Write add(a, b)."},
                                   "tests": {"type": "text", "default": TESTS},
                                   "generated": {"type": "text", "default": UNPARSEABLE}}})


def run(wf: Any, replies: list[str]) -> tuple[Any, EventRecorder]:
    rec = EventRecorder(skip=("token",))
    scheduler = Scheduler(REGISTRY, fake_provider(replies=replies))
    scheduler.allow_code_execution = True
    return scheduler.run(wf, seed=0, observers=[rec]), rec


def test_inputs_that_do_not_make_a_call_are_set_apart() -> None:
    probes = parse_inputs(PROSE, "add")
    assert probes == ["Here are three test inputs:", "add(2, 3)", "add(-1, 1", "add(0, k=0)"]  # list marks dropped
    usable, unusable = usable_inputs([*probes, "[1, 2]", "1), print(2"], "add")
    assert usable == ["2, 3", "0, k=0", "[1, 2]"]  # a whole call gives its arguments
    assert [u["input"] for u in unusable] == ["Here are three test inputs:", "add(-1, 1", "1), print(2"]
    assert unusable[0]["error"].startswith("SyntaxError") and unusable[1]["error"].startswith("SyntaxError")
    assert unusable[2]["error"] == "not an argument list of add()"
    assert usable_inputs(["not python at all (", "x"], "") == (["not python at all (", "x"], [])  # stdin texts
    assert parse_inputs("1. first\n2) second", "") == ["1. first", "2) second"]  # stdin keeps its text


def test_failing_everywhere_and_errors_only_by_hand() -> None:
    rows = [["!NameError", "3", "!TypeError"], ["!NameError", "4", "!ValueError"]]
    assert failing_everywhere(rows, 3) == {0: "NameError"}
    assert failing_everywhere([["!NameError"], ["5"]], 1) == {}
    failed = {"passed": False, "error": "ValueError: no", "output": "ValueError: no"}
    wrong = {"passed": False, "error": "got 4", "output": "4"}
    assert errors_only([failed, failed], ["!ValueError"])
    assert not errors_only([failed, wrong], [])  # a wrong value is a behaviour, not an error
    assert not errors_only([failed], ["7"])
    assert not errors_only([], [])


def test_the_note_says_what_was_left_out() -> None:
    unusable = [{"input": f"line {i} (", "error": "SyntaxError: '(' was never closed"} for i in range(4)]
    note = inputs_note(unusable[:3], 0, True)
    assert note.startswith("3 generated inputs could not be used: 'line 0 (' (SyntaxError: '(' was never closed);")
    assert note.endswith("; clustered on the example tests only")
    assert inputs_note(unusable, 2, True).endswith("; and 1 more; clustered on the example tests and the 2 that ran")
    assert inputs_note(unusable[:1], 0, False).startswith("1 generated input could not be used")
    assert inputs_note([], 3, True) == ""


def test_a_behaviour_vote_on_unparseable_generated_inputs() -> None:
    result, rec = run(workflow(), [OFF_BY_ONE, RIGHT, OFF_BY_ONE, RIGHT_TOO])
    assert result.status == SUCCEEDED, result.error
    vote = result.outputs["result"]
    # clustered on the example tests only: the two right programs agree, and so do the two off by one
    assert sorted(sorted(c["members"]) for c in vote["clusters"]) == [[0, 2], [1, 3]]
    assert vote["winner"] in (1, 3)
    detail = vote["detail"]
    assert detail["inputs"] == [] and detail["unusable_count"] == 3
    assert [u["input"] for u in detail["unusable_inputs"]] == parse_inputs(UNPARSEABLE, "add")
    assert detail["note"].startswith("3 generated inputs could not be used: 'Here are three test inputs:' "
                                     "(SyntaxError: ")
    assert detail["note"].endswith("; clustered on the example tests only")
    assert detail["error_clusters"] == []
    (event,) = [e.data for e in rec.of_type("node_event") if e.data["kind"] == "vote"]
    assert event["detail"]["note"] == detail["note"]


def test_inputs_every_program_raised_on_are_left_out_too() -> None:
    wf = workflow(generated_inputs=["undefined_name, 1", "5, 5"])
    wf.inputs["generated"].default = "[[2, 3]]"
    result, _ = run(wf, [OFF_BY_ONE, RIGHT, OFF_BY_ONE, RIGHT_TOO])
    detail = result.outputs["result"]["detail"]
    assert detail["inputs"] == ["5, 5", "2, 3"]
    assert detail["unusable_inputs"] == [{"input": "undefined_name, 1", "error": "every program raised NameError"}]
    assert detail["note"].endswith("; clustered on the example tests and the 2 that ran")


def test_a_cluster_of_errors_alone_is_marked() -> None:
    result, _ = run(workflow(), [RAISES, RIGHT, RAISES, OFF_BY_ONE])
    vote = result.outputs["result"]
    assert sorted(vote["clusters"][0]["members"]) == [0, 2]
    assert vote["detail"]["error_clusters"] == [0]
    assert vote["clusters"][0]["answer"].startswith("errors only: ")
    assert not any(c["answer"].startswith("errors only") for c in vote["clusters"][1:])


def test_nothing_to_cluster_on_is_a_clear_error() -> None:
    result, _ = run(workflow(wire_tests=False), [RIGHT] * 4)
    assert result.status == FAILED
    assert "nothing to run the candidates on: 3 generated inputs could not be used" in result.error
    assert "nothing left to cluster on" in result.error


@pytest.mark.parametrize("text", ["[[1, 2], [3, 4]]", "1, 2\n3, 4"])
def test_good_inputs_are_all_used(text: str) -> None:
    assert usable_inputs(parse_inputs(text, "add"), "add") == (["1, 2", "3, 4"], [])
