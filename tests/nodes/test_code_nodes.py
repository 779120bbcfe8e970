"""The `tests` verifier and the `behaviour` voter on the fake backend: scores, reasons, traces, clusters, share gate."""

from __future__ import annotations

from typing import Any

import pytest

from app.run.events import EventRecorder
from app.run.providers import fake_provider
from app.run.scheduler import FAILED, SUCCEEDED, Scheduler
from app.share.policy import SharePolicy, check_workflow_allowed
from app.workflow.spec import workflow_from_dict
from app.workflow.validation import validate
from nodes.algorithms.behaviour import behaviour_vote, parse_inputs
from nodes.algorithms.code_tests import count_tests, extract_code
from nodes.registry import default_registry

REGISTRY = default_registry()
TESTS = "assert add(1, 2) == 3\nassert add(2, 2) == 4\nassert add(-1, 1) == 0"
RIGHT = "Here it is:\n```python\ndef add(a, b):\n    return a + b\n```"
RIGHT_TOO = "```python\ndef add(a, b):\n    return sum([a, b])\n```"
OFF_BY_ONE = "```python\ndef add(a, b):\n    return a + b + 1\n```"
BROKEN = "```python\ndef add(a, b) return a\n```"


def workflow(voter: dict[str, Any] | None = None, **verifier: Any) -> Any:
    nodes = [{"id": "s", "kind": "sampler", "params": {"n": 4, "prompt": "{question}"},
              "inputs": {"question": "inputs.question"}},
             {"id": "v", "kind": "verifier", "params": {"method": "tests", **verifier},
              "inputs": {"candidates": "s.candidates", "tests": "inputs.tests"}}]
    outputs = {"scores": "v.scores", "c": "v.candidates"}
    if voter is not None:
        nodes.append({"id": "vote", "kind": "voter", "params": {"method": "behaviour", **voter},
                      "inputs": {"candidates": "v.candidates", "tests": "inputs.tests"}})
        outputs.update({"answer": "vote.answer", "result": "vote.result"})
    return workflow_from_dict({"version": 1, "name": "t", "nodes": nodes, "outputs": outputs, "inputs": {
        "question": {"type": "text", "default": "Write add(a, b)."},
        "tests": {"type": "text", "default": TESTS}}})


def run(wf: Any, replies: list[str], allow_code: bool = True) -> tuple[Any, EventRecorder]:
    rec = EventRecorder(skip=("token",))
    scheduler = Scheduler(REGISTRY, fake_provider(replies=replies))
    scheduler.allow_code_execution = allow_code
    return scheduler.run(wf, seed=0, observers=[rec]), rec


def test_extract_and_count() -> None:
    assert extract_code(RIGHT).strip() == "def add(a, b):\n    return a + b"
    assert extract_code("x = 1") == "x = 1"
    assert extract_code("```\na\n```\nthen\n```py\nb\n```") == "b\n"
    assert count_tests(TESTS, "") == 3
    assert count_tests("def check(candidate):\n    assert candidate(1)\n    assert candidate(2)\n", "f") == 2


def test_tests_verifier_scores_fractions_with_reasons_and_trace() -> None:
    result, rec = run(workflow(), [RIGHT, OFF_BY_ONE, BROKEN, RIGHT_TOO])
    assert result.status == SUCCEEDED, result.error
    assert result.outputs["scores"] == [1.0, 0.0, 0.0, 1.0]
    cands = result.outputs["c"].candidates
    assert "first failure: assert add(1, 2) == 3: got 4" in cands[1].meta["reasons"]["v"]
    assert "SyntaxError" in cands[2].meta["reasons"]["v"]
    detail = cands[1].meta["tests"]["v"]
    assert [t["passed"] for t in detail["tests"]] == [False, False, False]
    assert detail["tests"][0]["output"] == "4"
    events = [e.data for e in rec.of_type("node_event")]
    assert events[0]["kind"] == "code_isolation"
    (score,) = [e for e in events if e["kind"] == "score"]
    assert score["scores"][0]["tests"]["passed"] == 3


def test_partial_credit_and_io_tests() -> None:
    """Partial credit comes from what the supervisor observed: stdin/stdout pairs. The per-test breakdown of assert
    tests runs in the candidate's own process (it could be forged): detail only, no score."""
    half = "```python\ndef add(a, b):\n    return a + b if a > 1 else 0\n```"
    result, _ = run(workflow(), [half] * 4)
    assert result.outputs["scores"][0] == 0.0
    assert [t["passed"] for t in result.outputs["c"].candidates[0].meta["tests"]["v"]["tests"]].count(True) == 2
    io = [{"input": "2 3\n", "output": "6"}, {"input": "1 1\n", "output": "2"}]
    prog = "```python\na, b = map(int, input().split())\nprint(a * b)\n```"
    result, _ = run(workflow(tests="", io_tests=io), [prog] * 4)
    assert result.outputs["scores"][0] == pytest.approx(0.5)
    assert "expected '2', got '1'" in result.outputs["c"].candidates[0].meta["reasons"]["v"]


