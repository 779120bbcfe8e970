"""Round 7 §2.4: workflow data that never was YAML (the editor's JSON for mg_run, an API body) meets the YAML
parse budget in one bounded pass before anything reads it: a route of 100k branches is refused at once."""

from __future__ import annotations

import pytest

from app.workflow.problems import WorkflowError
from app.workflow.spec import MAX_YAML_NODES, workflow_from_dict

BASE = {"version": 1, "name": "x", "inputs": {"q": {"type": "text", "default": ""}},
        "nodes": [{"id": "g", "kind": "generator", "params": {"prompt": "{q}"}, "inputs": {"q": "inputs.q"}}],
        "outputs": {"a": "g.text"}}


def _route_bomb(branches: int) -> dict:
    node = {"id": "r", "kind": "route", "params": {"bins": [i / branches for i in range(1, branches)],
                                                   "branches": [f"b{i}" for i in range(branches)]}}
    return {**BASE, "nodes": [*BASE["nodes"], node]}


def test_a_route_of_100k_branches_is_refused_before_it_is_read() -> None:
    with pytest.raises(WorkflowError) as info:
        workflow_from_dict(_route_bomb(100_000))
    assert info.value.issues[0].code == "too_large"
    assert f"{MAX_YAML_NODES:,} values" in info.value.issues[0].message


def test_deep_and_long_data_are_refused_and_a_normal_workflow_is_read() -> None:
    deep: dict = {}
    cursor = deep
    for _ in range(150):
        cursor["x"] = {}
        cursor = cursor["x"]
    with pytest.raises(WorkflowError, match="deeper"):
        workflow_from_dict({**BASE, "description": deep})
    with pytest.raises(WorkflowError, match="characters of text"):
        workflow_from_dict({**BASE, "description": "x" * 1_000_001})
    assert workflow_from_dict(BASE).name == "x"
