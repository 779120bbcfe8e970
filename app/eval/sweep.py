"""Compute sweeps: parse `NODE.PARAM=v1,v2` axes, check them against the node kinds, build and apply the grid."""

from __future__ import annotations

import copy
import itertools
import logging
import math
import re
from dataclasses import dataclass
from typing import Any

import yaml

from app.workflow.spec import Workflow
from nodes.base import NODE_ID_RE, NodeKind
from nodes.registry import NodeRegistry

log = logging.getLogger(__name__)

WORKFLOW_KIND = "workflow"
MAX_AXIS_VALUES = 64
MAX_GRID_POINTS = 256
_PARAM_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_NUMBER_TEXT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_NUMERIC_TYPES = ("int", "float")


class SweepError(ValueError):
    """A sweep that cannot be run: bad syntax, too many values or points."""


@dataclass(frozen=True)
class SweepAxis:
    """One swept param: the values `node.param` takes, in order."""

    node: str
    param: str
    values: tuple[Any, ...]

    @property
    def key(self) -> str:
        return f"{self.node}.{self.param}"


def _parse_value(text: str, where: str) -> Any:
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        raise SweepError(f"{where}: cannot read the value {text!r}") from None
    if isinstance(value, str) and _NUMBER_TEXT.fullmatch(value):  # YAML 1.1 reads 1e-3 as a string
        value = float(value)
    if isinstance(value, bool) and text.lower() not in ("true", "false"):  # YAML 1.1: off/no/yes are bools
        value = text
    if value is None or isinstance(value, list | dict):
        raise SweepError(f"{where}: the value {text!r} is not a number, bool or word")
    if isinstance(value, float) and not math.isfinite(value):
        raise SweepError(f"{where}: the value {text!r} is not a finite number")
    return value


def parse_sweep(text: str) -> SweepAxis:
    """`NODE.PARAM=v1,v2,...` -> SweepAxis; each value is read as YAML (1 -> int, 0.7 -> float, true -> bool),
    except that only true/false are bools (`off`, `yes` stay words: they are choice values) and 1e-3 is a float."""
    spec = (text or "").strip()
    target, eq, values_text = spec.partition("=")
    node, dot, param = target.strip().partition(".")
    if not eq or not dot:
        raise SweepError(f"cannot read sweep {text!r}: write NODE.PARAM=v1,v2,... (e.g. think.n=1,2,4,8)")
    node, param = node.strip(), param.strip()
    bad = [part for part in node.split("/") if not NODE_ID_RE.fullmatch(part)]
    if bad:
        raise SweepError(f"sweep {text!r}: {bad[0]!r} is not a node id (letters, digits, _ and -, "
                         "starting with a letter or _; a child workflow's node as NODE/CHILD_NODE)")
    if not _PARAM_RE.fullmatch(param):
        raise SweepError(f"sweep {text!r}: {param!r} is not a param name")
    where = f"sweep {node}.{param}"
    items = [item.strip() for item in values_text.split(",")]
    if not values_text.strip():
        raise SweepError(f"{where}: no values; write {node}.{param}=v1,v2,...")
    if any(not item for item in items):
        raise SweepError(f"{where}: an empty value in {values_text.strip()!r} (a stray comma?)")
    if len(items) > MAX_AXIS_VALUES:
        raise SweepError(f"{where}: {len(items)} values; at most {MAX_AXIS_VALUES}")
    values: list[Any] = []
    seen: set[tuple[bool, Any]] = set()
    for item in items:
        value = _parse_value(item, where)
        key = (isinstance(value, bool), value)  # True == 1 in Python, but not as a param value
        if key in seen:
            raise SweepError(f"{where}: the value {item!r} is given twice")
        seen.add(key)
        values.append(value)
    return SweepAxis(node=node, param=param, values=tuple(values))


def grid(axes: list[SweepAxis]) -> list[dict[str, Any]]:
    """Every combination of the axes' values, as {"node.param": value, ...} in axis order ([{}] for none)."""
    keys = [axis.key for axis in axes]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise SweepError(f"{', '.join(duplicates)} swept twice; give each param one axis")
    size = math.prod(len(axis.values) for axis in axes)
    if size > MAX_GRID_POINTS:
        shape = " x ".join(str(len(axis.values)) for axis in axes)
        raise SweepError(f"the sweep has {size} points ({shape}); at most {MAX_GRID_POINTS}")
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(axis.values for axis in axes))]


