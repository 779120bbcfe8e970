"""The `workflow` kind: another workflow as one node, run once, or once per candidate of a mapped input.

Its ports are the child's inputs and outputs; validation binds them per node (app/workflow/subworkflows.py) and
the scheduler runs the child inside the parent's run through `NodeContext.run_workflow`.
"""

from __future__ import annotations

import math
from typing import Any

from nodes.base import CANDIDATES, Candidate, CandidateSet, NodeContext, NodeError, NodeKind, Param, Port, format_value

DEFAULT_OUTPUT = "answer"
SCORE_OUTPUT = "score"
"""The child output that, when the child has one, scores each candidate of a mapped node."""


class WorkflowNode(NodeKind):
    """A sub-workflow: its inputs and outputs are the child's; `map` runs it once per candidate."""

    kind = "workflow"
    title = "Workflow"
    category = "workflows"
    description = ("Another workflow as one node: its inputs and outputs are the child's. With `map: INPUT` the "
                   "named input takes a candidate set and the child runs once per candidate (several at once); "
                   "`candidates` then holds one candidate per child run.")
    outputs = (Port("candidates", CANDIDATES, "One candidate per child run (mapped nodes only)"),)
    params = (
        Param("workflow", "str", "", "A workflow of the workflows folder (its file name without .yaml), or a path "
              "relative to this workflow's folder", required=True),
        Param("models", "json", None, "Child model alias -> this workflow's alias, e.g. {main: main}; "
              "unmapped aliases use the child's own models"),
        Param("output", "str", DEFAULT_OUTPUT, "Mapped nodes: the child output whose text becomes each "
              "candidate's text"),
        Param("map", "str", "", "The input that takes a candidate set, the child running once per candidate "
              "(also written `map:` on the node)"),
        Param("set", "json", None, "Child node params set for this node only: {CHILD_NODE.param: value}, a deeper "
              "child as CHILD/GRANDCHILD.param (sweeping NODE/CHILD_NODE.param sets it)"),
    )
    variadic_inputs = True
    """The input ports are the child's inputs, bound per node by validation."""

    @classmethod
    def validate_params(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        overrides = params.get("set")
        if overrides is not None and not (isinstance(overrides, dict) and all(isinstance(k, str) for k in overrides)):
            return [("set", "must map CHILD_NODE.param to a value, e.g. {critique.temperature: 0.2}")]
        models = params.get("models")
        if models is None:
            return []
        if not isinstance(models, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in models.items()):
            return [("models", "must map child model aliases to this workflow's aliases, e.g. {main: main}")]
        return []

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        mapped = params.get("map") or ""
        if not mapped:
            return ctx.run_workflow([inputs], mapped=False)[0]
        drafts = inputs.get(mapped)
        if not isinstance(drafts, CandidateSet):
            raise NodeError(f"the mapped input {mapped!r} must receive a candidate set, got {type(drafts).__name__}")
        runs = [{**inputs, mapped: cand.text} for cand in drafts.candidates]
        results = ctx.run_workflow(runs, mapped=True) if runs else []
        output = params.get("output") or DEFAULT_OUTPUT
        out = CandidateSet(prompt=drafts.prompt, meta={"mapped": mapped, "output": output})
        for i, (cand, result) in enumerate(zip(drafts.candidates, results, strict=True)):
            out.candidates.append(Candidate(
                text=graded_text(result.get(output)), index=i, source=f"{ctx.node_id}/{i}", seed=cand.seed,
                score=_score(result.get(SCORE_OUTPUT)),
                meta={"run": f"{ctx.node_id}/{i}", "from": cand.source, "from_index": cand.index}))
        return {"candidates": out}


def graded_text(value: Any) -> str:
    """A child output as a candidate's text: a candidate set gives its winner (else its first candidate)."""
    if isinstance(value, CandidateSet):
        if not value.candidates:
            return ""
        pick = value.winner if value.winner is not None and 0 <= value.winner < len(value) else 0
        return value.candidates[pick].text
    return "" if value is None else format_value(value)


def _score(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)
