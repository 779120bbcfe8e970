"""A baseline names a point by its label, its workflow's `name:`, or its file name (with or without `.yaml`), the
same in the CLI (`--baseline`, `eval show`) and in the service (the Evaluate tab), issue 37, 2.2: the tab wanted
`chain_of_thought`, the CLI `chain-of-thought`, and each refused the other."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from app.cli.main import main
from app.eval.baseline import plan_points, resolve_baseline, workflow_names
from app.service.errors import UserError
from app.service.studio import StudioService
from tests.studio_fixtures import studio_service

ROOT = Path(__file__).resolve().parents[2]
SC = ROOT / "workflows" / "self_consistency.yaml"
COT = ROOT / "workflows" / "chain_of_thought.yaml"
COT_FORMS = ["chain-of-thought", "chain_of_thought", "chain_of_thought.yaml"]
"""Its YAML `name:`, its file's stem (the tab's name for a saved workflow), its file name."""
SWEPT = "self-consistency · think.n=3"
SWEPT_FORMS = [SWEPT, "self_consistency · think.n=3"]
"""A swept point's label, and the same point by its file's stem."""


def _data(tmp_path: Path) -> str:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"question": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n"
                            for i in range(2)), encoding="utf-8")
    return str(path)


def test_the_names_of_a_workflow() -> None:
    assert workflow_names("chain-of-thought", "workflows/chain_of_thought.yaml", "chain-of-thought") == [
        "chain-of-thought", "chain_of_thought.yaml", "chain_of_thought"]
    assert workflow_names("chain_of_thought", "chain_of_thought", "chain-of-thought") == [
        "chain_of_thought", "chain-of-thought"]  # the tab's: a name, not a file


def test_a_name_of_several_points_and_an_unknown_name_say_which_points_there_are() -> None:
    points = [{"label": "sc · n=1", "workflow": "sc", "params": {"n": 1}, "names": ["sc", "self_consistency"]},
              {"label": "sc · n=3", "workflow": "sc", "params": {"n": 3}, "names": ["sc", "self_consistency"]}]
    assert resolve_baseline("self_consistency · n=3", points) == "sc · n=3"
    with pytest.raises(ValueError, match="has 2 sweep points"):
        resolve_baseline("self_consistency", points)
    with pytest.raises(ValueError, match=r"no single point 'nope'.*sc · n=1; sc · n=3"):
        resolve_baseline("nope", points)


@pytest.mark.parametrize("baseline", COT_FORMS)
def test_the_cli_takes_each_form(tmp_path: Path, capsys: pytest.CaptureFixture[str], baseline: str) -> None:
    db = str(tmp_path / "t.db")
    code = main(["eval", str(COT), str(SC), "--data", _data(tmp_path), "--metric", "number", "--dry-run",
                 "--db", db, "--json", "--baseline", baseline])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and [c["b"] for c in out["comparisons"]] == ["chain-of-thought"]
    assert main(["eval", "list", "--db", db, "--json"]) == 0
    eval_id = json.loads(capsys.readouterr().out)[0]["id"]
    for other in [*COT_FORMS, "nope"]:  # `eval show` resolves a baseline against the recorded workflows
        code = main(["eval", "show", eval_id, "--db", db, "--json", "--baseline", other])
        captured = capsys.readouterr()
        if other == "nope":
            assert code == 2 and "--baseline: no single point 'nope'" in captured.err
        else:
            assert code == 0 and [c["b"] for c in json.loads(captured.out)["comparisons"]] == ["chain-of-thought"]


@pytest.mark.parametrize("baseline", SWEPT_FORMS)
def test_the_cli_takes_a_swept_points_label_by_either_name(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          baseline: str) -> None:
    code = main(["eval", str(COT), str(SC), "--data", _data(tmp_path), "--metric", "number", "--dry-run",
                 "--db", str(tmp_path / "t.db"), "--json", "--sweep", "think.n=1,3", "--baseline", baseline])
    assert code == 0
    assert {c["b"] for c in json.loads(capsys.readouterr().out)["comparisons"]} == {SWEPT}


def _request(service: StudioService, tmp_path: Path, baseline: str, sweep: bool = False) -> dict:
    """The Evaluate tab's request: two saved workflows by their names in the folder, an uploaded dataset."""
    service.evaluations.upload_dataset("d.jsonl", Path(_data(tmp_path)).read_bytes())
    return {"workflows": [{"name": "chain_of_thought", "yaml": COT.read_text(encoding="utf-8")},
                          {"name": "self_consistency", "yaml": SC.read_text(encoding="utf-8")}],
            "dataset": "d.jsonl", "metric": "number", "baseline": baseline,
            "sweeps": ["think.n=1,3"] if sweep else []}


@pytest.mark.parametrize("baseline", COT_FORMS)
def test_the_service_takes_each_form(tmp_path: Path, baseline: str) -> None:
    service = studio_service(tmp_path)
    plan = service.evaluations.plan(_request(service, tmp_path, baseline))
    assert resolve_baseline(plan.baseline, plan_points(plan.workflows)) == "chain_of_thought"  # the tab's label
    service.close()


@pytest.mark.parametrize("baseline", SWEPT_FORMS)
def test_the_service_takes_a_swept_points_label_by_either_name(tmp_path: Path, baseline: str) -> None:
    service = studio_service(tmp_path)
    plan = service.evaluations.plan(_request(service, tmp_path, baseline, sweep=True))
    assert resolve_baseline(plan.baseline, plan_points(plan.workflows)) == "self_consistency · think.n=3"
    with pytest.raises(UserError, match="has 2 sweep points"):
        service.evaluations.plan(_request(service, tmp_path, "self-consistency", sweep=True))
    service.close()


def test_the_service_compares_with_the_baseline_given_by_its_yaml_name(tmp_path: Path) -> None:
    """Through the evaluation and its summary, as the Evaluate tab shows it."""
    service = studio_service(tmp_path)
    status = service.evaluations.start(_request(service, tmp_path, "chain-of-thought"))
    deadline = time.monotonic() + 60
    while status["running"]:
        assert time.monotonic() < deadline, "the evaluation did not finish"
        time.sleep(0.2)
        status = service.evaluations.status(status["eval_id"])
    summary = service.evaluations.result(status["eval_id"])["summary"]
    assert summary["status"] == "succeeded"
    assert [c["b"] for c in summary["comparisons"]] == ["chain_of_thought"]
    service.close()
