"""Compute sweeps on the self-consistency example: parsing axes, the grid, checks against node kinds, applying."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.eval.sweep import SweepAxis, SweepError, apply_point, check_axes, grid, numeric_params, parse_sweep
from app.workflow.spec import Workflow, load_workflow
from nodes.registry import NodeRegistry, default_registry

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def workflow() -> Workflow:
    return load_workflow(ROOT / "workflows" / "self_consistency.yaml")


@pytest.fixture(scope="module")
def registry() -> NodeRegistry:
    return default_registry()


def test_parse_sweep_reads_values_as_yaml() -> None:
    assert parse_sweep("think.n=1,2,4") == SweepAxis("think", "n", (1, 2, 4))
    axis = parse_sweep(" think.temperature = 0.2, 0.7 ,1.0,1e-3 ")
    assert axis.values == (0.2, 0.7, 1.0, 0.001) and all(isinstance(v, float) for v in axis.values)
    assert parse_sweep("vote.mbr_weighted=true,false").values == (True, False)
    assert parse_sweep("think.adaptive=off,majority").values == ("off", "majority")
    assert parse_sweep("my-node_2.n=3").node == "my-node_2"
    assert parse_sweep("think.n=1,true").values == (1, True)  # 1 == True in Python, but not a duplicate here


@pytest.mark.parametrize(("text", "words"), [
    ("think.n", "NODE.PARAM="),
    ("thinkn=1,2", "NODE.PARAM="),
    ("think.n=", "no values"),
    ("think.n=1,,2", "empty value"),
    ("think.n=1,2,", "empty value"),
    ("think.n=2,4,2", "twice"),
    ("think.n=" + ",".join(str(i) for i in range(65)), "at most 64"),
    ("9think.n=1", "not a node id"),
    ("think.2n=1", "not a param name"),
    ("think.temperature=.nan", "finite"),
    ("think.n=[1, 2]", "cannot read"),
    ("think.n=null", "not a number"),
])
def test_parse_sweep_refuses(text: str, words: str) -> None:
    with pytest.raises(SweepError, match=words.replace(".", r"\.")):
        parse_sweep(text)


def test_grid_is_the_product_in_axis_order() -> None:
    assert grid([]) == [{}]
    points = grid([parse_sweep("think.n=1,2"), parse_sweep("think.temperature=0.3,0.7,1.0")])
    assert len(points) == 6
    assert points[0] == {"think.n": 1, "think.temperature": 0.3}
    assert points[1] == {"think.n": 1, "think.temperature": 0.7}
    assert points[-1] == {"think.n": 2, "think.temperature": 1.0}
    assert list(points[0]) == ["think.n", "think.temperature"]


def test_grid_refuses_too_many_points_and_repeated_axes() -> None:
    def axis(name: str) -> SweepAxis:
        return SweepAxis("think", name, tuple(range(1, 17)))

    assert len(grid([axis("n"), axis("batch_size")])) == 256
    with pytest.raises(SweepError, match=r"512 points \(16 x 16 x 2\); at most 256"):
        grid([axis("n"), axis("batch_size"), SweepAxis("think", "min_samples", (1, 2))])
    with pytest.raises(SweepError, match="swept twice"):
        grid([parse_sweep("think.n=1,2"), parse_sweep("think.n=4")])


def test_check_axes(workflow: Workflow, registry: NodeRegistry) -> None:
    good = [parse_sweep("think.n=1,2,4,8"), parse_sweep("think.temperature=0,0.7,1.5"),
            parse_sweep("vote.method=majority,weighted")]
    assert check_axes(workflow, good, registry) == []
    problems = check_axes(workflow, [parse_sweep("thunk.n=1")], registry)
    assert len(problems) == 1 and "no node 'thunk'" in problems[0] and "think, vote" in problems[0]
    problems = check_axes(workflow, [parse_sweep("think.samples=1")], registry)
    assert len(problems) == 1 and "no param 'samples'" in problems[0] and "n, " in problems[0]
    problems = check_axes(workflow, [parse_sweep("think.n=0,1.5,4,300")], registry)
    assert len(problems) == 3
    assert "0" in problems[0] and ">= 1" in problems[0]
    assert "integer" in problems[1] and "<= 256" in problems[2]
    problems = check_axes(workflow, [parse_sweep("think.temperature=hot"), parse_sweep("vote.method=best")],
                          registry)
    assert len(problems) == 2 and "number" in problems[0] and "one of" in problems[1]


def test_apply_point_copies(workflow: Workflow) -> None:
    before = workflow.to_yaml()
    changed = apply_point(workflow, {"think.n": 2, "think.temperature": 1.0})
    assert changed is not workflow
    assert changed.node("think").params["n"] == 2 and changed.node("think").params["temperature"] == 1.0
    assert workflow.node("think").params["n"] == 8 and workflow.to_yaml() == before
    assert changed.semantic_hash() != workflow.semantic_hash()
    assert apply_point(workflow, {}).to_yaml() == before
    with pytest.raises(SweepError, match="no node 'ghost'"):
        apply_point(workflow, {"ghost.n": 1})


def test_numeric_params(workflow: Workflow, registry: NodeRegistry) -> None:
    found = numeric_params(workflow, registry)
    assert ("think", "n", 8) in found and ("think", "temperature", 0.7) in found
    assert ("think", "batch_size", 4) in found  # adaptive: majority shows it
    assert all(isinstance(value, int | float) for _, _, value in found)
    assert [p for n, p, _ in found if n == "vote"] == []  # majority voting has no numeric knob in effect
    off = numeric_params(apply_point(workflow, {"think.adaptive": "off"}), registry)
    assert ("think", "n", 8) in off and not any(p == "batch_size" for _, p, _ in off)
