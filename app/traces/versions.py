"""Workflow versions in the trace database: each saved workflow's canonical YAML under the hash its runs record,
with its parent, time, message and name, and the version each workflow publishes."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import Engine, and_, func, select, text
from sqlmodel import Field

from app.traces.db import TraceStoreError
from app.traces.tables import EVAL_ITEMS, RUNS, TraceModel


class WorkflowVersionRow(TraceModel, table=True):
    """One version of one workflow (a table of its own: databases made before it gain it without a migration)."""

    __tablename__ = "workflow_versions"
    workflow: str = Field(primary_key=True)
    """The workflow's name in its folder (the file's stem): what `metagen history NAME` lists."""
    version: str = Field(primary_key=True)
    """The hash its runs record (`subworkflows.version_hash`: the semantic hash, or the tree hash with children)."""
    seq: int = Field(default=0, index=True)
    """Order of recording across the database (newest has the largest)."""
    yaml: str = ""
    children: str = "{}"
    """The sub-workflows' (and route branches') YAML it used, by reference (JSON name -> YAML)."""
    parent: str | None = None
    created_at: float = 0.0
    message: str = ""
    label: str | None = None
    """The version's optional name (`metagen history` shows it as `name`)."""
    title: str = ""
    """The YAML's own `name:`."""
    path: str = ""
    """The file it was saved to or read from."""


class PublishedRow(TraceModel, table=True):
    """The version a workflow's app link, MCP tool and /v1 model serve (none: the file as saved)."""

    __tablename__ = "published_versions"
    workflow: str = Field(primary_key=True)
    version: str = ""
    published_at: float = 0.0


VERSIONS = WorkflowVersionRow.__table__  # type: ignore[attr-defined]
PUBLISHED = PublishedRow.__table__  # type: ignore[attr-defined]


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


def _version(row: Any) -> Version:
    m = row._mapping
    return Version(workflow=m["workflow"], version=m["version"], yaml=m["yaml"],
                   children=json.loads(m["children"] or "{}"), parent=m["parent"], created_at=m["created_at"],
                   message=m["message"] or "", label=m["label"], title=m["title"] or "", path=m["path"] or "",
                   seq=m["seq"])


class VersionError(TraceStoreError):
    """A version reference that names nothing (or several); the message says what exists."""


