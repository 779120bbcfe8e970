"""Tuned workflows as /v1 models: `tuned/NAME` for each file `metagen tune` wrote into the workflows folder's
`tuned/`, and `auto` for the most recent of them (or the workflow the server's config names)."""

from __future__ import annotations

import logging
from pathlib import Path

from app.eval.tune.writer import TUNED_FOLDER
from app.service.studio import StudioService
from app.workflow.files import WORKFLOW_SUFFIX, safe_workflow_name, workflow_path

log = logging.getLogger(__name__)

TUNED_PREFIX = f"{TUNED_FOLDER}/"
AUTO_MODEL = "auto"
"""The model id that answers with the most recent tuned workflow (or the one `metagen serve --auto` names)."""


def tuned_dir(service: StudioService) -> Path:
    return service.workflows_dir / TUNED_FOLDER


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def tuned_names(service: StudioService) -> list[str]:
    """The tuned workflows' model ids (`tuned/NAME`), the most recent first (files with odd names are skipped)."""
    folder = tuned_dir(service)
    try:
        files = [p for p in folder.glob(f"*{WORKFLOW_SUFFIX}") if p.is_file()]
    except OSError:
        return []
    names = []
    for path in sorted(files, key=lambda p: (-_mtime(p), p.name)):
        try:
            names.append(TUNED_PREFIX + safe_workflow_name(path.stem))
        except ValueError:
            log.debug("skipping tuned workflow file with an unusable name: %s", path)
    return names


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
