"""The node registry: kind id -> node class, and the schema export that drives the editor and CLI."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

from nodes.base import NodeKind

NODE_MODULES = ("nodes.io", "nodes.generate", "nodes.verify", "nodes.vote", "nodes.refine", "nodes.search")
"""Modules whose NodeKind subclasses (with a `kind`) make up the default registry."""


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


def node_classes(module_names: Iterable[str] = NODE_MODULES) -> list[type[NodeKind]]:
    classes: list[type[NodeKind]] = []
    for name in module_names:
        module = importlib.import_module(name)
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