class VersionStore:
    """Reads and writes workflow versions on a trace database engine (thread-safe: each call its own
    transaction; a save is one `BEGIN IMMEDIATE` transaction, so two processes never interleave one)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._tables_ready = False
        self._lock = threading.Lock()

    def _ready(self) -> None:
        if not self._tables_ready:
            with self._lock, self.engine.begin() as conn:
                VERSIONS.create(conn, checkfirst=True)
                PUBLISHED.create(conn, checkfirst=True)
            self._tables_ready = True

    # ------------------------------------------------------------------ writing

    def record(self, workflow: str, version: str, yaml_text: str, *, children: dict[str, str] | None = None,
               title: str = "", path: str = "", message: str = "", label: str | None = None,
               hook: Any = None) -> tuple[Version, bool]:
        """Record `yaml_text` as version `version` of `workflow` unless it is there already; returns (the version,
        whether it is new). A message or name given for a version already recorded is set on it when it has none.
        `hook` (tests): called inside the transaction, after the insert."""
        self._ready()
        with self.engine.begin() as conn:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            found = conn.execute(select(VERSIONS).where(
                and_(VERSIONS.c.workflow == workflow, VERSIONS.c.version == version))).first()
            if found is not None:
                existing = _version(found)
                updates: dict[str, Any] = {}
                if message and not existing.message:
                    updates["message"] = message
                if label and not existing.label:
                    updates["label"] = label
                if updates:
                    _check_label(conn, workflow, updates.get("label"))
                    conn.execute(VERSIONS.update().where(and_(VERSIONS.c.workflow == workflow,
                                                              VERSIONS.c.version == version)).values(**updates))
                    for key, value in updates.items():
                        setattr(existing, key, value)
                return existing, False
            _check_label(conn, workflow, label)
            latest = conn.execute(select(VERSIONS.c.version).where(VERSIONS.c.workflow == workflow)
                                  .order_by(VERSIONS.c.seq.desc()).limit(1)).first()
            seq = int(conn.execute(select(func.coalesce(func.max(VERSIONS.c.seq), 0))).scalar() or 0) + 1
            row = Version(workflow=workflow, version=version, yaml=yaml_text, children=dict(children or {}),
                          parent=latest[0] if latest else None, created_at=time.time(), message=message or "",
                          label=label or None, title=title, path=path, seq=seq)
            values = row.to_json()
            values["children"] = json.dumps(row.children, sort_keys=True, ensure_ascii=False)
            conn.execute(VERSIONS.insert(), values)
            if hook is not None:
                hook()
            return row, True

    def set_label(self, workflow: str, ref: str, label: str | None) -> Version:
        """Name a version (None or "" removes the name); a name is unique within a workflow."""
        self._ready()
        version = self.resolve(workflow, ref)
        label = (label or "").strip() or None
        if label is not None and (label.startswith("-") or label in ("latest", "published") or "@" in label):
            raise VersionError(f"a version name cannot be {label!r} (it would read as a reference); pick another")
        with self.engine.begin() as conn:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            _check_label(conn, workflow, label, version.version)
            conn.execute(VERSIONS.update().where(and_(VERSIONS.c.workflow == workflow,
                                                      VERSIONS.c.version == version.version)).values(label=label))
        version.label = label
        return version

    def publish(self, workflow: str, version: str) -> None:
        self._ready()
        with self.engine.begin() as conn:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            conn.execute(PUBLISHED.delete().where(PUBLISHED.c.workflow == workflow))
            conn.execute(PUBLISHED.insert(), {"workflow": workflow, "version": version, "published_at": time.time()})

    def unpublish(self, workflow: str) -> bool:
        """Serve the file again; whether something was published."""
        self._ready()
        with self.engine.begin() as conn:
            return bool(conn.execute(PUBLISHED.delete().where(PUBLISHED.c.workflow == workflow)).rowcount)

    # ------------------------------------------------------------------ reading

    def published(self, workflow: str) -> Version | None:
        self._ready()
        with self.engine.connect() as conn:
            row = conn.execute(select(VERSIONS).join(PUBLISHED, and_(
                PUBLISHED.c.workflow == VERSIONS.c.workflow, PUBLISHED.c.version == VERSIONS.c.version))
                .where(PUBLISHED.c.workflow == workflow)).first()
        return _version(row) if row is not None else None

    def versions(self, workflow: str, limit: int | None = None) -> list[Version]:
        """The workflow's versions, newest first."""
        self._ready()
        query = select(VERSIONS).where(VERSIONS.c.workflow == workflow).order_by(VERSIONS.c.seq.desc())
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            return [_version(r) for r in conn.execute(query)]

    def latest(self, workflow: str) -> Version | None:
        found = self.versions(workflow, limit=1)
        return found[0] if found else None

    def workflows(self) -> list[str]:
        self._ready()
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(select(VERSIONS.c.workflow).distinct().order_by(VERSIONS.c.workflow))]

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
        self._ready()
        with self.engine.connect() as conn:
            by_label = conn.execute(select(VERSIONS).where(and_(VERSIONS.c.workflow == workflow,
                                                                VERSIONS.c.label == ref))).first()
            if by_label is not None:
                return _version(by_label)
            matches = list(conn.execute(select(VERSIONS).where(and_(
                VERSIONS.c.workflow == workflow, VERSIONS.c.version.like(_like_prefix(ref), escape="\\")))))
        if len(matches) == 1:
            return _version(matches[0])
        if matches:
            raise VersionError(f"{workflow}@{ref} is ambiguous: it starts "
                               f"{', '.join(m._mapping['version'] for m in matches[:5])}; type more of the hash")
        raise VersionError(f"the workflow {workflow!r} has no version {ref!r}; `metagen history {workflow}` lists "
                           "them (a hash or its first characters, a version name, or -1 for the one before the "
                           "latest)")

    def figures(self, hashes: list[str]) -> dict[str, dict[str, Any]]:
        """For each hash: its run count and best evaluation figure (the highest mean score of an evaluation's
        workflow point whose runs had that hash; None without one). Two grouped queries, however many hashes."""
        out: dict[str, dict[str, Any]] = {h: {"runs": 0, "best": None} for h in hashes}
        if not hashes:
            return out
        with self.engine.connect() as conn:
            for chunk in _chunks(sorted(set(hashes)), 500):
                for h, n in conn.execute(select(RUNS.c.workflow_hash, func.count()).where(
                        RUNS.c.workflow_hash.in_(chunk)).group_by(RUNS.c.workflow_hash)):
                    out[h]["runs"] = int(n)
                means = select(RUNS.c.workflow_hash.label("h"), func.avg(EVAL_ITEMS.c.score).label("mean")).select_from(
                    EVAL_ITEMS.join(RUNS, RUNS.c.id == EVAL_ITEMS.c.run_id)).where(
                    RUNS.c.workflow_hash.in_(chunk)).group_by(
                    EVAL_ITEMS.c.eval_id, EVAL_ITEMS.c.workflow_idx, EVAL_ITEMS.c.point_idx, RUNS.c.workflow_hash)
                sub = means.subquery()
                for h, best in conn.execute(select(sub.c.h, func.max(sub.c.mean)).group_by(sub.c.h)):
                    out[h]["best"] = round(float(best), 4) if best is not None else None
        return out


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def _like_prefix(ref: str) -> str:
    return ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _check_label(conn: Any, workflow: str, label: str | None, own: str | None = None) -> None:
    if not label:
        return
    row = conn.execute(text("SELECT version FROM workflow_versions WHERE workflow = :w AND label = :l"),
                       {"w": workflow, "l": label}).first()
    if row is not None and row[0] != own:
        raise VersionError(f"the workflow {workflow!r} already has a version named {label!r} ({row[0]}); "
                           "pick another name")
