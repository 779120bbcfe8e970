"""Workflow YAML format v1: golden round-trip of every example, stable dumps, refusals with lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.workflow.problems import WorkflowError
from app.workflow.spec import load_workflow, load_workflow_text, save_workflow_atomic

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "workflows").glob("*.yaml"))
RESOURCES = ROOT / "tests" / "resources"


def test_examples_exist() -> None:
    assert len(EXAMPLES) >= 9, "workflows/ must hold the example workflows"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_is_its_own_canonical_dump(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    wf = load_workflow_text(text)
    assert wf.load_issues == []
    assert wf.to_yaml() == text, f"{path.name} is not in canonical form: regenerate it from Workflow.to_yaml()"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_load_dump_load_is_stable(path: Path) -> None:
    wf = load_workflow(path)
    again = load_workflow_text(wf.to_yaml())
    assert again == wf
    assert again.to_yaml() == wf.to_yaml()


def test_multiline_prompts_and_unicode_survive_round_trip() -> None:
    text = """version: 1
name: ünïcode ✓
inputs:
  q: {type: text, default: 'Wie viel ist 2 + 2? {not a var}'}
nodes:
- id: gen
  kind: generator
  params:
    prompt: |
      Line one: {q}
      Line two — “quotes” and 'single'
    stop: ["\\n\\n", 'Answer:']
  inputs: {q: inputs.q}
outputs: {answer: gen.text}
layout:
  gen: [10.5, -3]
"""
    wf = load_workflow_text(text)
    assert wf.nodes[0].params["prompt"].startswith("Line one: {q}\nLine two")
    assert wf.nodes[0].params["stop"] == ["\n\n", "Answer:"]
    dumped = wf.to_yaml()
    assert load_workflow_text(dumped) == wf
    assert load_workflow_text(dumped).to_yaml() == dumped


def test_layout_is_kept_apart_from_semantics() -> None:
    base = EXAMPLES[0].read_text(encoding="utf-8")
    wf = load_workflow_text(base)
    moved = load_workflow_text(base)
    moved.layout = {k: [v[0] + 100, v[1]] for k, v in moved.layout.items()}
    moved.name = "renamed"
    assert moved.semantic_hash() == wf.semantic_hash()
    moved.nodes[0].params["max_tokens"] = 7
    assert moved.semantic_hash() != wf.semantic_hash()


def test_unknown_top_level_key_is_refused_with_line() -> None:
    wf = load_workflow(RESOURCES / "unknown_top_level.yaml")
    [issue] = wf.load_issues
    assert issue.code == "unknown_key" and issue.line == 3 and "nodez" in issue.message


def test_future_version_is_refused() -> None:
    with pytest.raises(WorkflowError) as exc:
        load_workflow(RESOURCES / "future_version.yaml")
    assert exc.value.issues[0].code == "unsupported_version"
    assert "upgrade" in exc.value.issues[0].hint


def test_yaml_syntax_error_has_line() -> None:
    with pytest.raises(WorkflowError) as exc:
        load_workflow(RESOURCES / "yaml_syntax.yaml")
    issue = exc.value.issues[0]
    assert issue.code == "yaml_syntax" and issue.line is not None and 6 <= issue.line <= 8


def test_not_a_mapping_and_empty_file() -> None:
    with pytest.raises(WorkflowError) as exc:
        load_workflow_text("- just\n- a list\n")
    assert exc.value.issues[0].code == "bad_structure"
    with pytest.raises(WorkflowError) as exc:
        load_workflow_text("")
    assert exc.value.issues[0].code == "empty"


def test_unsafe_yaml_tags_are_refused() -> None:
    with pytest.raises(WorkflowError) as exc:
        load_workflow_text("version: 1\nname: !!python/object/apply:os.system ['echo hacked']\n")
    assert exc.value.issues[0].code == "yaml_syntax"


def test_atomic_save_leaves_no_temp_files(tmp_path: Path) -> None:
    wf = load_workflow(EXAMPLES[0])
    target = tmp_path / "out.yaml"
    save_workflow_atomic(wf, target)
    save_workflow_atomic(wf, target)
    assert target.read_text(encoding="utf-8") == wf.to_yaml()
    assert [p.name for p in tmp_path.iterdir()] == ["out.yaml"]


def test_atomic_save_keeps_the_existing_files_permissions(tmp_path: Path) -> None:
    wf = load_workflow(EXAMPLES[0])
    target = tmp_path / "shared.yaml"
    target.write_text("old", encoding="utf-8")
    target.chmod(0o644)
    save_workflow_atomic(wf, target)
    assert target.stat().st_mode & 0o777 == 0o644
