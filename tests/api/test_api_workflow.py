"""metagen.load / Workflow: loading, checking as `metagen validate` does, copies with changed params, saving."""

from __future__ import annotations

from pathlib import Path

import pytest

import metagen
from app.cli.main import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
SC = ROOT / "workflows" / "self_consistency.yaml"
FOUR_PROBLEMS = ROOT / "tests" / "resources" / "four_problems.yaml"


def test_load_from_path_text_and_example_name_give_the_same_workflow() -> None:
    by_path = metagen.load(SC)
    assert metagen.load(str(SC)) == by_path
    assert metagen.load(SC.read_text(encoding="utf-8")) == by_path
    assert metagen.load("self_consistency") == by_path
    assert sorted(by_path.inputs) == ["question"] and sorted(by_path.outputs) == ["answer", "votes"]
    assert [n.id for n in by_path.nodes] == ["think", "vote"]
    assert by_path.name == "self-consistency"


def test_workflow_error_lists_every_issue_as_metagen_validate_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["validate", str(FOUR_PROBLEMS)]) == 2
    printed = capsys.readouterr().err.strip().splitlines()
    with pytest.raises(metagen.WorkflowError) as caught:
        metagen.load(FOUR_PROBLEMS)
    assert str(caught.value).splitlines() == printed
    assert {"cycle", "unknown_kind", "unknown_ref", "bad_param"} <= {i.code for i in caught.value.issues}
    assert all(i.line for i in caught.value.issues)
    assert isinstance(caught.value, ValueError)


def test_yaml_text_errors_and_missing_files_raise_workflow_error() -> None:
    with pytest.raises(metagen.WorkflowError) as caught:
        metagen.load("version: 1\nnodes: [\n")
    assert caught.value.issues[0].code == "yaml_syntax"
    with pytest.raises(metagen.WorkflowError) as missing:
        metagen.load("no/such/workflow.yaml")
    assert missing.value.issues[0].code == "not_found"
    with pytest.raises(metagen.WorkflowError, match="not_found"):
        metagen.load("no_such_example")


def test_from_dict_round_trips_and_checks() -> None:
    wf = metagen.load("self_consistency")
    assert metagen.Workflow.from_dict(wf.to_dict()) == wf
    assert metagen.load(wf.to_yaml()) == wf
    broken = wf.to_dict()
    broken["outputs"]["answer"] = "nowhere.answer"
    with pytest.raises(metagen.WorkflowError, match="unknown_ref"):
        metagen.Workflow.from_dict(broken)


def test_with_params_returns_a_changed_copy() -> None:
    wf = metagen.load("self_consistency")
    changed = wf.with_params({"think.n": 16, "think.temperature": 0.5})
    assert changed.nodes[0].params["n"] == 16 and changed.nodes[0].params["temperature"] == 0.5
    assert wf.nodes[0].params["n"] == 8, "the original is untouched"
    assert changed != wf and changed.name == wf.name


@pytest.mark.parametrize(("params", "named"), [
    ({"nope.n": 4}, "nope"),
    ({"think.nope": 4}, "nope"),
    ({"think.n": 0}, "think.n"),
    ({"think": 4}, "node.param"),
])
def test_with_params_refuses_unknown_nodes_params_and_values(params: dict[str, object], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        metagen.load("self_consistency").with_params(params)


def test_with_params_needs_a_dict() -> None:
    with pytest.raises(ValueError, match="params"):
        metagen.load("self_consistency").with_params([("think.n", 4)])  # type: ignore[arg-type]


def test_save_writes_the_canonical_yaml(tmp_path: Path) -> None:
    wf = metagen.load("self_consistency").with_params({"think.n": 4})
    path = wf.save(tmp_path / "sc4.yaml")
    assert path.read_text(encoding="utf-8") == wf.to_yaml()
    assert metagen.load(path) == wf


def test_validate_returns_issues_and_none_for_a_clean_workflow() -> None:
    assert [i for i in metagen.load("self_consistency").validate() if i.severity == "error"] == []


@pytest.mark.parametrize("bad", [None, 3, ["a"], b"version: 1"])
def test_load_refuses_other_types_naming_the_argument(bad: object) -> None:
    with pytest.raises(TypeError, match="source"):
        metagen.load(bad)  # type: ignore[arg-type]


def test_from_dict_and_save_refuse_other_types() -> None:
    with pytest.raises(TypeError, match="data"):
        metagen.Workflow.from_dict("version: 1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="path"):
        metagen.load("self_consistency").save(3)  # type: ignore[arg-type]


def test_html_display_draws_the_graph_offline() -> None:
    html = metagen.load("self_consistency")._repr_html_()
    assert "<svg" in html and "think" in html and "vote" in html and "out · answer" in html
    assert "<details><summary>YAML</summary>" in html
    assert "http" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_the_public_names_are_exported_and_documented() -> None:
    for name in metagen.__all__:
        obj = getattr(metagen, name)
        if callable(obj) and name not in ("Event", "Budget", "CancelToken", "Issue"):
            assert (obj.__doc__ and "Example" in obj.__doc__) or name == "Stats", name
    assert isinstance(metagen.__version__, str) and metagen.__version__
    assert (ROOT / "metagen" / "py.typed").is_file()
