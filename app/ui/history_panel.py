"""The editor page's History panel server functions (static/history_panel.js): versions, a read-only preview,
the diff of two versions drawn on the canvas, restore, names and publishing (app.service.version_panel)."""

from __future__ import annotations

import copy
import re
from typing import Any

from app.service.errors import UserError
from app.service.studio import StudioService

CURRENT = "current"
"""The diff's `b` for the workflow file as saved now (the latest version: the file is recorded when listed)."""
_REF_RE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def _name(payload: dict[str, Any]) -> str:
    name = str(payload.get("name") or "").strip()
    if not name:
        raise UserError("save the workflow first: the History panel lists the versions of a saved workflow")
    return name


def _ref(payload: dict[str, Any], key: str = "version") -> str:
    """A version reference as the panel sends it (a hash or its prefix, a name, -1, latest, published)."""
    ref = str(payload.get(key) or "").strip()
    if not _REF_RE.fullmatch(ref):
        raise UserError(f"{ref[:40]!r} is not a version reference (a hash, its prefix, a version name or -1)")
    return ref


def mg_history(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    """The open workflow's versions, newest first, and whether this visitor may change them."""
    name = _name(payload)
    return {"name": name, "versions": service.version_panel.workflow_history(name),
            "owner": not service.policy.share_mode}


def mg_open_version(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    """One version for the read-only preview (`open_workflow`'s answer with `read_only: True`)."""
    return service.version_panel.open_version(_name(payload), _ref(payload))


def diff_canvas(old: dict[str, Any], new: dict[str, Any], diff: dict[str, Any]) -> tuple[dict[str, Any],
                                                                                         dict[str, str]]:
    """The canvas of a diff: the newer workflow's editor JSON with the removed nodes of the older one put back
    (drawn ghosted, at their old place, wired only to nodes still there), and the marks by node id: `added`,
    `removed`, `changed` (a param, model or map changed, retyped, renamed, or its sub-workflow changed)."""
    merged = copy.deepcopy(new)
    nodes = diff.get("nodes") or {}
    marks: dict[str, str] = {}
    for entry in nodes.get("added") or []:
        marks[entry["id"]] = "added"
    for entry in nodes.get("retyped") or []:
        marks[entry["id"]] = "changed"
    for entry in nodes.get("renamed") or []:
        marks[entry["new"]] = "changed"
    for entry in diff.get("params") or []:
        marks[entry["node"]] = "changed"
    for where in diff.get("subworkflows") or {}:
        marks[where.split("/", 1)[0]] = "changed"
    removed = {entry["id"] for entry in nodes.get("removed") or []}
    present = {node["id"] for node in merged.get("nodes") or []} | removed
    old_layout = old.get("layout") or {}
    for node in old.get("nodes") or []:
        if node["id"] not in removed:
            continue
        ghost = copy.deepcopy(node)
        ghost["inputs"] = {port: source for port, source in (node.get("inputs") or {}).items()
                           if str(source).partition(".")[0] in present or str(source).startswith("inputs.")}
        merged.setdefault("nodes", []).append(ghost)
        marks[node["id"]] = "removed"
        if node["id"] in old_layout:
            merged.setdefault("layout", {})[node["id"]] = old_layout[node["id"]]
    return merged, marks


def mg_diff_versions(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    """The diff from version `a` to version `b` (`current` or empty: the file as saved now) with its readable
    `lines`, and the canvas to draw it on: {workflow, marks}."""
    name = _name(payload)
    panel = service.version_panel
    ref_a = _ref(payload, "a")
    ref_b = None if str(payload.get("b") or CURRENT) == CURRENT else _ref(payload, "b")
    diff = panel.diff_versions(name, ref_a, ref_b)
    old, new = panel.open_version(name, ref_a), panel.open_version(name, ref_b)
    if old.get("error") or new.get("error"):
        raise UserError("a version of this workflow no longer loads, so its diff cannot be drawn; "
                        "the list below says what changed")
    workflow, marks = diff_canvas(old["workflow"], new["workflow"], diff)
    return {**diff, "workflow": workflow, "marks": marks, "a_version": old["version"], "b_version": new["version"],
            "name": name}


def mg_restore_version(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    """Write a version back to the file (the current file kept as a version first); the file as now opened."""
    name = _name(payload)
    message = payload.get("message")
    restored = service.version_panel.restore_version(name, _ref(payload),
                                                     message[:500] if isinstance(message, str) else "")
    return {**restored, "versions": service.version_panel.workflow_history(name)}


def mg_name_version(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    """Name a version (an empty label removes its name)."""
    label = str(payload.get("label") or "").strip()[:80]
    return service.version_panel.name_version(_name(payload), _ref(payload), label or None)


def mg_publish_version(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    """Publish a version for app links, MCP tools, /v1 and `auto` (the owner's alone: visitors get its error)."""
    return service.version_panel.publish_version(_name(payload), _ref(payload))


def mg_unpublish_version(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    """Serve the file as saved again (the owner's alone)."""
    return {"unpublished": service.version_panel.unpublish_version(_name(payload))}


HISTORY_FUNCTIONS = (mg_history, mg_open_version, mg_diff_versions, mg_restore_version, mg_name_version,
                     mg_publish_version, mg_unpublish_version)
