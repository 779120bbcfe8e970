"""Sub-workflows, statically: finding children, their problems with file and line, cycles, depth, ports, map."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.service.errors import UserError
from app.workflow.problems import Issue
from app.workflow.spec import load_workflow, load_workflow_text
from app.workflow.subworkflows import ChildLoader
from app.workflow.validation import check, validate
from nodes.registry import default_registry

REGISTRY = default_registry()

CHILD = """\
version: 1
name: refine
inputs:
  draft: {type: text}
  question: {type: text, default: 'What is 2+2?'}
nodes:
- id: critique
  kind: generator
  params: {prompt: 'Critique {draft} for {question}', max_tokens: 16}
  inputs: {draft: inputs.draft, question: inputs.question}
- id: revise
  kind: generator
  params: {prompt: 'Revise {draft} using {critique}', max_tokens: 16}
  inputs: {draft: inputs.draft, critique: critique.text}
outputs: {answer: revise.text, critique: critique.text}
"""

PARENT = """\
version: 1
name: parent
inputs:
  question: {type: text, default: 'What is 3+4?'}
nodes:
- id: sample
  kind: sampler
  params: {prompt: '{question}', n: 3, max_tokens: 16}
  inputs: {question: inputs.question}
- id: refine_each
  kind: workflow
  map: draft
  params: {workflow: refine}
  inputs: {draft: sample.candidates, question: inputs.question}
- id: pick
  kind: voter
  params: {method: majority}
  inputs: {candidates: refine_each.candidates}
outputs: {answer: pick.best}
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def issues_of(path: Path, loader: ChildLoader | None = None) -> list[Issue]:
    return validate(load_workflow(path), REGISTRY, loader or ChildLoader((path.parent,)))


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


def test_a_mapped_child_binds_its_ports_and_validates(tmp_path: Path) -> None:
    write(tmp_path, "refine", CHILD)
    parent = load_workflow(write(tmp_path, "parent", PARENT))
    checked = check(parent, REGISTRY, ChildLoader((tmp_path,)))
    assert checked.issues == []
    kind = checked.children["refine_each"].kind
    assert [(p.name, p.type, p.required) for p in kind.inputs] == [("draft", "candidates", True),
                                                                   ("question", "text", False)]
    assert [p.name for p in kind.outputs] == ["candidates"]


def test_an_unmapped_child_exposes_its_outputs_with_types(tmp_path: Path) -> None:
    write(tmp_path, "refine", CHILD)
    text = PARENT.replace("  map: draft\n", "").replace("draft: sample.candidates", "draft: inputs.question")
    text = text.replace("refine_each.candidates", "sample.candidates").replace(
        "outputs: {answer: pick.best}", "outputs: {answer: pick.best, refined: refine_each.answer}")
    checked = check(load_workflow(write(tmp_path, "parent", text)), REGISTRY, ChildLoader((tmp_path,)))
    assert checked.issues == []
    assert checked.output_types == {"answer": "text", "refined": "text"}


def test_missing_child_is_unknown_workflow_at_its_line(tmp_path: Path) -> None:
    text = PARENT.replace("workflow: refine", "workflow: refine_missing")
    issues = issues_of(write(tmp_path, "parent", text))
    assert [(i.code, i.node_id, i.line) for i in issues] == [
        ("unknown_workflow", "refine_each", line_of(text, "workflow: refine_missing"))]


def test_two_file_cycle_names_the_chain(tmp_path: Path) -> None:
    two = """\
version: 1
name: {me}
inputs:
  x: {{type: text, default: hi}}
nodes:
- id: inner
  kind: workflow
  params: {{workflow: {other}}}
  inputs: {{x: inputs.x}}
outputs: {{answer: inner.answer}}
"""
    a = write(tmp_path, "a", two.format(me="a", other="b"))
    write(tmp_path, "b", two.format(me="b", other="a"))
    issues = issues_of(a)
    cycle = [i for i in issues if i.code == "workflow_cycle"]
    assert len(cycle) == 1, issues
    assert "a.yaml -> " in cycle[0].message and "b.yaml -> " in cycle[0].message
    assert cycle[0].node_id == "inner/inner" and cycle[0].file is not None and cycle[0].file.endswith("b.yaml")
    assert cycle[0].line == 8


