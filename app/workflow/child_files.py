"""Finding a workflow node's child: a name in the parent's folder or the workflows folders, or a relative path
(absolute or escaping paths refused when not trusted), each file parsed once per version."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from app.workflow.files import WORKFLOW_SUFFIX, safe_workflow_name
from app.workflow.problems import WorkflowError
from app.workflow.spec import Workflow, load_workflow, load_workflow_text


class ChildRefError(ValueError):
    """A child reference that cannot be followed: a problem code, a message and a hint."""

    def __init__(self, code: str, message: str, hint: str) -> None:
        super().__init__(message)
        self.code = code
        self.hint = hint


@dataclass(frozen=True)
class Found:
    """A child workflow as loaded: its identity (for cycles), the label shown in problems, the workflow and its
    canonical YAML (stored with each run that uses it)."""

    key: str
    label: str
    workflow: Workflow
    yaml: str


class _ParsedFiles:
    """Child workflow files parsed once per version (path, mtime, size): a workflow node around a small child
    costs its run, not a YAML parse per run. Cached workflows are shared: nothing may change them."""

    def __init__(self, size: int = 128) -> None:
        self._size = size
        self._data: OrderedDict[tuple[str, int, int], tuple[Workflow, str]] = OrderedDict()
        self._lock = threading.Lock()

    def load(self, path: Path) -> tuple[Workflow, str]:
        try:
            stat = path.stat()
        except OSError:
            wf = load_workflow(path)  # says what is wrong
            return wf, wf.to_yaml()
        key = (str(path), stat.st_mtime_ns, stat.st_size)
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        wf = load_workflow(path)
        entry = (wf, wf.to_yaml())
        with self._lock:
            self._data[key] = entry
            while len(self._data) > self._size:
                self._data.popitem(last=False)
        return entry


_PARSED = _ParsedFiles()


@dataclass(frozen=True)
class ChildLoader:
    """Where children are looked up. Names: the parent file's folder, then `folders` in order. Paths (with a
    separator) are relative to the parent file's folder; when not `trusted` (share mode, a link, an upload) an
    absolute path or one whose `..` leaves that folder is refused. `texts` holds children carried along
    (a share link, a stored run) by the reference they were written as, and wins over files."""

    folders: tuple[Path, ...] = ()
    trusted: bool = True
    texts: Mapping[str, str] = field(default_factory=dict)

    def load(self, ref: str, parent_dir: Path | None) -> Found:
        """The child that `ref` names, seen from a parent in `parent_dir` (None: not a file). Raises
        ChildRefError (unknown_workflow, workflow_path_refused) or WorkflowError (the child does not load)."""
        if ref in self.texts:
            wf = load_workflow_text(self.texts[ref])
            return Found(f"text:{ref}", ref, wf, wf.to_yaml())
        path = self._locate(ref, parent_dir)
        label = str(path) if self.trusted else self._shown(ref)
        try:
            wf, text = _PARSED.load(path)
        except WorkflowError as exc:
            if self.trusted:
                raise
            raise WorkflowError([replace(i, message=i.message.replace(str(path), label)) for i in exc.issues]) from None
        return Found(str(path), label, wf, text)

    @staticmethod
    def _shown(ref: str) -> str:
        """How a visitor sees a child's file in messages: as written, never the folder's absolute path."""
        if "/" in ref or "\\" in ref:
            return ref
        return ref if ref.lower().endswith(WORKFLOW_SUFFIX) else f"{ref.strip()}{WORKFLOW_SUFFIX}"

    def _locate(self, ref: str, parent_dir: Path | None) -> Path:
        if not ref.strip():
            raise ChildRefError("unknown_workflow", "the workflow node names no workflow",
                                "set `params: {workflow: NAME}` to a workflow of the workflows folder")
        if "/" in ref or "\\" in ref or os.path.isabs(ref):
            return self._locate_path(ref, parent_dir)
        try:
            name = safe_workflow_name(ref)
        except ValueError as exc:
            raise ChildRefError("unknown_workflow", str(exc), "name a workflow of the workflows folder") from None
        folders = ([parent_dir] if parent_dir is not None else []) + list(self.folders)
        for folder in folders:
            base = Path(folder).expanduser()
            path = base / f"{name}{WORKFLOW_SUFFIX}"
            if path.is_file():
                resolved = path.resolve()
                if not self.trusted and not resolved.is_relative_to(base.resolve()):
                    raise ChildRefError("workflow_path_refused", f"the workflow {name!r} is a link to a file outside "
                                        "its folder", "save the child workflow itself in the workflows folder")
                return resolved
        where = (", ".join(str(f) for f in folders) or "no workflows folder") if self.trusted else "its folders"
        raise ChildRefError("unknown_workflow", f"there is no workflow named {name!r} ({where})",
                            "save the child workflow first, or fix the name (file name without .yaml)")

    def _locate_path(self, ref: str, parent_dir: Path | None) -> Path:
        base = parent_dir if parent_dir is not None else (self.folders[0] if self.folders else None)
        raw = Path(ref).expanduser() if self.trusted else Path(ref)
        if not self.trusted:
            if raw.is_absolute() or ref.startswith(("~", "\\")) or ":" in ref:
                raise ChildRefError("workflow_path_refused", f"the child workflow {ref!r} is an absolute path",
                                    "name a workflow of the workflows folder, or a path relative to this one")
            if base is None:
                raise ChildRefError("workflow_path_refused", f"the child workflow {ref!r} is a path, but this "
                                    "workflow is not a file", "name a workflow of the workflows folder")
        if base is None and not raw.is_absolute():
            raise ChildRefError("unknown_workflow", f"the child workflow {ref!r} is a relative path, but this "
                                "workflow is not a file", "name a workflow of the workflows folder instead")
        path = (raw if raw.is_absolute() else Path(base) / raw).resolve()  # type: ignore[arg-type]
        if not self.trusted and not path.is_relative_to(Path(base).resolve()):  # type: ignore[arg-type]
            raise ChildRefError("workflow_path_refused", f"the child workflow {ref!r} leaves this workflow's folder",
                                "keep child workflows in this folder or below it")
        if path.suffix.lower() not in (WORKFLOW_SUFFIX, ".yml"):  # never read another kind of file (./.env)
            raise ChildRefError("workflow_path_refused", f"the child workflow {ref!r} is not a .yaml file",
                                "name a workflow .yaml file")
        if not path.is_file():
            where = f" ({path})" if self.trusted else ""
            raise ChildRefError("unknown_workflow", f"there is no workflow file {ref!r}{where}",
                                "check the path (relative to this workflow's folder)")
        return path


def default_loader() -> ChildLoader:
    """Names from the user's workflows folder, then the bundled examples; paths trusted (a local user)."""
    from app.platform import paths
    from app.platform.resources import examples_dir

    folders = [paths.workflows_dir()]
    try:
        folders.append(examples_dir())
    except FileNotFoundError:
        pass
    return ChildLoader(tuple(folders), trusted=True)
