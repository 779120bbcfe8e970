"""The `route` kind: a difficulty score picks one of several sub-workflows (one per bin of the score), which runs.

Its data inputs and outputs are its branches' (all branches share them; validation binds them per node in
app/workflow/subworkflows.py) and the scheduler runs the chosen branch inside the parent's run through
`NodeContext.run_workflow(..., branch=i)`.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Mapping
from typing import Any

from nodes.base import JSON, NUMBER, CandidateSet, NodeContext, NodeError, NodeKind, Param, Port

SCORE_INPUT = "score"
BRANCH_OUTPUT = "branch"
BIN_OUTPUT = "bin"
ROUTE_EVENT = "route"
"""The trace event naming the score, the bin and the branch that ran."""


class RouteNode(NodeKind):
    """Runs exactly one branch: the one of the bin the score falls in (bin i: bins[i-1] <= score < bins[i])."""

    kind = "route"
    title = "Route"
    category = "workflows"
    description = ("A difficulty-adaptive choice (Snell et al. 2024): a score (a number, or a voter's `result` / "
                   "voted `candidates`, read as the share agreeing with the majority) falls in one of the bins cut "
                   "by `bins` (ascending; a score equal to a cut goes above it), and that bin's sub-workflow of "
                   "`branches` runs on the other inputs. Its outputs are the branch's, plus `branch` and `bin`.")
    inputs = (Port(SCORE_INPUT, JSON, "The difficulty score: a number, or a voter's result / candidates "
                   "(agreement with the majority)"),)
    outputs = (Port(BRANCH_OUTPUT, JSON, "The sub-workflow that ran"),
               Port(BIN_OUTPUT, NUMBER, "The bin the score fell in (0 = below the first cut)"))
    params = (
        Param("bins", "json", None, "Ascending cut points of the score, e.g. [0.5, 0.75]: len(bins) + 1 bins",
              required=True),
        Param("branches", "list", None, "One workflow per bin, lowest bin first (a workflow of the workflows "
              "folder, or a path relative to this workflow's folder)", required=True),
        Param("models", "json", None, "Branch model alias -> this workflow's alias, e.g. {main: main}; unmapped "
              "aliases use the branch's own models"),
    )
    variadic_inputs = True
    """The data inputs are the branches', bound per node by validation."""

    @classmethod
    def validate_params(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        problems = []
        bins, branches = params.get("bins"), params.get("branches")
        bins_problem = bins_problem_of(bins)
        if bins_problem:
            problems.append(("bins", bins_problem))
        elif isinstance(branches, list) and len(branches) != len(bins) + 1:
            problems.append(("branches", f"{len(bins)} cut points make {len(bins) + 1} bins, so name "
                             f"{len(bins) + 1} branches (got {len(branches)})"))
        models = params.get("models")
        if models is not None and not (isinstance(models, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in models.items())):
            problems.append(("models", "must map branch model aliases to this workflow's aliases, e.g. {main: main}"))
        return problems

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        score = score_of(inputs.get(SCORE_INPUT))
        if score is None:
            raise NodeError(f"route needs a number (or a voter's result) as its score, got "
                            f"{type(inputs.get(SCORE_INPUT)).__name__}")
        bins = [float(b) for b in params["bins"]]
        index = bin_of(score, bins)
        branch = str(params["branches"][index])
        ctx.event(ROUTE_EVENT, {"score": score, "bins": bins, "bin": index, "branch": branch})
        given = {k: v for k, v in inputs.items() if k != SCORE_INPUT}
        outputs = ctx.run_workflow([given], mapped=False, branch=index)[0]
        return {**outputs, BRANCH_OUTPUT: branch, BIN_OUTPUT: index}


def bins_problem_of(bins: Any) -> str | None:
    """Why `bins` cannot be a route's cut points, or None."""
    if not isinstance(bins, list):
        return "must be a list of ascending numbers, e.g. [0.5, 0.75]"
    if any(isinstance(b, bool) or not isinstance(b, int | float) or not math.isfinite(b) for b in bins):
        return f"must hold numbers only, got {bins!r}"
    if any(lo >= hi for lo, hi in itertools.pairwise(bins)):
        return f"must be strictly ascending, got {bins!r}"
    return None


def bin_of(score: float, bins: list[float]) -> int:
    """The bin of `score`: how many cut points are at or below it."""
    return bisect.bisect_right(bins, score)


def score_of(value: Any) -> float | None:
    """A route's score from what is wired: a number; a voter's result (its top cluster's share of all samples); a
    voted candidate set (the share of candidates in the winner's cluster)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, CandidateSet):
        return _set_agreement(value)
    if isinstance(value, Mapping) and isinstance(value.get("clusters"), list):
        total = value.get("total")
        counts = [c.get("count") for c in value["clusters"] if isinstance(c, Mapping)]
        if not isinstance(total, int) or total <= 0:
            return None
        return max((c for c in counts if isinstance(c, int | float)), default=0) / total
    return None


def _set_agreement(cset: CandidateSet) -> float | None:
    if not cset.candidates:
        return None
    if cset.winner is None or not 0 <= cset.winner < len(cset.candidates):
        return 0.0
    cluster = cset.candidates[cset.winner].cluster
    if cluster is None:
        return 1.0 / len(cset.candidates)
    return sum(1 for c in cset.candidates if c.cluster == cluster) / len(cset.candidates)