def check_axes(workflow: Workflow, axes: list[SweepAxis], registry: NodeRegistry) -> list[str]:
    """Problems with sweeping these axes on this workflow (empty when the sweep can run)."""
    problems: list[str] = []
    node_ids = [n.id for n in workflow.nodes]
    seen: set[str] = set()
    for axis in axes:
        where = f"sweep {axis.key}"
        if axis.key in seen:
            problems.append(f"{where}: swept twice; give each param one axis")
            continue
        seen.add(axis.key)
        if "/" in axis.node:
            problems.extend(_check_child_axis(workflow, axis, registry))
            continue
        node = workflow.node(axis.node)
        if node is None:
            problems.append(f"{where}: the workflow has no node {axis.node!r}; its nodes: {', '.join(node_ids)}")
            continue
        cls = registry.get(node.kind)
        if cls is None:
            problems.append(f"{where}: node {axis.node!r} has unknown kind {node.kind!r}")
            continue
        param = cls.param(axis.param)
        if param is None:
            names = ", ".join(p.name for p in cls.params) or "none"
            problems.append(f"{where}: a {node.kind} node has no param {axis.param!r}; its params: {names}")
            continue
        for value in axis.values:
            message = param.check(value)
            if message is not None:
                problems.append(f"{where}: value {value!r} {message}")
    return problems


def _check_child_axis(workflow: Workflow, axis: SweepAxis, registry: NodeRegistry) -> list[str]:
    """A sweep inside a sub-workflow names a workflow node first; the child's param and values are checked when
    each sweep point's workflow is validated (the child loads then)."""
    head = axis.node.split("/", 1)[0]
    node = workflow.node(head)
    where = f"sweep {axis.key}"
    if node is None:
        return [f"{where}: the workflow has no node {head!r}; its nodes: {', '.join(n.id for n in workflow.nodes)}"]
    if node.kind != WORKFLOW_KIND:
        return [f"{where}: {head!r} is a {node.kind} node; NODE/CHILD_NODE.param needs a workflow node first"]
    return []


def apply_point(workflow: Workflow, point: dict[str, Any]) -> Workflow:
    """A copy of the workflow with the point's params set (the original is left untouched); `NODE/CHILD.param`
    goes into the workflow node NODE's `set` param, which sets CHILD.param on its child."""
    copied = copy.deepcopy(workflow)
    for key, value in point.items():
        if "/" in key.partition(".")[0]:
            head, _, rest = key.partition("/")
            node = copied.node(head)
            if node is None:
                raise SweepError(f"cannot apply {key}={value!r}: the workflow has no node {head!r}")
            node.params["set"] = {**(node.params.get("set") or {}), rest: copy.deepcopy(value)}
            continue
        node_id, _, param = key.partition(".")
        node = copied.node(node_id)
        if node is None or not param:
            raise SweepError(f"cannot apply {key}={value!r}: the workflow has no node {node_id!r}")
        node.params[param] = copy.deepcopy(value)
    return copied


def _shown(cls: type[NodeKind], params: dict[str, Any], show_if: tuple[str, tuple[str, ...]] | None) -> bool:
    if show_if is None:
        return True
    other = cls.param(show_if[0])
    value = params.get(show_if[0], other.default if other is not None else None)
    return value in show_if[1]


def numeric_params(workflow: Workflow, registry: NodeRegistry) -> list[tuple[str, str, Any]]:
    """(node id, param, current value) of every int/float param in effect (a param hidden by its `show_if`
    is left out): what the UI offers as sweep axes."""
    found: list[tuple[str, str, Any]] = []
    for node in workflow.nodes:
        cls = registry.get(node.kind)
        if cls is None:
            continue
        for param in cls.params:
            if param.type in _NUMERIC_TYPES and _shown(cls, node.params, param.show_if):
                found.append((node.id, param.name, node.params.get(param.name, param.default)))
    return found