def test_depth_over_four_is_too_deep(tmp_path: Path) -> None:
    level = """\
version: 1
name: l{i}
inputs:
  x: {{type: text, default: hi}}
nodes:
- id: down
  kind: workflow
  params: {{workflow: l{j}}}
  inputs: {{x: inputs.x}}
outputs: {{answer: down.answer}}
"""
    leaf = "version: 1\nname: leaf\ninputs:\n  x: {type: text}\nnodes: []\noutputs: {answer: inputs.x}\n"
    for i in range(5):
        write(tmp_path, f"l{i}", level.format(i=i, j=i + 1))
    write(tmp_path, "l5", leaf)
    issues = issues_of(tmp_path / "l0.yaml")
    assert [i.code for i in issues] == ["too_deep"]
    assert issues[0].node_id == "down/down/down/down/down"
    assert (tmp_path / "l1.yaml").unlink() is None  # four levels are fine:
    write(tmp_path, "l1", level.format(i=1, j=2).replace("l2", "l5"))
    assert issues_of(tmp_path / "l0.yaml") == []


def test_wire_the_child_lacks_or_of_the_wrong_type_names_the_childs_port(tmp_path: Path) -> None:
    write(tmp_path, "refine", CHILD)
    text = PARENT.replace("  map: draft\n", "").replace(
        "inputs: {draft: sample.candidates, question: inputs.question}",
        "inputs: {draft: sample.candidates, topic: inputs.question}").replace(
        "refine_each.candidates", "sample.candidates")
    issues = issues_of(write(tmp_path, "parent", text))
    found = sorted((i.code, i.line, i.message) for i in issues)
    assert [(code, line) for code, line, _ in found] == [
        ("type_mismatch", line_of(text, "topic: inputs.question")),
        ("type_mismatch", line_of(text, "topic: inputs.question"))]
    assert any("'draft'" in m and "candidates" in m for _, _, m in found)
    assert any("'topic'" in m for _, _, m in found)


def test_map_input_must_receive_a_candidate_set(tmp_path: Path) -> None:
    write(tmp_path, "refine", CHILD)
    text = PARENT.replace("draft: sample.candidates", "draft: inputs.question")
    issues = issues_of(write(tmp_path, "parent", text))
    assert [(i.code, i.node_id) for i in issues] == [("type_mismatch", "refine_each")]
    assert "mapped input 'draft'" in issues[0].message
    text = PARENT.replace("map: draft", "map: drafts")
    issues = issues_of(write(tmp_path, "parent", text))
    assert [i.code for i in issues] == ["type_mismatch", "type_mismatch"]  # and draft now takes text
    assert any(i.line == line_of(text, "map: drafts") and "'drafts'" in i.message for i in issues)


def test_a_problem_inside_the_child_has_the_childs_file_and_line(tmp_path: Path) -> None:
    bad_child = CHILD.replace("max_tokens: 16}\n  inputs: {draft: inputs.draft, question",
                              "max_tokens: -3}\n  inputs: {draft: inputs.draft, question")
    child = write(tmp_path, "refine", bad_child)
    issues = issues_of(write(tmp_path, "parent", PARENT))
    assert len(issues) == 1
    issue = issues[0]
    assert (issue.code, issue.node_id, issue.file, issue.line) == (
        "bad_param", "refine_each/critique", str(child.resolve()), line_of(bad_child, "max_tokens: -3"))
    assert issue.format("parent.yaml").startswith(f"{child.resolve()}:{issue.line}: bad_param: [refine_each/critique]")


def test_model_mapping_names_aliases_on_both_sides(tmp_path: Path) -> None:
    write(tmp_path, "refine", CHILD)
    text = PARENT.replace("params: {workflow: refine}", "params: {workflow: refine, models: {main: big}}")
    issues = issues_of(write(tmp_path, "parent", text))
    assert [i.code for i in issues] == ["unknown_model"] and "'big'" in issues[0].message


def test_a_relative_path_is_relative_to_the_parents_folder(tmp_path: Path) -> None:
    (tmp_path / "parts").mkdir()
    write(tmp_path / "parts", "refine", CHILD)
    text = PARENT.replace("workflow: refine", "workflow: parts/refine.yaml")
    assert issues_of(write(tmp_path, "parent", text), ChildLoader(())) == []