def test_behaviour_voter_picks_the_largest_cluster() -> None:
    result, rec = run(workflow(voter={"filter_passing": False, "entry_point": "add",
                                      "generated_inputs": ["5, 5", "0, 9"]}),
                      [OFF_BY_ONE, RIGHT, OFF_BY_ONE, RIGHT_TOO])
    assert result.status == SUCCEEDED, result.error
    vote = result.outputs["result"]
    assert vote["method"] == "behaviour"
    assert sorted(sorted(c["members"]) for c in vote["clusters"]) == [[0, 2], [1, 3]]
    # two clusters of two: the tie goes to the cluster with the best verifier score (the right one)
    assert "return a + b\n" in result.outputs["answer"] or "sum" in result.outputs["answer"]
    assert vote["winner"] in (1, 3)
    (event,) = [e.data for e in rec.of_type("node_event") if e.data["kind"] == "vote"]
    assert event["detail"]["inputs"] == ["5, 5", "0, 9"]


def test_behaviour_voter_filters_passing_candidates_first() -> None:
    result, _ = run(workflow(voter={"entry_point": "add", "generated_inputs": ["5, 5"]}),
                    [OFF_BY_ONE, OFF_BY_ONE, OFF_BY_ONE, RIGHT])
    vote = result.outputs["result"]
    assert vote["winner"] == 3 and vote["detail"]["filtered_out"] == [0, 1, 2]


def test_behaviour_vote_by_hand() -> None:
    vote = behaviour_vote(["a", "b", "a", None, "b"], [0.1, 0.9, 0.2, 1.0, 0.5])
    assert vote.winner == 1 and vote.no_answer == [3]  # a tie of two; b has the better score; 1 beats 4
    vote = behaviour_vote(["a", "a", "b"], [0.0, 0.3, 1.0])
    assert vote.winner == 1 and vote.ties == []
    assert parse_inputs('```json\n[[1, 2], "3, 4"]\n```', "f") == ["1, 2", "3, 4"]
    assert parse_inputs("1 2\n\n3 4\n", "") == ["1 2", "3 4"]


def test_code_execution_is_refused_in_share_mode_unless_allowed() -> None:
    wf = workflow(voter={"generated_inputs": ["1, 2"]})
    shared = SharePolicy.for_serving(share=True, model_choices=())
    codes = [i.code for i in check_workflow_allowed(wf, shared)]
    assert codes.count("code_execution_disabled") == 2
    allowed = SharePolicy.for_serving(share=True, model_choices=(), allow_code_execution=True)
    assert "code_execution_disabled" not in [i.code for i in check_workflow_allowed(wf, allowed)]
    assert "code_execution_disabled" not in [i.code for i in check_workflow_allowed(wf, SharePolicy.local())]
    result, _ = run(workflow(), [RIGHT] * 4, allow_code=False)
    assert result.status == FAILED and "--allow-code-execution" in result.error


def test_tests_that_are_not_python_are_a_validation_problem() -> None:
    wf = workflow(tests="assert (")
    assert "bad_param" in [i.code for i in validate(wf, REGISTRY)]


def test_the_share_flag_reaches_the_policy() -> None:
    import argparse

    from app.cli.share_flags import add_share_arguments, policy_from_args

    parser = argparse.ArgumentParser()
    add_share_arguments(parser)
    off = policy_from_args(parser.parse_args(["--share-mode"]), "127.0.0.1")
    on = policy_from_args(parser.parse_args(["--share-mode", "--allow-code-execution"]), "127.0.0.1")
    assert off.share_mode and not off.allow_code_execution
    assert on.share_mode and on.allow_code_execution


def test_a_hostile_run_does_not_hold_up_another_run() -> None:
    from concurrent.futures import ThreadPoolExecutor

    loop = "```python\ndef add(a, b):\n    while True:\n        pass\n```"
    with ThreadPoolExecutor(2) as pool:
        hostile = pool.submit(run, workflow(timeout_s=2), [loop] * 4)
        good = pool.submit(run, workflow(), [RIGHT] * 4)
        good_result, _ = good.result(timeout=120)
        hostile_result, _ = hostile.result(timeout=120)
    assert good_result.status == SUCCEEDED and good_result.outputs["scores"] == [1.0] * 4
    assert hostile_result.status == SUCCEEDED and hostile_result.outputs["scores"] == [0.0] * 4
    assert all("time" in c.meta["reasons"]["v"] for c in hostile_result.outputs["c"].candidates)


def test_a_signal_through_bubblewrap_is_named() -> None:
    import signal

    from nodes.algorithms.code_exec import ExecLimits, ExecResult
    from nodes.algorithms.code_tests import _death

    limits = ExecLimits(timeout_s=2)
    # bwrap exits with 128 + the signal that killed its child
    assert "CPU time limit" in _death(ExecResult(128 + signal.SIGXCPU, "", "", "", False, True), limits)
    assert "status 152" in _death(ExecResult(152, "", "", "", False, False), limits)
