"""Search-tree bookkeeping for step-level search: nodes, beams, the frontier, the chosen path.

A tree node is one step (a piece of text) below its parent; the root (id 0) is the empty solution.
Ranking is by score, highest first, ties to the lower id (the earlier generated), unscored last.
`to_json()` is the "tree" trace payload: {"nodes": [{"id", "parent", "depth", "text", "score", "lead",
"pruned", "chosen", "terminal", "finish"} plus, where a strategy sets them, "subtree" (DVTS), "generation" and
"copies" (particles: the round that drew it, how many particles resampling gave it), "visits", "value" and
"rollout" (MCTS), "branch" (AB-MCTS: "wider" or "deeper")], "chosen_path": [ids root..leaf]}.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class TreeNode:
    id: int
    parent: int | None
    depth: int
    text: str
    score: float | None = None
    lead: str = ""
    """Separator text the model wrote before this step beyond the delimiter (e.g. a blank line)."""
    terminal: bool = False
    """No further expansion: the end marker, the end of generation, or max depth."""
    finish: str = ""
    """Why it is terminal ("end_marker", "eog", "max_depth", "empty", "exhausted") or ""."""
    pruned: bool = False
    chosen: bool = False
    expanded: bool = False
    subtree: int | None = None
    """DVTS: which independent subtree the node belongs to."""
    generation: int | None = None
    """Particle filtering: the resampling round that drew this step."""
    copies: int | None = None
    """Particle filtering: how many of the next round's particles the resampling of its own round gave this node
    (a finished particle resampled again in later rounds keeps this; `pruned` says whether it survived the last)."""
    visits: int | None = None
    """MCTS: simulations that passed through the node."""
    value: float | None = None
    """MCTS: the sum of the rollout values backed up through the node (mean = value / visits)."""
    rollout: bool | None = None
    """MCTS: the step was drawn by a rollout rather than by expanding a selected node."""
    branch: str | None = None
    """AB-MCTS: "wider" (a new child of a node that had children, or of the root) or "deeper" (the first step
    continuing a partial solution)."""


_STRATEGY_FIELDS = ("subtree", "generation", "copies", "visits", "value", "rollout", "branch")
"""Fields only some strategies set: left out of the trace payload while None."""


def rank_key(node: TreeNode) -> tuple[int, float, int]:
    """Sort key: scored before unscored, higher score first, lower id first."""
    return (0 if node.score is not None else 1, -(node.score or 0.0), node.id)


@dataclass
class SearchTree:
    nodes: list[TreeNode] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.nodes:
            self.nodes.append(TreeNode(0, None, 0, ""))

    @property
    def root(self) -> TreeNode:
        return self.nodes[0]

    def add(self, parent: int, text: str, *, terminal: bool = False, finish: str = "", lead: str = "",
            subtree: int | None = None) -> TreeNode:
        node = TreeNode(len(self.nodes), parent, self.nodes[parent].depth + 1, text, terminal=terminal,
                        finish=finish, lead=lead, subtree=subtree)
        self.nodes.append(node)
        self.nodes[parent].expanded = True
        return node

    def children(self, node_id: int) -> list[TreeNode]:
        return [n for n in self.nodes if n.parent == node_id]

    def path(self, node_id: int) -> list[TreeNode]:
        """Nodes from the root's first child down to node_id (the root itself is left out)."""
        out = []
        node: TreeNode | None = self.nodes[node_id]
        while node is not None and node.parent is not None:
            out.append(node)
            node = self.nodes[node.parent]
        return out[::-1]

    def solution(self, node_id: int, delimiter: str) -> str:
        """The partial solution ending at node_id as the model wrote it: its steps joined by the
        delimiter, each preceded by its lead."""
        return "".join((delimiter if i else "") + n.lead + n.text for i, n in enumerate(self.path(node_id)))

    def select(self, candidates: Iterable[TreeNode], width: int) -> list[TreeNode]:
        """Keep the `width` best; mark the others pruned."""
        ranked = sorted(candidates, key=rank_key)
        for node in ranked[width:]:
            node.pruned = True
        return ranked[:width]

    def best(self, candidates: Iterable[TreeNode]) -> TreeNode | None:
        ranked = sorted(candidates, key=rank_key)
        return ranked[0] if ranked else None

    def mark_chosen(self, node_id: int) -> list[int]:
        """Mark the path root..node_id chosen (and not pruned); returns its ids."""
        ids = [0] + [n.id for n in self.path(node_id)]
        for i in ids:
            self.nodes[i].chosen = True
            self.nodes[i].pruned = False
        return ids

    def leaves(self) -> list[TreeNode]:
        parents = {n.parent for n in self.nodes}
        return [n for n in self.nodes if n.id not in parents and n.id != 0]

    def problems(self) -> list[str]:
        """Structural inconsistencies (empty when the tree is sound): for tests and the trace view."""
        out = []
        for n in self.nodes[1:]:
            if n.parent is None or not 0 <= n.parent < n.id:
                out.append(f"node {n.id} has bad parent {n.parent}")
            elif n.depth != self.nodes[n.parent].depth + 1:
                out.append(f"node {n.id} depth {n.depth} != parent depth + 1")
        chosen = [n for n in self.nodes if n.chosen]
        for n in chosen:
            if n.parent is not None and not self.nodes[n.parent].chosen:
                out.append(f"chosen node {n.id} has an unchosen parent")
            if n.pruned:
                out.append(f"chosen node {n.id} is marked pruned")
        if len({n.depth for n in chosen}) != len(chosen):
            out.append("the chosen path branches")
        return out

    def to_json(self) -> dict[str, Any]:
        nodes = []
        for n in self.nodes:
            data = asdict(n)
            data.pop("expanded")
            for key in _STRATEGY_FIELDS:
                if data[key] is None:
                    del data[key]
            nodes.append(data)
        return {"nodes": nodes, "chosen_path": [n.id for n in self.nodes if n.chosen]}


class Frontier:
    """Best-first frontier: pop the highest-scoring node (ties: lower id; unscored last)."""

    def __init__(self) -> None:
        self._heap: list[tuple[tuple[int, float, int], TreeNode]] = []

    def push(self, node: TreeNode) -> None:
        heapq.heappush(self._heap, (rank_key(node), node))

    def pop(self) -> TreeNode:
        return heapq.heappop(self._heap)[1]

    def __len__(self) -> int:
        return len(self._heap)

    def drain(self) -> list[TreeNode]:
        nodes = [item[1] for item in self._heap]
        self._heap.clear()
        return nodes