@pytest.mark.parametrize("ref", ["../outside/refine.yaml", "/ABS/refine.yaml"])
def test_share_mode_refuses_absolute_and_escaping_paths(tmp_path: Path, ref: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    write(outside, "refine", CHILD)
    folder = tmp_path / "shared"
    folder.mkdir()
    ref = ref.replace("/ABS", str(outside)) if ref.startswith("/ABS") else ref
    text = PARENT.replace("workflow: refine", f"workflow: {ref}")
    parent = write(folder, "parent", text)
    assert issues_of(parent, ChildLoader((folder,), trusted=True)) == []  # a local user may
    refused = issues_of(parent, ChildLoader((folder,), trusted=False))
    assert [(i.code, i.line) for i in refused] == [("workflow_path_refused", line_of(text, "workflow: "))]


def test_flat_workflows_dump_and_validate_as_before() -> None:
    text = Path("workflows/best_of_n.yaml").read_text(encoding="utf-8")
    wf = load_workflow_text(text)
    assert wf.to_yaml() == text
    assert "map" not in wf.to_yaml()
    assert validate(wf, REGISTRY) == []


def test_map_key_round_trips_in_the_canonical_dump(tmp_path: Path) -> None:
    wf = load_workflow_text(PARENT)
    assert wf.node("refine_each").map == "draft"  # type: ignore[union-attr]
    again = load_workflow_text(wf.to_yaml())
    assert again.to_yaml() == wf.to_yaml() and "  map: draft\n" in wf.to_yaml()


@pytest.mark.parametrize("ref", ["/ABS/refine.yaml", "../outside/refine.yaml", "parts/../../outside/refine.yaml"])
def test_the_share_mode_service_refuses_absolute_and_escaping_child_paths(tmp_path: Path, ref: str) -> None:
    from app.service.studio import StudioService
    from app.share.policy import SharePolicy

    outside = tmp_path / "outside"
    outside.mkdir()
    write(outside, "refine", CHILD)
    folder = tmp_path / "workflows"
    folder.mkdir()
    write(folder, "refine", CHILD)
    service = StudioService(policy=SharePolicy.for_serving("0.0.0.0", model_choices=[]), workflows_dir=folder,
                            examples_dir=None, dry_run=True)
    ref = ref.replace("/ABS", str(outside))
    refused = service.check(load_workflow_text(PARENT.replace("workflow: refine", f"workflow: {ref}")))
    assert [i.code for i in refused] == ["workflow_path_refused"]
    assert service.check(load_workflow_text(PARENT)) == []  # a name from the workflows folder is fine


def test_share_caps_apply_to_the_children(tmp_path: Path) -> None:
    from app.service.studio import StudioService
    from app.share.policy import SharePolicy

    write(tmp_path, "refine", CHILD.replace("version: 1\n", "version: 1\nmodels:\n  main: {source: bundled, "
                                            "options: {lora_path: /x}}\n", 1))
    service = StudioService(policy=SharePolicy.for_serving("0.0.0.0", model_choices=[]), workflows_dir=tmp_path,
                            examples_dir=None, dry_run=True)
    issues = service.check(load_workflow_text(PARENT))
    assert [(i.code, i.node_id) for i in issues] == [("model_option_refused", "refine_each")]
    assert issues[0].file is not None and issues[0].file.endswith("refine.yaml")


def test_mapped_output_must_be_a_child_output_and_map_belongs_to_workflow_nodes(tmp_path: Path) -> None:
    write(tmp_path, "refine", CHILD)
    text = PARENT.replace("params: {workflow: refine}", "params: {workflow: refine, output: revised}")
    issues = issues_of(write(tmp_path, "parent", text))
    assert [(i.code, i.line) for i in issues] == [("bad_param", line_of(text, "output: revised"))]
    assert "'revised'" in issues[0].message and "answer, critique" in issues[0].hint
    text = PARENT.replace("  kind: voter\n", "  kind: voter\n  map: candidates\n")
    issues = issues_of(write(tmp_path, "parent", text))
    assert [(i.code, i.node_id, i.line) for i in issues] == [("unknown_key", "pick", line_of(text, "map: candidates"))]


def test_a_workflow_from_a_link_finds_children_by_name_only(tmp_path: Path) -> None:
    """Locally a workflow may name a child by any path; one from a link or an upload (not trusted) may not."""
    from app.service.studio import StudioService

    outside = tmp_path / "outside"
    outside.mkdir()
    write(outside, "refine", CHILD)
    folder = tmp_path / "workflows"
    folder.mkdir()
    service = StudioService(workflows_dir=folder, examples_dir=None, dry_run=True)
    data = load_workflow_text(PARENT.replace("workflow: refine", f"workflow: {outside / 'refine.yaml'}")).to_dict()
    with pytest.raises(UserError, match="workflow_path_refused"):
        service.start_run(data, trusted=False)
    started = service.start_run(data, trusted=True)
    assert service.wait_run(started["run_id"], timeout=30)["status"] == "succeeded"
