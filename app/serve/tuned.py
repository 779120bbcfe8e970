"""Tuned workflows as /v1 models: `tuned/NAME` for each file `metagen tune` wrote into the workflows folder's
`tuned/` (not the branch files of an adaptive policy), and `auto` for the one recommended last, by the date its
provenance records (or the workflow the server's config names)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from app.eval.tune.writer import BRANCH_ROLE, POLICY_ROLE, TUNED_FOLDER
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
    policy: bool
    """An adaptive tune's policy: listed, but `auto` answers with the workflow the tune recommended."""


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
    role = str(provenance.get("role") or "")
    found = _Recommended(str(provenance.get("date") or ""), role.startswith(BRANCH_ROLE), role == POLICY_ROLE)
    with _cache_lock:
        _read_cache[path] = (key, found)
    return found


def _tuned(service: StudioService) -> list[tuple[str, _Recommended]]:
    """(model id, what it records) of the tuned workflows, the most recently recommended first; not the branch files
    of an adaptive policy (the policy runs them), nor files with odd names."""
    folder = tuned_dir(service)
    try:
        files = [p for p in folder.glob(f"*{WORKFLOW_SUFFIX}") if p.is_file()]
    except OSError:
        return []
    found = []
    for path in files:
        recommended = _recommended(path)
        if recommended is None or recommended.branch:
            continue
        try:
            found.append((TUNED_PREFIX + safe_workflow_name(path.stem), recommended))
        except ValueError:
            log.debug("skipping tuned workflow file with an unusable name: %s", path)
    by_name = sorted(found, key=lambda f: f[0])
    return sorted(by_name, key=lambda f: f[1].date, reverse=True)


def tuned_names(service: StudioService) -> list[str]:
    """The tuned workflows' model ids (`tuned/NAME`), the most recently recommended first."""
    return [name for name, _ in _tuned(service)]


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
    """What `auto` answers with: the configured model id, else the tuned workflow recommended last (an adaptive
    policy only when nothing else was); None if neither."""
    if configured:
        return configured
    found = _tuned(service)
    plain = [name for name, recommended in found if not recommended.policy]
    return (plain or [name for name, _ in found] or [None])[0]
