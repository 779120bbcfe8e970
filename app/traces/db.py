"""Opens a trace database: SQLite engine in WAL mode, schema creation, version check and migrations."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DatabaseError, OperationalError

from app.traces.tables import SCHEMA_VERSION, TRACE_REGISTRY, MetaRow

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 30_000
"""How long a writer waits for another process's transaction before giving up."""

Migration = Callable[[Connection], None]
MIGRATIONS: dict[int, Migration] = {}
"""from_version -> function that upgrades a database from that version to the next one."""


class TraceStoreError(RuntimeError):
    """The trace database cannot be used; the message says why and what to do."""


def _on_connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
    finally:
        cursor.close()


def create_trace_engine(path: Path) -> Engine:
    """An engine whose pooled connections (one per thread at a time) all run in WAL mode."""
    engine = create_engine(
        f"sqlite:///{path}",
        connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000},
        pool_size=8,
        max_overflow=16,
    )
    event.listen(engine, "connect", _on_connect)
    return engine


def _fix_hint(path: Path) -> str:
    return (f"choose another database with --db PATH or the METAGEN_TRACE_DB environment variable, "
            f"or move {path} out of the way")


def read_schema_version(conn: Connection) -> int | None:
    row = conn.execute(text("SELECT value FROM meta WHERE key = 'schema_version'")).first()
    return int(row[0]) if row else None


def ensure_schema(engine: Engine, path: Path) -> int:
    """Create the tables of a new database, migrate an older one, refuse a newer or foreign one.
    Returns the schema version the database had when opened (0 for a new one)."""
    try:
        with engine.begin() as conn:
            # the write lock first: processes opening a new database at once create it one at a time
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            tables = set(inspect(conn).get_table_names())
            if not tables:
                TRACE_REGISTRY.metadata.create_all(conn)
                conn.execute(MetaRow.__table__.insert(), [  # type: ignore[attr-defined]
                    {"key": "schema_version", "value": str(SCHEMA_VERSION)},
                    {"key": "created_at", "value": str(time.time())},
                ])
                return 0
            if "meta" not in tables or "runs" not in tables:
                raise TraceStoreError(
                    f"{path} is an SQLite database but not a Metagen trace database "
                    f"(it has tables {', '.join(sorted(tables))}); {_fix_hint(path)}")
            found = read_schema_version(conn)
            if found is None:
                raise TraceStoreError(f"{path} has no schema version; it was not written by Metagen Studio; "
                                      f"{_fix_hint(path)}")
            if found > SCHEMA_VERSION:
                raise TraceStoreError(
                    f"{path} was written by a newer Metagen Studio (trace schema v{found}; this version "
                    f"reads up to v{SCHEMA_VERSION}); upgrade Metagen Studio, or {_fix_hint(path)}")
            version = found
            while version < SCHEMA_VERSION:
                migrate = MIGRATIONS.get(version)
                if migrate is None:
                    raise TraceStoreError(
                        f"{path} uses trace schema v{version}, which this version cannot upgrade "
                        f"(it reads v{SCHEMA_VERSION}); export its runs with the version that wrote it, "
                        f"or {_fix_hint(path)}")
                log.info("migrating trace database %s from schema v%d to v%d", path, version, version + 1)
                migrate(conn)
                version += 1
                conn.execute(text("UPDATE meta SET value = :v WHERE key = 'schema_version'"), {"v": str(version)})
            # tables added by later versions without touching older ones are created here
            TRACE_REGISTRY.metadata.create_all(conn)
            return found
    except TraceStoreError:
        raise
    except (DatabaseError, OperationalError) as exc:
        reason = str(exc.orig) if getattr(exc, "orig", None) is not None else str(exc)
        raise TraceStoreError(f"cannot open trace database {path}: {reason}; {_fix_hint(path)}") from exc
