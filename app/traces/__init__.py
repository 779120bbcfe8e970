"""The trace store: every run's complete record in SQLite, written by an observer, read back as dicts."""

from __future__ import annotations

from typing import Any

__all__ = ["TraceStore", "TraceStoreError"]


def __getattr__(name: str) -> Any:
    """`TraceStore` and `TraceStoreError` imported on first use: the versions table (app.traces.versions) is read
    without loading the ORM, so `metagen history` and git's textconv start quickly."""
    if name == "TraceStore":
        from app.traces.store import TraceStore

        return TraceStore
    if name == "TraceStoreError":
        from app.traces.db import TraceStoreError

        return TraceStoreError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
