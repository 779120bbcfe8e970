"""Sweeping a param inside a sub-workflow (`NODE/CHILD_NODE.param`): the workflow node's `set` param carries it to
the child, bad targets are reported before anything runs, and the child's node runs with each swept value."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from app.cli.main import main
from app.eval.sweep import SweepError, apply_point, parse_sweep
from app.workflow.problems import errors
from app.workflow.spec import load_workflow
from app.workflow.validation import validate
from nodes.registry import default_registry

ROOT = Path(__file__).resolve().parents[2]
BOR = ROOT / "workflows" / "best_of_refined.yaml"


def test_a_child_axis_goes_into_the_workflow_node_set_param() -> None:
    axis = parse_sweep("refine_each/critique.temperature=0.2,0.9")
    assert (axis.node, axis.param, axis.values) == ("refine_each/critique", "temperature", (0.2, 0.9))
    with pytest.raises(SweepError, match="not a node id"):
        parse_sweep("refine_each/9x.temperature=1")
    wf = load_workflow(BOR)
    point = apply_point(wf, {"refine_each/critique.temperature": 0.9})
    assert point.node("refine_each").params["set"] == {"critique.temperature": 0.9}
    assert "set" not in wf.node("refine_each").params  # the original is untouched
    registry = default_registry()
    assert errors(validate(point, registry)) == []
    bad_value = errors(validate(apply_point(wf, {"refine_each/critique.temperature": -1}), registry))
    assert bad_value and "temperature" in bad_value[0].format()
    no_node = errors(validate(apply_point(wf, {"refine_each/nope.temperature": 0.5}), registry))
    assert [i.code for i in no_node] == ["bad_param"] and "no node 'nope'" in no_node[0].message


def test_the_cli_sweeps_a_child_param_and_the_child_runs_with_it(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"question": "What is 1 + 1?", "answer": "2"}) + "\n", encoding="utf-8")
    db = tmp_path / "t.db"
    code = main(["eval", str(BOR), "--data", str(data), "--metric", "contains", "--dry-run", "--db", str(db),
                 "--sweep", "refine_each/critique.temperature=0.25,0.75", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert [p["params"] for p in out["points"]] == [{"refine_each/critique.temperature": 0.25},
                                                    {"refine_each/critique.temperature": 0.75}]
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT params FROM node_runs WHERE node_id LIKE 'refine_each/%/critique'").fetchall()
    temperatures = {json.loads(r[0]).get("temperature") for r in rows}
    assert temperatures == {0.25, 0.75}
    assert main(["eval", str(BOR), "--data", str(data), "--dry-run", "--db", str(db),
                 "--sweep", "drafts/critique.temperature=0.5"]) == 2
    assert "needs a workflow node first" in capsys.readouterr().err
