"""A missing input's hint names the port to wire it from (issue 43 §2.8): a voter's `candidates` from the
sampler's output, not an undeclared `inputs.candidates`."""

from __future__ import annotations

from pathlib import Path

from app.workflow.spec import load_workflow_text
from app.workflow.validation import validate
from nodes.registry import default_registry
from tests.ui.test_ui_service import editor_json, make_service

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


def test_a_fresh_unwired_output_is_a_warning_and_the_run_leaves_it_empty(tmp_path: Path) -> None:
    text = VOTER_UNWIRED.replace("- id: vote\n  kind: voter\n", "- id: vote\n  kind: voter\n"
                                 "  inputs: {candidates: sample.candidates}\n")
    text = text.replace("outputs: {answer: vote.answer}", "outputs: {answer: vote.answer, extra: ''}")
    issues = validate(load_workflow_text(text), REGISTRY)
    assert [(i.code, i.severity) for i in issues] == [("unwired_output", "warning")]
    assert "output 'extra' is not wired yet" in issues[0].message
    service = make_service(tmp_path)
    try:
        run = service.start_run(editor_json(text), {})
        done = service.wait_run(run["run_id"], timeout=30)
        assert done["status"] == "succeeded" and set(done["outputs"]) == {"answer"}
    finally:
        service.close()
