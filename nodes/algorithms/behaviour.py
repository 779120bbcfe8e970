"""AlphaCode's clustering: programs with identical outputs on the same inputs form a cluster; the largest wins.

Plain functions over lists: `parse_inputs` turns an LLM's text (a JSON list, else one input per line) into
test inputs, and `behaviour_vote` groups candidates by their behaviour signature and picks one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from nodes.algorithms.voting import Cluster, VoteResult

FENCE_LINE = re.compile(r"^\s*```")


def parse_inputs(value: Any, entry_point: str) -> list[str]:
    """Test inputs from a param or an LLM's text: a JSON list, else one non-empty line each (fences dropped).
    With an entry point an input is the call's argument list (`1, [2, 3]`); without, a program's stdin."""
    if value is None:
        return []
    items: Any = value
    if isinstance(value, str):
        text = "\n".join(line for line in value.splitlines() if not FENCE_LINE.match(line)).strip()
        try:
            items = json.loads(text) if text.startswith("[") else None
        except ValueError:
            items = None
        if not isinstance(items, list):
            items = [line.strip() for line in text.splitlines() if line.strip()]
            return items
    if not isinstance(items, list):
        items = [items]
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(item.replace("\\n", "\n") if not entry_point else item)
        elif entry_point and isinstance(item, list):
            out.append(", ".join(repr(v) for v in item))
        else:
            out.append(repr(item) if entry_point else str(item))
    return out


def behaviour_vote(signatures: Sequence[str | None], scores: Sequence[float | None],
                   labels: Sequence[str] | None = None) -> VoteResult:
    """Group candidates by signature (None: it did not run, left out); the largest cluster wins, ties to the
    cluster with the best score; inside it the best-scoring candidate (then the first) is the winner."""
    values = [float("-inf") if s is None else float(s) for s in scores]
    groups: dict[str, list[int]] = {}
    for i, sig in enumerate(signatures):
        if sig is not None:
            groups.setdefault(sig, []).append(i)
    clusters = [Cluster(labels[members[0]] if labels else sig, members, max(values[i] for i in members))
                for sig, members in groups.items()]
    clusters.sort(key=lambda c: (-c.count, -c.weight, c.members[0]))
    no_answer = [i for i, sig in enumerate(signatures) if sig is None]
    if not clusters:
        return VoteResult("behaviour", None, None, [], no_answer, [], "largest cluster, then best score")
    top = clusters[0]
    ties = [c.answer for c in clusters[1:] if c.count == top.count]
    winner = max(top.members, key=lambda i: (values[i], -i))
    return VoteResult("behaviour", top.answer, winner, clusters, no_answer, ties, "largest cluster, then best score",
                      detail={"clusters": len(clusters), "largest": top.count})
