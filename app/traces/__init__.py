"""The trace store: every run's complete record in SQLite, written by an observer, read back as dicts."""

from app.traces.db import TraceStoreError
from app.traces.store import TraceStore

__all__ = ["TraceStore", "TraceStoreError"]
