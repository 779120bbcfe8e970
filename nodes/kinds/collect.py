"""The `collect` kind: the values wired into it, in wiring order, as one candidate set (answers of several
workflows or methods, for a judge or a voter to pick from)."""

from __future__ import annotations

from typing import Any

from nodes.base import CANDIDATES, Candidate, CandidateSet, NodeContext, NodeKind, Port
from nodes.kinds.workflow import graded_text


class CollectNode(NodeKind):
    """Any number of wired values -> a candidate set, one candidate per input (a set gives its winner)."""

    kind = "collect"
    title = "Collect"
    category = "aggregate"
    description = ("Gather the values wired into it (any names, in order) into one candidate set: one candidate "
                   "per input, named after it; a candidate set gives its winner. Feeds a verifier or voter that "
                   "picks among the answers of several methods or workflows.")
    outputs = (Port("candidates", CANDIDATES, "One candidate per wired input, in wiring order"),)
    variadic_inputs = True

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        out = CandidateSet(meta={"inputs": list(inputs)})
        for i, (name, value) in enumerate(inputs.items()):
            out.candidates.append(Candidate(text=graded_text(value), index=i, source=name, meta={"input": name}))
        return {"candidates": out}
