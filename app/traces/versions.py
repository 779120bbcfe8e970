"""Workflow versions in the trace database: each saved workflow's canonical YAML under the hash its runs record,
with its parent, time, message and name, and the version each workflow publishes. Plain sqlite3 (no ORM), so
`metagen history` and git's textconv start in a fraction of a second."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

BUSY_TIMEOUT_MS = 30_000
"""As the trace store's (app.traces.db): how long a writer waits for another process's transaction."""

TABLES_SQL = """
CREATE TABLE IF NOT EXISTS workflow_versions (
    workflow TEXT NOT NULL,
    version TEXT NOT NULL,
    seq INTEGER NOT NULL,
    yaml TEXT NOT NULL,
    children TEXT NOT NULL DEFAULT '{}',
    parent TEXT,
    created_at REAL NOT NULL,
    message TEXT NOT NULL DEFAULT '',
    label TEXT,
    title TEXT NOT NULL DEFAULT '',
    path TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workflow, version)
);
CREATE INDEX IF NOT EXISTS ix_workflow_versions_seq ON workflow_versions (workflow, seq);
CREATE TABLE IF NOT EXISTS published_versions (
    workflow TEXT PRIMARY KEY,
    version TEXT NOT NULL,
    published_at REAL NOT NULL
);
"""
"""Tables of their own (databases made before them gain them without a migration): `workflow` is the workflow's
name in its folder (the file's stem), `version` the hash its runs record (`subworkflows.version_hash`), `seq` the
order of recording, `children` the sub-workflows' YAML by reference (JSON), `label` the version's optional name,
`title` the YAML's own `name:`, `path` the file it was saved to or read from."""

COLUMNS = ("workflow", "version", "seq", "yaml", "children", "parent", "created_at", "message", "label", "title",
           "path")


@dataclass
class Version:
    """A version as the CLI, the service and the UI read it."""

    workflow: str
    version: str
    yaml: str
    children: dict[str, str] = field(default_factory=dict)
    parent: str | None = None
    created_at: float = 0.0
    message: str = ""
    label: str | None = None
    title: str = ""
    path: str = ""
    seq: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _version(row: sqlite3.Row) -> Version:
    return Version(workflow=row["workflow"], version=row["version"], yaml=row["yaml"],
                   children=json.loads(row["children"] or "{}"), parent=row["parent"], created_at=row["created_at"],
                   message=row["message"] or "", label=row["label"], title=row["title"] or "", path=row["path"] or "",
                   seq=row["seq"])


class VersionError(RuntimeError):
    """A version reference that names nothing (or several), or a name already taken; the message says what exists."""


class VersionStore:
    """Reads and writes workflow versions in the trace database at `path` (which must exist: `store_at` in
    app.service.versions creates a new one as the trace store does). Thread-safe: each call its own connection
    and transaction; a save is one `BEGIN IMMEDIATE` transaction, so two processes never interleave one."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._tables_ready = False
        self._lock = threading.Lock()
        self._local = threading.local()

    def _connect(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                   check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            self._local.conn = conn
        if not self._tables_ready:
            with self._lock:
                conn.executescript(TABLES_SQL)
                self._tables_ready = True
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE: the write lock first), committed whole or not at all."""
        conn = self._connect()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # ------------------------------------------------------------------ writing

    def record(self, workflow: str, version: str, yaml_text: str, *, children: dict[str, str] | None = None,
               title: str = "", path: str = "", message: str = "", label: str | None = None,
               hook: Callable[[], None] | None = None) -> tuple[Version, bool]:
        """Record `yaml_text` as version `version` of `workflow` unless it is there already; returns (the version,
        whether it is new). A message or name given for a version already recorded is set on it when it has none.
        `hook` (tests): called inside the transaction, after the insert."""
        with self._write() as conn:
            found = conn.execute("SELECT * FROM workflow_versions WHERE workflow = ? AND version = ?",
                                 (workflow, version)).fetchone()
            if found is not None:
                existing = _version(found)
                if message and not existing.message:
                    conn.execute("UPDATE workflow_versions SET message = ? WHERE workflow = ? AND version = ?",
                                 (message, workflow, version))
                    existing.message = message
                if label and not existing.label:
                    _check_label(conn, workflow, label)
                    conn.execute("UPDATE workflow_versions SET label = ? WHERE workflow = ? AND version = ?",
                                 (label, workflow, version))
                    existing.label = label
                return existing, False
            _check_label(conn, workflow, label)
            latest = conn.execute("SELECT version FROM workflow_versions WHERE workflow = ? ORDER BY seq DESC "
                                  "LIMIT 1", (workflow,)).fetchone()
            seq = int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM workflow_versions").fetchone()[0]) + 1
            row = Version(workflow=workflow, version=version, yaml=yaml_text, children=dict(children or {}),
                          parent=latest[0] if latest else None, created_at=time.time(), message=message or "",
                          label=label or None, title=title, path=path, seq=seq)
            values = row.to_json()
            values["children"] = json.dumps(row.children, sort_keys=True, ensure_ascii=False)
            conn.execute(f"INSERT INTO workflow_versions ({', '.join(COLUMNS)}) VALUES "
                         f"({', '.join(':' + c for c in COLUMNS)})", values)
            if hook is not None:
                hook()
            return row, True

    def set_label(self, workflow: str, ref: str, label: str | None) -> Version:
        """Name a version (None or "" removes the name); a name is unique within a workflow."""
        version = self.resolve(workflow, ref)
        label = (label or "").strip() or None
        if label is not None and (label.startswith("-") or label in ("latest", "published") or "@" in label
                                  or label.startswith("git:")):
            raise VersionError(f"a version name cannot be {label!r} (it would read as a reference); pick another")
        with self._write() as conn:
            _check_label(conn, workflow, label, version.version)
            conn.execute("UPDATE workflow_versions SET label = ? WHERE workflow = ? AND version = ?",
                         (label, workflow, version.version))
        version.label = label
        return version

    def publish(self, workflow: str, version: str) -> None:
        with self._write() as conn:
            conn.execute("INSERT OR REPLACE INTO published_versions (workflow, version, published_at) "
                         "VALUES (?, ?, ?)", (workflow, version, time.time()))

    def unpublish(self, workflow: str) -> bool:
        """Serve the file again; whether something was published."""
        with self._write() as conn:
            return conn.execute("DELETE FROM published_versions WHERE workflow = ?", (workflow,)).rowcount > 0

    # ------------------------------------------------------------------ reading

    def published(self, workflow: str) -> Version | None:
        row = self._connect().execute(
            "SELECT v.* FROM workflow_versions v JOIN published_versions p ON p.workflow = v.workflow AND "
            "p.version = v.version WHERE p.workflow = ?", (workflow,)).fetchone()
        return _version(row) if row is not None else None

    def versions(self, workflow: str, limit: int | None = None) -> list[Version]:
        """The workflow's versions, newest first."""
        rows = self._connect().execute("SELECT * FROM workflow_versions WHERE workflow = ? ORDER BY seq DESC "
                                       "LIMIT ?", (workflow, -1 if limit is None else limit)).fetchall()
        return [_version(r) for r in rows]

    def latest(self, workflow: str) -> Version | None:
        found = self.versions(workflow, limit=1)
        return found[0] if found else None

    def with_hash(self, version: str) -> list[Version]:
        """Every workflow's version recorded under this hash (a run's `workflow_hash`), newest first."""
        rows = self._connect().execute("SELECT * FROM workflow_versions WHERE version = ? ORDER BY seq DESC",
                                       (version,)).fetchall()
        return [_version(r) for r in rows]

    def workflows(self) -> list[str]:
        rows = self._connect().execute("SELECT DISTINCT workflow FROM workflow_versions ORDER BY workflow")
        return [r[0] for r in rows]

    def resolve(self, workflow: str, ref: str) -> Version:
        """The version `ref` names: `latest`, `published`, `-N` (N before the latest), a version name, or a hash or
        its unambiguous prefix. VersionError naming what exists otherwise."""
        ref = str(ref).strip()
        if ref in ("", "latest", "-0"):
            found = self.latest(workflow)
            if found is None:
                raise VersionError(f"the workflow {workflow!r} has no recorded versions yet; save it (or run "
                                   f"`metagen history {workflow}`, which records the file) first")
            return found
        if ref == "published":
            published = self.published(workflow)
            if published is None:
                raise VersionError(f"the workflow {workflow!r} has no published version; "
                                   f"`metagen publish {workflow}` publishes the latest")
            return published
        if ref.startswith("-") and ref[1:].isdigit():
            back = int(ref[1:])
            found_list = self.versions(workflow, limit=back + 1)
            if len(found_list) <= back:
                raise VersionError(f"the workflow {workflow!r} has {len(found_list)} recorded version(s); "
                                   f"{workflow}@{ref} would be version {back + 1} from the newest")
            return found_list[back]
        conn = self._connect()
        by_label = conn.execute("SELECT * FROM workflow_versions WHERE workflow = ? AND label = ?",
                                (workflow, ref)).fetchone()
        if by_label is not None:
            return _version(by_label)
        matches = conn.execute("SELECT * FROM workflow_versions WHERE workflow = ? AND substr(version, 1, ?) = ?",
                               (workflow, len(ref), ref)).fetchall()
        if len(matches) == 1:
            return _version(matches[0])
        if matches:
            raise VersionError(f"{workflow}@{ref} is ambiguous: it starts "
                               f"{', '.join(m['version'] for m in matches[:5])}; type more of the hash")
        raise VersionError(f"the workflow {workflow!r} has no version {ref!r}; `metagen history {workflow}` lists "
                           "them (a hash or its first characters, a version name, or -1 for the one before the "
                           "latest)")

    def figures(self, hashes: list[str]) -> dict[str, dict[str, Any]]:
        """For each hash: its run count and best evaluation figure (the highest mean score of an evaluation's
        workflow point whose runs had that hash; None without one). Two grouped queries per 500 hashes."""
        out: dict[str, dict[str, Any]] = {h: {"runs": 0, "best": None} for h in hashes}
        conn = self._connect()
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        unique = sorted(set(hashes))
        for start in range(0, len(unique), 500):
            chunk = unique[start:start + 500]
            marks = ", ".join("?" * len(chunk))
            if "runs" in tables:
                for h, n in conn.execute(f"SELECT workflow_hash, COUNT(*) FROM runs WHERE workflow_hash IN ({marks}) "
                                         "GROUP BY workflow_hash", chunk):
                    out[h]["runs"] = int(n)
            if "runs" in tables and "eval_items" in tables:
                for h, best in conn.execute(
                        "SELECT h, MAX(mean) FROM (SELECT r.workflow_hash AS h, AVG(e.score) AS mean FROM eval_items e "
                        f"JOIN runs r ON r.id = e.run_id WHERE r.workflow_hash IN ({marks}) GROUP BY e.eval_id, "
                        "e.workflow_idx, e.point_idx, r.workflow_hash) GROUP BY h", chunk):
                    out[h]["best"] = round(float(best), 4) if best is not None else None
        return out


def _check_label(conn: sqlite3.Connection, workflow: str, label: str | None, own: str | None = None) -> None:
    if not label:
        return
    row = conn.execute("SELECT version FROM workflow_versions WHERE workflow = ? AND label = ?",
                       (workflow, label)).fetchone()
    if row is not None and row[0] != own:
        raise VersionError(f"the workflow {workflow!r} already has a version named {label!r} ({row[0]}); "
                           "pick another name")
