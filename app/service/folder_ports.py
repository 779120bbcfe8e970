"""The ports of every workflow of the folder (the editor's Workflows palette), worked out once per version of the
folder's files: a page load stats the files and checks nothing while none changed."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.workflow.problems import WorkflowError
from app.workflow.spec import load_workflow
from app.workflow.subworkflows import CheckMemo, ChildLoader, workflow_ports
from app.workflow.validation import check as check_tree

log = logging.getLogger(__name__)

FolderKey = tuple[tuple[str, int, int], ...]


def _folder_key(folders: tuple[Path, ...]) -> FolderKey:
    """(path, mtime, size) of every workflow file where children may be found: any change shows in it."""
    entries: list[tuple[str, int, int]] = []
    for folder in folders:
        try:
            files = sorted(Path(folder).glob("*.yaml"))
        except OSError:
            continue
        for path in files:
            try:
                stat = path.stat()
            except OSError:
                continue
            entries.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(entries)


class FolderPorts:
    """`ports(names, path_for)` for the workflows named: recomputed only when a file of the loader's folders
    changed, and then with one check memo for the whole folder (each distinct child checked once)."""

    def __init__(self, registry: Any, loader: ChildLoader) -> None:
        self._registry = registry
        self._loader = loader
        self._lock = threading.Lock()
        self._key: FolderKey | None = None
        self._ports: dict[str, dict[str, Any]] = {}
        self.computed = 0
        """How many times the folder's trees were checked (tests: a page load with no change checks none)."""

    def ports(self, names: list[str], path_for: Callable[[str], Path]) -> dict[str, dict[str, Any]]:
        key = _folder_key(self._loader.folders)
        with self._lock:
            if key == self._key:
                return dict(self._ports)
            memo: CheckMemo = {}
            ports: dict[str, dict[str, Any]] = {}
            for name in names:
                try:
                    wf = load_workflow(path_for(name))
                except (WorkflowError, ValueError) as exc:
                    log.debug("workflow %s left out of the palette: %s", name, exc)
                    continue
                ports[name] = workflow_ports(wf, check_tree(wf, self._registry, self._loader, memo=memo))
            self._key, self._ports = key, ports
            self.computed += 1
            return dict(ports)
