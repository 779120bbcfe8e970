"""Workflow versions for every caller (CLI, editor, Python API, servers): save a file and record its version, record
a file changed outside the studio, history with run counts and best figures, diff, restore, name and publish."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.platform.fileio import atomic_write_text
from app.service.errors import UserError
from app.traces.versions import Version, VersionError, VersionStore
from app.workflow.child_files import ChildLoader, ChildRefError
from app.workflow.diff import canonical_lines, diff_lines, diff_workflows
from app.workflow.files import WORKFLOW_SUFFIX, safe_workflow_name, workflow_path
from app.workflow.problems import WorkflowError
from app.workflow.spec import MAX_WORKFLOW_BYTES, Workflow, load_workflow_text
from app.workflow.subworkflows import CHILD_KINDS, CheckMemo, version_hash, workflow_texts

log = logging.getLogger(__name__)

REF_SEPARATOR = "@"
"""`NAME@VERSION`: a workflow and one of its versions (a hash prefix, a version name, `-1`, `published`)."""


@dataclass(frozen=True)
class Identified:
    """A workflow text with the version hash its runs record and the sub-workflow texts it uses."""

    workflow: Workflow
    version: str
    children: dict[str, str]


def split_ref(spec: str) -> tuple[str, str | None]:
    """`NAME@REF` -> (NAME, REF); a spec without `@` -> (spec, None)."""
    name, sep, ref = str(spec).rpartition(REF_SEPARATOR)
    return (name, ref) if sep and name else (str(spec), None)


def identify(text: str, source: Path | None = None, loader: ChildLoader | None = None,
             registry: Any = None, memo: CheckMemo | None = None) -> Identified:
    """Parse `text` and compute its version hash (see `identify_workflow`). WorkflowError if it does not parse."""
    wf = load_workflow_text(text)
    wf.source = source
    return identify_workflow(wf, loader, registry, memo)


def identify_workflow(wf: Workflow, loader: ChildLoader | None = None, registry: Any = None,
                      memo: CheckMemo | None = None) -> Identified:
    """The version hash of a workflow its runs will record: a workflow with workflow or route nodes is checked for
    its children (found by `loader`, relative to `wf.source`), which are part of its version."""
    if not any(n.kind in CHILD_KINDS for n in wf.nodes):
        return Identified(wf, wf.semantic_hash(), {})
    from app.workflow.validation import check
    from nodes.registry import default_registry

    checked = check(wf, registry or default_registry(), loader or ChildLoader(()), memo=memo)
    return Identified(wf, version_hash(wf, checked.children), workflow_texts(wf, checked))


class WorkflowVersions:
    """The versions of the workflows of one folder, kept in one trace database. Every method the editor's History
    panel needs: `history`, `version_yaml`, `diff`, `restore`, `set_name`, `publish` / `unpublish` / `published`;
    and what every save and load goes through: `save_text`, `record_file`. Thread-safe."""

    def __init__(self, store: VersionStore, workflows_dir: Path | None = None, *,
                 loader: ChildLoader | None = None, registry: Any = None) -> None:
        self.store = store
        self.workflows_dir = Path(workflows_dir).expanduser() if workflows_dir is not None else None
        self.loader = loader or ChildLoader(tuple(p for p in (self.workflows_dir,) if p is not None))
        self.registry = registry
        self._seen: dict[str, tuple[int, int, str]] = {}
        """path -> (mtime_ns, size, version) of files already recorded: an unchanged file is not read again."""
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ names and files

    def locate(self, name_or_path: str | Path) -> tuple[str, Path]:
        """(the workflow's history key, its file): a name of the workflows folder, or a file's path (its key is
        the file's name without `.yaml`). UserError for neither."""
        raw = str(name_or_path)
        path = Path(raw).expanduser()
        looks_like_path = isinstance(name_or_path, Path) or "/" in raw or "\\" in raw or (
            raw.endswith((".yaml", ".yml")) and path.is_file())
        if looks_like_path:
            return path.stem, path
        if self.workflows_dir is None:
            raise UserError(f"{raw!r} is not a workflow file; give a path, or a name with --workflows DIR")
        try:
            safe = safe_workflow_name(raw)
            return safe, workflow_path(self.workflows_dir, safe)
        except ValueError as exc:
            raise UserError(str(exc)) from None

    def identify(self, text: str, source: Path | None = None, memo: CheckMemo | None = None) -> Identified:
        return identify(text, source, self.loader, self.registry, memo)

    # ------------------------------------------------------------------ recording

    def save_text(self, target: str | Path, text: str, *, message: str = "", label: str | None = None,
                  hook: Callable[[], None] | None = None, parsed: Workflow | None = None) -> Version:
        """Write `text` to the workflow's file atomically (temp file + rename), then record it as a version in one
        transaction. A crash between the two leaves the file saved and its version recorded the next time the
        file is loaded; an identical text adds no version. WorkflowError if the text is not a workflow. `parsed`:
        the text already parsed by the caller (not parsed again)."""
        key, path = self.locate(target)
        if parsed is not None:
            source, parsed.source = parsed.source, path
            try:
                found = identify_workflow(parsed, self.loader, self.registry)
            finally:
                parsed.source = source
        else:
            found = self.identify(text, path)
        atomic_write_text(path, text)
        version, _ = self._record(key, path, text, found, message=message, label=label, hook=hook)
        self._remember(path, version.version)
        return version

    def save_workflow(self, target: str | Path, wf: Workflow, *, message: str = "", label: str | None = None,
                      hook: Callable[[], None] | None = None) -> Version:
        """`save_text` of a workflow already parsed (the editor's, the Python API's): its canonical YAML written,
        its version recorded, without parsing the text again."""
        return self.save_text(target, wf.to_yaml(), message=message, label=label, hook=hook, parsed=wf)

    def record_file(self, target: str | Path, *, message: str = "", force: bool = False,
                    memo: CheckMemo | None = None) -> Version | None:
        """Record the file's current text as a version when it is not yet one (a file changed outside the studio:
        a text editor, `git checkout`); None when the file is missing or does not load as a workflow. A file
        unchanged since this object last recorded it is not read again, unless `force`."""
        key, path = self.locate(target)
        try:
            stat = path.stat()
        except OSError:
            return None
        seen = self._seen.get(str(path))
        if not force and not message and seen is not None and seen[:2] == (stat.st_mtime_ns, stat.st_size):
            return None
        if stat.st_size > MAX_WORKFLOW_BYTES:
            return None
        try:
            text = path.read_text(encoding="utf-8")
            found = self.identify(text, path, memo)
        except (OSError, UnicodeDecodeError, WorkflowError) as exc:
            log.debug("not recording %s as a version: %s", path, exc)
            return None
        version, _ = self._record(key, path, text, found, message=message)
        self._remember(path, version.version, stat)
        return version

    def _remember(self, path: Path, version: str, stat: os.stat_result | None = None) -> None:
        """The file as recorded (its stat then), so listing does not read it again until it changes."""
        try:
            stat = stat or path.stat()
        except OSError:
            return
        with self._lock:
            self._seen[str(path)] = (stat.st_mtime_ns, stat.st_size, version)

    def record_folder(self) -> int:
        """Record every workflow of the folder that changed since it was last recorded; how many were new."""
        if self.workflows_dir is None or not self.workflows_dir.is_dir():
            return 0
        new = 0
        memo: CheckMemo = {}  # one check of each distinct child for the whole folder, as the palette's ports
        for path in sorted(self.workflows_dir.glob(f"*{WORKFLOW_SUFFIX}")):
            try:
                before = self._seen.get(str(path))
                version = self.record_file(path, memo=memo)
                new += int(version is not None and (before is None or before[2] != version.version))
            except (UserError, VersionError) as exc:
                log.debug("not recording %s: %s", path, exc)
        return new

    def record_text(self, key: str, text: str, *, path: Path | None = None, message: str = "") -> Version:
        """Record a workflow text as a version of `key` without writing a file (a tune's recommendation written
        elsewhere, a run of text)."""
        found = self.identify(text, path)
        version, _ = self._record(key, path, text, found, message=message)
        return version

    def _record(self, key: str, path: Path | None, text: str, found: Identified, *, message: str = "",
                label: str | None = None, hook: Callable[[], None] | None = None) -> tuple[Version, bool]:
        try:
            return self.store.record(key, found.version, text, children=found.children, title=found.workflow.name,
                                     path=str(path) if path is not None else "", message=message, label=label,
                                     hook=hook)
        except VersionError as exc:
            raise UserError(str(exc)) from None

    # ------------------------------------------------------------------ reading

    def history(self, target: str | Path, *, limit: int | None = None, record: bool = True) -> list[dict[str, Any]]:
        """The workflow's versions, newest first: version, name, message, created_at, runs, best (and parent,
        published, current for the UI). The file is recorded first when it changed."""
        key, path = self.locate(target)
        if record:
            self.record_file(path)
        versions = self.store.versions(key, limit=limit)
        figures = self.store.figures([v.version for v in versions])
        published = self.store.published(key)
        current = self._seen.get(str(path), (0, 0, None))[2]
        return [{"version": v.version, "name": v.label, "message": v.message, "created_at": v.created_at,
                 "runs": figures[v.version]["runs"], "best": figures[v.version]["best"], "parent": v.parent,
                 "published": published is not None and published.version == v.version,
                 "current": v.version == current} for v in versions]

    def get(self, target: str | Path, ref: str | None = None) -> Version:
        """The version `ref` names (None: the latest); UserError naming what exists otherwise."""
        key, path = self.locate(target)
        self.record_file(path)
        try:
            return self.store.resolve(key, ref or "latest")
        except VersionError as exc:
            raise UserError(str(exc)) from None

    def version_yaml(self, target: str | Path, ref: str | None = None) -> str:
        return self.get(target, ref).yaml

    def diff(self, target: str | Path, ref_a: str, ref_b: str | None = None) -> dict[str, Any]:
        """The semantic diff from version `ref_a` to `ref_b` (None: the latest) of one workflow."""
        a, b = self.get(target, ref_a), self.get(target, ref_b)
        return diff_versions(a, b)

    # ------------------------------------------------------------------ changing

    def restore(self, target: str | Path, ref: str, *, message: str = "") -> Version:
        """Write version `ref` back to the workflow's file (atomically), with the sub-workflow files it used
        (`restore_tree`); returns the restored version."""
        return self.restore_tree(target, ref, message=message)[0]

    def restore_tree(self, target: str | Path, ref: str, *, message: str = "") -> tuple[Version, list[Path]]:
        """Write version `ref` back to the workflow's file and each sub-workflow file whose workflow changed since
        (a child's version is part of its parent's), every current file recorded as a version first so nothing
        is lost; the restored version and the child files written."""
        _, path = self.locate(target)
        if self.record_file(path, force=True) is None and path.is_file():
            raise UserError(f"not restored: {path} does not load as a workflow, so it cannot be kept as a version "
                            f"first; fix it (`metagen validate {path}` says what is wrong) or move it away")
        version = self.get(target, ref)
        children = self._restore_children(version, path.parent)
        atomic_write_text(path, version.yaml)
        for written in [*children, path]:
            with self._lock:
                self._seen.pop(str(written), None)
        for child in children:
            self.record_file(child, message=f"restored with {version.workflow}@{version.version[:12]}")
        self.record_file(path, message=message or f"restored {version.version}")
        return version, children

    def _restore_children(self, version: Version, folder: Path) -> list[Path]:
        """Write back the sub-workflows `version` recorded whose files now hold another workflow (or are gone),
        each current file recorded first; the files written. A child that is the same workflow is left as it is
        (its comments and layout kept)."""
        written: list[Path] = []
        for ref, text in sorted(version.children.items()):
            child = self._child_path(ref, folder)
            if child is None:
                continue
            try:
                current = child.read_text(encoding="utf-8") if child.is_file() else None
                same = current is not None and load_workflow_text(current).to_yaml() == text
            except (OSError, UnicodeDecodeError, WorkflowError):
                same = False
            if same:
                continue
            if current is not None and self.record_file(child, force=True) is None:
                raise UserError(f"not restored: the sub-workflow file {child} does not load as a workflow, so it "
                                "cannot be kept as a version first; fix it or move it away")
            atomic_write_text(child, text)
            written.append(child)
        return written

    def _child_path(self, ref: str, folder: Path) -> Path | None:
        """The file a sub-workflow reference names, seen from the parent's folder: where it is now, else where
        it would be made (the parent's folder); None for a reference no file can hold."""
        try:
            return Path(self.loader.load(ref, folder).key)
        except WorkflowError:  # it is there but does not load: restored over, found by its name below
            pass
        except ChildRefError:  # gone (or refused): made again in the parent's folder
            log.debug("sub-workflow %r of a restored version is not found from %s", ref, folder)
        if "/" in ref or "\\" in ref:
            path = (folder / ref).resolve()
            inside = path.is_relative_to(folder.resolve())
            return path if inside and path.suffix.lower() in (WORKFLOW_SUFFIX, ".yml") else None
        try:
            return folder / f"{safe_workflow_name(ref)}{WORKFLOW_SUFFIX}"
        except ValueError:
            return None

    def set_name(self, target: str | Path, ref: str, label: str | None) -> Version:
        key, _ = self.locate(target)
        try:
            return self.store.set_label(key, ref, label)
        except VersionError as exc:
            raise UserError(str(exc)) from None

    def publish(self, target: str | Path, ref: str | None = None) -> Version:
        """Mark version `ref` (None: the latest, the file recorded first) as the one app links, MCP tools, /v1
        models and `auto` serve until the next publish."""
        key, _ = self.locate(target)
        version = self.get(target, ref)
        self.store.publish(key, version.version)
        return version

    def unpublish(self, target: str | Path) -> bool:
        key, _ = self.locate(target)
        return self.store.unpublish(key)

    def published(self, target: str | Path) -> Version | None:
        key, _ = self.locate(target)
        return self.store.published(key)

    def of_run(self, run_hash: str, workflow: str | None = None) -> Version | None:
        """The version a run ran (its `workflow_hash`): of `workflow` when given and recorded there, else the
        newest workflow recorded with that hash; None when no save recorded it (a run of text never saved)."""
        found = self.store.with_hash(run_hash)
        if workflow is not None:
            own = [v for v in found if v.workflow == workflow]
            found = own or found
        return found[0] if found else None

    def served(self, target: str | Path, ref: str | None = None) -> Version | None:
        """What the doors serve for a workflow: version `ref` when given (a pin, `NAME@VERSION`), else the
        published one; None when nothing is published (the file is served)."""
        if ref is not None:
            return self.get(target, ref)
        return self.published(target)


def diff_versions(a: Version, b: Version) -> dict[str, Any]:
    """The semantic diff of two recorded versions, with their hashes."""
    return diff_texts(a.yaml, b.yaml, a.children, b.children) | {"a": a.version, "b": b.version}


def diff_texts(text_a: str, text_b: str, children_a: Mapping[str, str] | None = None,
               children_b: Mapping[str, str] | None = None) -> dict[str, Any]:
    try:
        wf_a, wf_b = load_workflow_text(text_a), load_workflow_text(text_b)
    except WorkflowError as exc:
        raise UserError(f"cannot diff: {exc}") from None
    return diff_workflows(wf_a, wf_b, children_a, children_b)


def diff_report(diff: Mapping[str, Any]) -> str:
    """The diff as the CLI prints it."""
    return "\n".join(diff_lines(diff)) + "\n"


def textconv(text: str, children: Mapping[str, str] | None = None) -> str:
    """A workflow file as git's `textconv` sees it: one line per fact."""
    try:
        wf = load_workflow_text(text)
    except WorkflowError:
        return text
    return "\n".join(canonical_lines(wf, children)) + "\n"


_OPEN: dict[str, VersionStore] = {}
_OPEN_LOCK = threading.Lock()


def store_at(db: str | Path | None = None) -> VersionStore:
    """The version store of the trace database at `db` (default: $METAGEN_TRACE_DB or the data folder), one per
    file per process. A database that does not exist yet (or is not a trace database) is opened once as the trace
    store opens it, which creates it, or refuses a foreign or newer one with TraceStoreError."""
    from app.platform.paths import trace_db_path

    path = Path(db).expanduser() if db is not None else trace_db_path()
    key = str(path.resolve())
    with _OPEN_LOCK:
        store = _OPEN.get(key)
        if store is None:
            if not _is_trace_db(path):
                from app.traces.db import create_trace_engine, ensure_schema

                path.parent.mkdir(parents=True, exist_ok=True)
                engine = create_trace_engine(path)
                try:
                    ensure_schema(engine, path)
                finally:
                    engine.dispose()
            store = _OPEN[key] = VersionStore(path)
        return store


def _is_trace_db(path: Path) -> bool:
    """A trace database this version reads (its schema version not newer), checked without the ORM."""
    import sqlite3

    from app.traces.schema_version import SCHEMA_VERSION

    if not path.is_file():
        return False
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.Error:
        return False
    return row is not None and str(row[0]).isdigit() and int(row[0]) <= SCHEMA_VERSION


def record_loaded_file(db: str | Path, path: Path) -> Version | None:
    """Record a workflow file about to run (`metagen run FILE`, `metagen eval FILE`) as a version in the trace
    database at `db` when it is not one yet; never fails (logged)."""
    try:
        return WorkflowVersions(store_at(db), path.parent).record_file(path)
    except Exception as exc:
        log.warning("could not record %s as a version: %s", path, exc)
        return None


def save_workflow_file(wf: Workflow, path: str | Path, *, message: str = "", db: str | Path | None = None) -> Path:
    """The Python API's save: the canonical YAML written atomically and recorded as a version (in the default
    trace database). A database that cannot be used costs the version, never the save (logged)."""
    target = Path(path).expanduser()
    try:
        versions = WorkflowVersions(store_at(db), target.parent)
    except Exception as exc:  # the file is what the caller asked for
        log.warning("saved %s without recording a version: %s", target, exc)
        atomic_write_text(target, wf.to_yaml())
        return target
    versions.save_workflow(target, wf, message=message)
    return target
