"""The version behind a figure, looked up in the version store for the Traces, Evaluate and Tune tabs: a run's,
each evaluation point's and a tune's recommended workflow's, drawn by app.viz.version_links."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from app.service.studio import StudioService
from app.viz.version_links import version_html

log = logging.getLogger(__name__)


def recorded_version(service: StudioService, version: str | None, workflow: str | None = None) -> Any:
    """The recorded version (app.traces.versions.Version) with hash `version`, of `workflow` when recorded there;
    None without a hash, without a version store, or when no save recorded it."""
    if not version:
        return None
    versions = service.versions
    if versions is None:
        return None
    try:
        return versions.of_run(str(version), workflow or None)
    except Exception:  # a figure never breaks for its version line
        log.warning("could not look up version %s", version, exc_info=True)
        return None


def run_version_html(service: StudioService, record: dict[str, Any]) -> str:
    """The Traces tab's line: which version the run ran, and "Open the version this ran" when it is recorded."""
    run = record.get("run") or {}
    version = run.get("workflow_hash") or ""
    return version_html(version, recorded_version(service, version, run.get("workflow")))


def tune_version_html(service: StudioService, recommended: dict[str, Any]) -> str:
    """The Tune tab's line for the recommended workflow's version ("" when the tune wrote no workflow)."""
    path = recommended.get("path")
    if not path:
        return ""
    version = recommended.get("version") or ""
    return version_html(version, recorded_version(service, version, Path(str(path)).stem),
                        lead="The recommended workflow is", link_text="Open this version")


def with_version_links(service: StudioService, summary: dict[str, Any]) -> dict[str, Any]:
    """An evaluation summary whose points carry `version_workflow`: the workflow name their version is recorded
    under (the version column's link), None when no save recorded it."""
    points = summary.get("points")
    if not points:
        return summary
    found: dict[tuple[str, str], str | None] = {}
    marked = []
    for point in points:
        key = (str(point.get("version") or ""), str(point.get("workflow") or ""))
        if key not in found:
            recorded = recorded_version(service, key[0], key[1])
            found[key] = recorded.workflow if recorded is not None else None
        marked.append({**point, "version_workflow": found[key]})
    return {**summary, "points": marked}
