"""Workflow files: a workflow name (never a path) to its file in a folder, and the names saved there."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

log = logging.getLogger(__name__)


WORKFLOW_SUFFIX = ".yaml"


MAX_NAME_LENGTH = 100


_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_ .\-]*", re.ASCII)


_WINDOWS_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(1, 10)),
                     *(f"lpt{i}" for i in range(1, 10))}


def safe_workflow_name(name: str) -> str:
    """A workflow name as stored in the workflows folder (without `.yaml`). Names are not paths:
    separators, `..`, absolute paths, hidden names and odd characters are refused with a ValueError."""
    if not isinstance(name, str):
        raise ValueError(f"a workflow name must be text, got {type(name).__name__}")
    raw = name.strip()
    if raw.lower().endswith((".yaml", ".yml")):
        raw = raw[: raw.rfind(".")]
    shown = name if len(name) <= 60 else name[:60] + "..."
    if not raw:
        raise ValueError("the workflow name is empty; give it a name such as `my_workflow`")
    if "/" in raw or "\\" in raw or raw.startswith("~") or os.path.isabs(raw) or ":" in raw:
        raise ValueError(f"workflow name {shown!r} looks like a path; names are not paths: use a plain name "
                         "such as `my_workflow` (letters, digits, space, _ . -)")
    if ".." in raw:
        raise ValueError(f"workflow name {shown!r} contains '..'; use a plain name such as `my_workflow`")
    if len(raw) > MAX_NAME_LENGTH:
        raise ValueError(f"workflow name is {len(raw)} characters long; keep it under {MAX_NAME_LENGTH + 1}")
    if not _NAME_RE.fullmatch(raw):
        raise ValueError(f"workflow name {shown!r} has characters that are not allowed; use letters, digits, "
                         "space, _ . - and start with a letter or digit")
    if raw.endswith((".", " ")):
        raise ValueError(f"workflow name {shown!r} must not end with a dot or a space")
    if raw.split(".")[0].lower() in _WINDOWS_RESERVED:
        raise ValueError(f"workflow name {shown!r} is reserved by Windows; choose another name")
    return raw


def workflow_path(folder: Path, name: str) -> Path:
    """The one place a workflow name becomes a file path: `folder/<safe name>.yaml`, always inside `folder`."""
    safe = safe_workflow_name(name)
    base = Path(folder).expanduser().resolve()
    path = base / f"{safe}{WORKFLOW_SUFFIX}"
    if path.parent != base:  # cannot happen for a safe name; kept as the last line of defence
        raise ValueError(f"workflow name {name!r} would leave the workflows folder")
    return path


def list_workflow_names(folder: Path) -> list[str]:
    """Names of the workflows saved in `folder` (files with odd names are skipped)."""
    try:
        entries = sorted(Path(folder).expanduser().glob(f"*{WORKFLOW_SUFFIX}"))
    except OSError:
        return []
    names = []
    for entry in entries:
        try:
            names.append(safe_workflow_name(entry.stem))
        except ValueError:
            log.debug("skipping workflow file with an unusable name: %s", entry)
    return names
