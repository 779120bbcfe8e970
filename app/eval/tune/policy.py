"""The adaptive policy as files: the difficulty probe (k short samples of the baseline's prompt and a majority vote,
whose agreement is the score), the policy workflow (the probe, then a `route` node over one branch per bin) and
its branch workflows written beside it, each with a provenance block."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from app.eval.tune.writer import BRANCH_ROLE, POLICY_ROLE, write_recommended
from app.workflow.spec import load_workflow_text

PROBE_SAMPLES = 4
"""k: the probe's samples per item."""
PROBE_MAX_TOKENS = 64
"""The most tokens of one probe sample (the baseline's own cap when lower)."""
PROBE_TEMPERATURE = 0.7
PROBE_NODE, PROBE_VOTE, ROUTE_NODE = "probe", "probe_vote", "route"
SCORE_OUTPUT = "agreement"
GENERATING_KINDS = ("generator", "sampler")
VOTE_KEYS = ("extract", "normalize")


def _data(text: str) -> dict[str, Any]:
    return load_workflow_text(text).to_dict()


def probe_nodes(baseline_yaml: str, voter_params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The probe's nodes: a sampler drawing k short samples of the baseline's first prompt (its inputs wired as
    the baseline wires them) and a majority voter (with a candidate's extract / normalize when given)."""
    base = _data(baseline_yaml)
    first = next((n for n in base.get("nodes", []) if n.get("kind") in GENERATING_KINDS), None)
    if first is None:
        raise ValueError("the baseline has no generator to take the probe's prompt from")
    params = first.get("params") or {}
    cap = params.get("max_tokens")
    sampler = {"prompt": params.get("prompt", ""), "n": PROBE_SAMPLES, "temperature": PROBE_TEMPERATURE,
               "max_tokens": min(cap, PROBE_MAX_TOKENS) if isinstance(cap, int) else PROBE_MAX_TOKENS}
    node: dict[str, Any] = {"id": PROBE_NODE, "kind": "sampler", "params": sampler,
                            "inputs": dict(first.get("inputs") or {})}
    if first.get("model"):
        node["model"] = first["model"]
    vote = {"method": "majority", **{k: v for k, v in (voter_params or {}).items() if k in VOTE_KEYS}}
    return [node, {"id": PROBE_VOTE, "kind": "voter", "params": vote,
                   "inputs": {"candidates": f"{PROBE_NODE}.candidates"}}]


def probe_workflow(baseline_yaml: str, voter_params: dict[str, Any] | None = None) -> str:
    """The probe alone (run on dev to fix the bins): the baseline's models and inputs, the probe's nodes, and its
    vote as the `agreement` output (the route node reads the same vote)."""
    base = _data(baseline_yaml)
    data = {"version": 1, "name": "difficulty-probe", "models": base.get("models", {}),
            "inputs": base.get("inputs", {}), "nodes": probe_nodes(baseline_yaml, voter_params),
            "outputs": {SCORE_OUTPUT: f"{PROBE_VOTE}.result", "answer": f"{PROBE_VOTE}.answer"}}
    return load_workflow_text(yaml.safe_dump(data, sort_keys=False)).to_yaml()


def branch_yaml(candidate_yaml: str, graded: str, output: str) -> str:
    """A candidate as a branch: its graded output kept alone, under the name `output` (branches must agree)."""
    data = _data(candidate_yaml)
    data["outputs"] = {output: data.get("outputs", {})[graded]}
    data.pop("layout", None)
    return load_workflow_text(yaml.safe_dump(data, sort_keys=False)).to_yaml()


def policy_yaml(baseline_yaml: str, bins: list[float], branches: list[str], output: str,
                voter_params: dict[str, Any] | None = None) -> str:
    """The policy workflow: the probe, then a route node over `branches` (workflow names beside it) on the
    baseline's inputs; its `output` is the branch's, and `branch` / `difficulty` say what was chosen and why."""
    base = _data(baseline_yaml)
    inputs = {name: f"inputs.{name}" for name in base.get("inputs", {})}
    route = {"id": ROUTE_NODE, "kind": "route", "params": {"bins": list(bins), "branches": list(branches)},
             "inputs": {"score": f"{PROBE_VOTE}.result", **inputs}}
    data = {"version": 1, "name": "adaptive-policy",
            "description": "A difficulty-adaptive policy written by `metagen tune --adaptive`: a probe of "
                           f"{PROBE_SAMPLES} short samples scores each item by their agreement, and the route runs "
                           "the strategy chosen on dev for that difficulty bin.",
            "models": base.get("models", {}), "inputs": base.get("inputs", {}),
            "nodes": [*probe_nodes(baseline_yaml, voter_params), route],
            "outputs": {output: f"{ROUTE_NODE}.{output}", "branch": f"{ROUTE_NODE}.branch",
                        "difficulty": f"{PROBE_VOTE}.result"}}
    return load_workflow_text(yaml.safe_dump(data, sort_keys=False)).to_yaml()


def write_policy(path: Path, policy: str, branches: dict[str, str], provenance: dict[str, Any]) -> list[Path]:
    """Write the branch files (name -> YAML) beside `path`, then the policy; the paths written, policy first."""
    written = []
    for name, text in branches.items():
        written.append(write_recommended(text, path.parent / f"{name}.yaml",
                                         {**provenance, "role": BRANCH_ROLE + path.stem}, name))
    return [write_recommended(policy, path, {**provenance, "role": POLICY_ROLE}, path.stem), *written]
