"""The node registry: kind id -> node class, and the schema export that drives the editor and CLI."""

from __future__ import annotations

from collections.abc import Iterable
from types import ModuleType
from typing import Any

from nodes.base import NODE_ID_RE, PORT_TYPES, RESERVED_NODE_IDS, TEMPLATE_VAR, NodeKind, port_compatibility
from nodes.kinds import collect, generate, io, refine, route, search, verify, vote, workflow
from nodes.scoring import RESERVED_VARS

NODE_MODULES = (io, generate, verify, vote, refine, search, collect, workflow, route)
"""Modules whose NodeKind subclasses (with a `kind`) make up the default registry, in palette order.
A new kind: a class in nodes/kinds/ (a new module goes here too)."""


class NodeRegistry:
    def __init__(self, kinds: Iterable[type[NodeKind]] = ()) -> None:
        self._kinds: dict[str, type[NodeKind]] = {}
        for cls in kinds:
            self.register(cls)

    def register(self, cls: type[NodeKind]) -> type[NodeKind]:
        if cls.kind in self._kinds and self._kinds[cls.kind] is not cls:
            raise ValueError(f"node kind {cls.kind!r} registered twice")
        self._kinds[cls.kind] = cls
        return cls

    def get(self, kind: str) -> type[NodeKind] | None:
        return self._kinds.get(kind)

    def __contains__(self, kind: str) -> bool:
        return kind in self._kinds

    def kinds(self) -> list[str]:
        return list(self._kinds)

    def schema(self) -> list[dict[str, Any]]:
        return [cls.schema() for cls in self._kinds.values()]


def node_classes(modules: Iterable[ModuleType] = NODE_MODULES) -> list[type[NodeKind]]:
    classes: list[type[NodeKind]] = []
    for module in modules:
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, NodeKind)
                and obj.__module__ == module.__name__
                and getattr(obj, "kind", None)
            ):
                classes.append(obj)
    return classes


def default_registry() -> NodeRegistry:
    """A registry of every built-in node kind."""
    return NodeRegistry(node_classes())


def graph_rules() -> dict[str, Any]:
    """The wiring rules the editor applies as the user edits, exported from their one Python source so
    the browser never re-types them: node ids, template variables, port compatibility."""
    return {
        "node_id_pattern": NODE_ID_RE.pattern,
        "reserved_ids": list(RESERVED_NODE_IDS),
        "template_var_pattern": TEMPLATE_VAR.pattern,
        "reserved_vars": list(RESERVED_VARS),
        "port_types": list(PORT_TYPES),
        "port_compatibility": port_compatibility(),
    }
