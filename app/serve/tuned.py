"""Tuned workflows as /v1 models: `tuned/NAME` for each file `metagen tune` wrote into the workflows folder's
`tuned/` (not the branch files of an adaptive policy), and `auto` for the one recommended last, by the date its
provenance records (or the workflow the server's config names)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from app.eval.tune.writer import BRANCH_ROLE, TUNED_FOLDER
from app.service.studio import StudioService
from app.workflow.files import WORKFLOW_SUFFIX, safe_workflow_name, workflow_path
from app.workflow.problems import WorkflowError
from app.workflow.spec import load_workflow_text

log = logging.getLogger(__name__)

TUNED_PREFIX = f"{TUNED_FOLDER}/"
AUTO_MODEL = "auto"
"""The model id that answers with the most recent tuned workflow (or the one `metagen serve --auto` names)."""


def tuned_dir(service: StudioService) -> Path:
    return service.workflows_dir / TUNED_FOLDER


@dataclass(frozen=True)
class _Recommended:
    date: str
    """`provenance.date` written when `metagen tune` recommended it ("" for a file it did not write)."""
    branch: bool


_read_cache: dict[Path, tuple[tuple[int, int], _Recommended]] = {}
_cache_lock = threading.Lock()


def _recommended(path: Path) -> _Recommended | None:
    """What the file records of its recommendation, read once per change of the file; None when it is unreadable.
    The date is the recommendation's own, so touching or editing a file does not make it `auto`'s target."""
    try:
        info = path.stat()
    except OSError:
        return None
    key = (info.st_mtime_ns, info.st_size)
    with _cache_lock:
        cached = _read_cache.get(path)
    if cached is not None and cached[0] == key:
        return cached[1]
    try:
        provenance = load_workflow_text(path.read_text(encoding="utf-8")).provenance or {}
    except (OSError, UnicodeDecodeError, WorkflowError, ValueError) as exc:
        log.debug("tuned workflow %s has no readable provenance: %s", path, exc)
        provenance = {}
    found = _Recommended(str(provenance.get("date") or ""), str(provenance.get("role") or "").startswith(BRANCH_ROLE))
    with _cache_lock:
        _read_cache[path] = (key, found)
    return found


def tuned_names(service: StudioService) -> list[str]:
    """The tuned workflows' model ids (`tuned/NAME`), the most recently recommended first (files with odd names are
    skipped, and so are the branch files of an adaptive policy: the policy runs them)."""
    folder = tuned_dir(service)
    try:
        files = [p for p in folder.glob(f"*{WORKFLOW_SUFFIX}") if p.is_file()]
    except OSError:
        return []
    dated = []
    for path in files:
        found = _recommended(path)
        if found is None or found.branch:
            continue
        try:
            dated.append((found.date, TUNED_PREFIX + safe_workflow_name(path.stem)))
        except ValueError:
            log.debug("skipping tuned workflow file with an unusable name: %s", path)
    by_name = sorted(dated, key=lambda d: d[1])
    return [name for _, name in sorted(by_name, key=lambda d: d[0], reverse=True)]


def tuned_path(service: StudioService, model_id: str) -> Path | None:
    """The file of the tuned workflow `tuned/NAME`; None when `model_id` is no such id or the file is missing."""
    if not model_id.startswith(TUNED_PREFIX):
        return None
    try:
        path = workflow_path(tuned_dir(service), model_id[len(TUNED_PREFIX):])
    except ValueError:
        return None
    return path if path.is_file() else None


def auto_target(service: StudioService, configured: str | None = None) -> str | None:
    """What `auto` answers with: the configured model id, else the most recent tuned workflow; None if neither."""
    if configured:
        return configured
    names = tuned_names(service)
    return names[0] if names else None
