"""Opening databases: new ones are created at the current schema, older ones migrate, others are refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from app.traces import TraceStore, TraceStoreError
from app.traces import db as trace_db
from app.traces.tables import SCHEMA_VERSION


def schema_version(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])


def test_new_database_records_its_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "folder" / "t.db"
    TraceStore(path).close()
    assert schema_version(path) == SCHEMA_VERSION
    reopened = TraceStore(path)
    assert reopened.opened_schema_version == SCHEMA_VERSION
    reopened.close()


def test_newer_database_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    TraceStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(TraceStoreError) as info:
        TraceStore(path)
    message = str(info.value)
    assert "newer Metagen Studio" in message and f"v{SCHEMA_VERSION + 1}" in message and "--db" in message


def test_older_database_is_migrated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.db"
    TraceStore(path).close()
    applied = []

    def add_note_column(conn) -> None:  # type: ignore[no-untyped-def]
        applied.append(True)
        conn.execute(text("ALTER TABLE runs ADD COLUMN note TEXT"))

    monkeypatch.setattr(trace_db, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setitem(trace_db.MIGRATIONS, SCHEMA_VERSION, add_note_column)
    store = TraceStore(path)
    store.close()
    assert applied == [True]
    assert store.opened_schema_version == SCHEMA_VERSION
    assert schema_version(path) == SCHEMA_VERSION + 1
    with sqlite3.connect(path) as conn:
        assert "note" in [row[1] for row in conn.execute("PRAGMA table_info(runs)")]


def test_unmigratable_older_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    TraceStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    with pytest.raises(TraceStoreError, match="cannot upgrade"):
        TraceStore(path)


def test_foreign_files_are_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    with pytest.raises(TraceStoreError, match="not a Metagen trace database"):
        TraceStore(other)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(TraceStoreError, match="cannot open trace database"):
        TraceStore(garbage)
    with pytest.raises(TraceStoreError, match="is a folder"):
        TraceStore(tmp_path)


def test_default_path_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAGEN_TRACE_DB", str(tmp_path / "env.db"))
    store = TraceStore()
    store.close()
    assert store.path == tmp_path / "env.db" and store.path.exists()
