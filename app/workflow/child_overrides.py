"""A workflow node's `set` param: child node params overridden for this node only ({CHILD.param: value}, a deeper
child as CHILD/GRANDCHILD.param), applied to a copy of the loaded child before it is checked and run."""

from __future__ import annotations

import copy
from typing import Any

from app.workflow.spec import Workflow

SET_PARAM = "set"


def split_target(key: str) -> tuple[str, str, str] | None:
    """`a/b.p` -> ("a", "b.p", ""): the first node and the rest for the child; `b.p` -> ("b", "", "p")."""
    head, slash, rest = key.partition("/")
    if slash:
        return (head, rest, "") if head and rest else None
    node, dot, param = key.partition(".")
    return (node, "", param) if node and dot and param else None


def override_problem(child: Workflow, key: str, kinds: dict[str, str]) -> str | None:
    """Why `key` cannot be set on `child` (None when it can): no such node, or a path through a non-workflow
    node. `kinds` maps the child's node ids to their kinds."""
    target = split_target(key)
    if target is None:
        return f"cannot read {key!r}: write CHILD_NODE.param (or CHILD/GRANDCHILD.param)"
    node, rest, _ = target
    if node not in kinds:
        return f"the child workflow {child.name!r} has no node {node!r} (its nodes: {', '.join(kinds)})"
    if rest and kinds[node] != "workflow":
        return f"{node!r} in the child workflow {child.name!r} is a {kinds[node]} node, not a workflow node"
    return None


def apply_overrides(child: Workflow, overrides: dict[str, Any] | None) -> tuple[Workflow, list[str]]:
    """(a copy of `child` with the overrides set, the problems of those that cannot be); the child itself (a
    cached, shared object) is never changed."""
    if not overrides:
        return child, []
    copied = copy.deepcopy(child)
    kinds = {n.id: n.kind for n in copied.nodes}
    problems = []
    for key, value in overrides.items():
        problem = override_problem(copied, str(key), kinds)
        if problem:
            problems.append(problem)
            continue
        node_id, rest, param = split_target(str(key))  # type: ignore[misc]
        node = copied.node(node_id)
        assert node is not None
        if rest:  # a grandchild: the inner workflow node carries it on
            inner = dict(node.params.get(SET_PARAM) or {})
            inner[rest] = copy.deepcopy(value)
            node.params[SET_PARAM] = inner
        else:
            node.params[param] = copy.deepcopy(value)
    return copied, problems
