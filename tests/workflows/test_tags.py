"""A workflow's `tags:` (issue 41): parsed, checked with codes and lines, dumped canonically, every example tagged."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.workflow.spec import load_workflow_text
from app.workflow.tags import TAG_VOCABULARY, tag_values
from app.workflow.validation import validate
from nodes.registry import default_registry

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
BASE = """version: 1
name: tagged
description: A workflow with tags.
{tags}models:
  main: {{source: bundled}}
inputs:
  question: {{type: text, default: 'What is 2 + 2?'}}
nodes:
- id: answer
  kind: generator
  model: main
  params: {{prompt: '{{question}}', max_tokens: 8}}
  inputs: {{question: inputs.question}}
outputs:
  answer: answer.text
"""


def load(tags: str):  # type: ignore[no-untyped-def]
    return load_workflow_text(BASE.format(tags=tags))


def codes(tags: str) -> list[str]:
    return [i.code for i in validate(load(tags), default_registry())]


def test_tags_in_both_forms_are_read_and_dumped_canonically() -> None:
    wf = load("tags:\n  needs: none\n  task: [math, open]\n")
    assert wf.tags == {"needs": "none", "task": ["math", "open"]}
    assert tag_values(wf.tags, "task") == ["math", "open"] and tag_values(wf.tags, "needs") == ["none"]
    assert codes("tags:\n  needs: none\n  task: [math, open]\n") == []
    text = wf.to_yaml()
    assert "tags:\n  needs: none\n  task: [math, open]\n" in text
    assert load_workflow_text(text).to_yaml() == text
    flow = load("tags: {needs: verifier, task: code}\n")
    assert "tags: {needs: verifier, task: code}\n" in flow.to_yaml()


def test_no_tags_dumps_no_tags_key() -> None:
    wf = load("")
    assert wf.tags == {} and "\ntags:" not in wf.to_yaml()


def test_tags_do_not_change_the_semantic_hash() -> None:
    """Tags say when to use a workflow, not what it computes: runs and the cache see the same workflow."""
    assert load("tags: {needs: none, task: math}\n").semantic_hash() == load("").semantic_hash()


@pytest.mark.parametrize(("tags", "code"), [
    ("tags: [math]\n", "bad_structure"),
    ("tags: math\n", "bad_structure"),
    ("tags: {needs: none, tsak: math}\n", "unknown_tag"),
    ("tags: {needs: oracle}\n", "bad_tag"),
    ("tags: {task: [math, poetry]}\n", "bad_tag"),
    ("tags: {task: []}\n", "bad_tag"),
    ("tags: {task: 3}\n", "bad_tag"),
])
def test_bad_tags_are_refused_with_a_code_a_line_and_a_hint(tags: str, code: str) -> None:
    issues = [i for i in validate(load(tags), default_registry()) if i.code == code]
    assert len(issues) == 1, validate(load(tags), default_registry())
    assert issues[0].line == 4 and issues[0].severity == "error" and issues[0].hint


def test_a_bad_value_hint_lists_the_allowed_values() -> None:
    issue = next(i for i in validate(load("tags: {needs: oracle}\n"), default_registry()) if i.code == "bad_tag")
    assert "'oracle'" in issue.message
    assert all(word in issue.hint for word in TAG_VOCABULARY["needs"])


def test_only_the_good_tags_are_kept_when_some_are_bad() -> None:
    wf = load("tags: {needs: tests, task: poetry}\n")
    assert wf.tags == {"needs": "tests"}


@pytest.mark.parametrize("path", sorted(WORKFLOWS.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_example_says_when_to_use_it(path: Path) -> None:
    wf = load_workflow_text(path.read_text(encoding="utf-8"))
    assert set(wf.tags) == set(TAG_VOCABULARY), f"tag {path.name} with needs: and task:"
