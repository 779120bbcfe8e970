"""extract: math inside workflows: the voter votes over equivalence classes, the exact verifier checks
equivalence with the reference (fake backend, math-verify in its worker)."""

from __future__ import annotations

from typing import Any

import pytest

from app.run.providers import fake_provider
from app.run.scheduler import SUCCEEDED, Scheduler
from app.workflow.spec import workflow_from_dict
from app.workflow.validation import validate
from nodes.algorithms.extract import AnswerSpec, math_answer
from nodes.registry import default_registry

pytest.importorskip("math_verify")
REGISTRY = default_registry()
REPLIES = ["so $x = \\frac{1}{2}$", "The answer is 0.5", "\\boxed{3}", "Answer: \\boxed{\\frac{2}{4}}", "3"]


def _workflow(nodes: list[dict[str, Any]], outputs: dict[str, str]) -> Any:
    return workflow_from_dict({"version": 1, "name": "t", "nodes": nodes, "outputs": outputs,
                               "inputs": {"question": {"type": "text", "default": "Half of 1?"},
                                          "reference": {"type": "text", "default": "\\frac{1}{2}"}}})


SAMPLER = {"id": "s", "kind": "sampler", "params": {"n": 5, "prompt": "{question}"},
           "inputs": {"question": "inputs.question"}}


def _run(wf: Any) -> Any:
    assert not validate(wf, REGISTRY)
    result = Scheduler(REGISTRY, fake_provider(replies=REPLIES)).run(wf, seed=0)
    assert result.status == SUCCEEDED, result.error
    return result


def test_math_answers_are_extracted_as_written() -> None:
    assert math_answer("so $x = \\frac{1}{2}$, finally $\\frac{1}{2}$.") == "\\frac{1}{2}"
    assert math_answer("Answer: 0.5") == "0.5"
    assert math_answer("first \\boxed{3} then \\boxed{\\sqrt{2}}") == "\\sqrt{2}"
    assert math_answer("nothing here") is None
    assert AnswerSpec(extract="math").problems() == []


def test_voter_extract_math_votes_over_equivalence_classes() -> None:
    """Three of five samples say one half in three notations; text equality would make 3 (two votes) win."""
    wf = _workflow([SAMPLER, {"id": "v", "kind": "voter", "params": {"method": "majority", "extract": "math"},
                              "inputs": {"candidates": "s.candidates"}}], {"answer": "v.answer", "vote": "v.result"})
    result = _run(wf)
    assert result.outputs["answer"] == "x = \\frac{1}{2}"
    clusters = result.outputs["vote"]["clusters"]
    assert [(c["answer"], c["count"]) for c in clusters] == [("x = \\frac{1}{2}", 3), ("3", 2)]


def test_verifier_exact_with_extract_math_checks_equivalence() -> None:
    wf = _workflow([SAMPLER, {"id": "check", "kind": "verifier", "params": {"method": "exact", "extract": "math"},
                              "inputs": {"candidates": "s.candidates", "reference": "inputs.reference"}}],
                   {"scored": "check.candidates"})
    scores = [c.score for c in _run(wf).outputs["scored"].candidates]
    assert scores == [1.0, 1.0, 0.0, 1.0, 0.0]
