"""Grid points that validate: a param whose cross-param check ties it to the compute axis (deepconf's min_samples
below n, diverse beam's diverse_groups dividing n) is scaled with the axis, to the value nearest its proportional
one that the node's own checks accept; found from the node kind's `validate_params`, with no per-example table."""

from __future__ import annotations

import logging
from typing import Any

from app.workflow.spec import Workflow
from nodes.base import NodeKind
from nodes.registry import NodeRegistry

log = logging.getLogger(__name__)

SEARCH_LIMIT = 1024
"""At most this many values of a coupled param are tried (an int param's range; wider ones are cut around it)."""


def fit_points(wf: Workflow, points: list[dict[str, Any]], registry: NodeRegistry) -> list[dict[str, Any]]:
    """The points, each with the params coupled to its axis added at values its node accepts.

    A param is coupled when the node's cross-param check names it at some grid point; it is then scaled at every
    point (not only at the failing ones), so the grid keeps one ratio, e.g. deepconf's n=16, min_samples=4 gives
    n=8 with 2 and n=4 with 1. A point no value repairs is kept as it is (validation then skips it, with why)."""
    out = []
    for point in points:
        fitted = dict(point)
        for key, value in point.items():
            fitted.update(_fit_axis(wf, points, key, value, registry))
        out.append(fitted)
    return out


def _axis_node(wf: Workflow, key: str, registry: NodeRegistry) -> tuple[Any, type[NodeKind], str] | None:
    node_id, _, param = key.partition(".")
    if "/" in node_id or not param:
        return None  # a sub-workflow's param: its child's checks are not at hand here
    node = wf.node(node_id)
    cls = registry.get(node.kind) if node is not None else None
    return None if cls is None else (node, cls, param)


def _fit_axis(wf: Workflow, points: list[dict[str, Any]], key: str, value: Any,
              registry: NodeRegistry) -> dict[str, Any]:
    """{NODE.PARAM: value} of the params of the axis's node coupled to it, at this axis value."""
    found = _axis_node(wf, key, registry)
    if found is None or not isinstance(value, int) or isinstance(value, bool):
        return {}
    node, cls, axis = found
    base = cls.resolve_params(node.params)
    coupled = sorted({name for p in points for name in _broken(cls, {**node.params, axis: p.get(key)}, axis)
                      if not any(f"{node.id}.{name}" in q for q in points)})
    given = {**node.params, axis: value}
    out: dict[str, Any] = {}
    for name in coupled:
        ratio = value / base[axis] if isinstance(base.get(axis), int) and base[axis] > 0 else 1.0
        fitted = _nearest_valid(cls, given, name, base.get(name), ratio)
        if fitted is None:
            log.info("tune grid: no value of %s.%s validates with %s=%s", node.id, name, axis, value)
            continue
        given[name] = fitted
        out[f"{node.id}.{name}"] = fitted
    return out


def _broken(cls: type[NodeKind], params: dict[str, Any], axis: str) -> set[str]:
    """The int params other than the axis that the node's cross-param checks name with these params."""
    named = {name for name, _ in cls.validate_params(cls.resolve_params(params))}
    return {name for name in named - {axis} if (p := cls.param(name)) is not None and p.type == "int"}


def _nearest_valid(cls: type[NodeKind], params: dict[str, Any], name: str, original: Any,
                   ratio: float) -> int | None:
    """The value of `name` nearest original * ratio (ties: the smaller) that its node's checks accept."""
    param = cls.param(name)
    if param is None or not isinstance(original, int):
        return None
    target = original * ratio
    low = int(param.min if param.min is not None else 1)
    high = int(param.max if param.max is not None else max(low, round(target)) + SEARCH_LIMIT)
    centre = min(max(round(target), low), high)
    low, high = max(low, centre - SEARCH_LIMIT // 2), min(high, centre + SEARCH_LIMIT // 2)
    for candidate in sorted(range(low, high + 1), key=lambda v: (abs(v - target), v)):
        if name not in _broken(cls, {**params, name: candidate}, ""):
            return candidate
    return None
