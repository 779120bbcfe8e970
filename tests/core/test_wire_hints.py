"""A missing input's hint names the port to wire it from (issue 43 §2.8): a voter's `candidates` from the
sampler's output, not an undeclared `inputs.candidates`."""

from __future__ import annotations

from app.workflow.spec import load_workflow_text
from app.workflow.validation import validate
from nodes.registry import default_registry

REGISTRY = default_registry()

VOTER_UNWIRED = """version: 1
name: vote
inputs:
  question: {type: text, default: 'What is 2 + 2?'}
nodes:
- id: sample
  kind: sampler
  params: {prompt: '{question}', n: 3, max_tokens: 8}
  inputs: {question: inputs.question}
- id: vote
  kind: voter
outputs: {answer: vote.answer}
"""


def test_the_voters_hint_names_the_samplers_port() -> None:
    issue = next(i for i in validate(load_workflow_text(VOTER_UNWIRED), REGISTRY) if i.code == "missing_input")
    assert "candidates" in issue.message
    assert "`sample.candidates`" in issue.hint and "inputs.candidates" not in issue.hint


def test_an_input_no_node_gives_is_wired_from_the_workflow_input() -> None:
    text = VOTER_UNWIRED.replace("  inputs: {question: inputs.question}\n", "")
    issue = next(i for i in validate(load_workflow_text(text), REGISTRY)
                 if i.code == "missing_input" and "question" in i.message)
    assert "`inputs: {question: inputs.question}`" in issue.hint and "from the workflow input" in issue.hint
