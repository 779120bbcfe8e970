"""The search strategies' and thinking budgets' params are offered as sweep axes (only where their strategy or
think mode is in effect), and an evaluation sweeps think_budget with tokens counted per point (fake backend)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.eval.sweep import apply_point, check_axes, numeric_params, parse_sweep
from app.workflow.spec import load_workflow
from nodes.registry import default_registry

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = default_registry()


@pytest.mark.parametrize("name,node,shown,hidden", [
    ("dvts", "search", {"beam_width", "expand_k", "subtrees"}, {"particles", "simulations", "max_expansions"}),
    ("particle_filter", "search", {"particles", "resample_temperature"}, {"subtrees", "simulations", "beam_width"}),
    ("mcts", "search", {"simulations", "c_explore", "expand_k"}, {"particles", "subtrees", "beam_width"}),
    ("thinking_budget", "think", {"think_budget", "think_min", "n"}, {"batch_size"}),
])
def test_strategy_params_are_sweep_axes_where_in_effect(name: str, node: str, shown: set[str],
                                                        hidden: set[str]) -> None:
    wf = load_workflow(ROOT / "workflows" / f"{name}.yaml")
    offered = {p for n, p, _ in numeric_params(wf, REGISTRY) if n == node}
    assert shown <= offered and not hidden & offered
    axis = parse_sweep(f"{node}.{sorted(shown)[0]}=1,2")
    assert check_axes(wf, [axis], REGISTRY) == []


def test_think_params_are_offered_only_while_thinking() -> None:
    wf = load_workflow(ROOT / "workflows" / "thinking_budget.yaml")
    off = apply_point(wf, {"think.think": "off"})
    assert not {"think_budget", "think_min"} & {p for _, p, _ in numeric_params(off, REGISTRY)}


def test_an_evaluation_sweeps_think_budget_and_costs_each_point(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "eval", str(ROOT / "workflows" / "thinking_budget.yaml"), "--data",
         "arithmetic", "--metric", "number", "--limit", "2", "--sweep", "think.think_budget=8,32", "--dry-run",
         "--json", "-q", "--db", str(tmp_path / "t.db")], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    points = {p["params"]["think.think_budget"]: p for p in json.loads(out.stdout)["points"]}
    assert set(points) == {8, 32}
    assert all(p["total"] == 2 and p["cost_tokens"] > 0 for p in points.values())
