"""Locates the packaged static/ and workflows/ folders, from a source checkout or an installed wheel."""

from __future__ import annotations

import sys
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parents[2]
_SHARE = Path(sys.prefix) / "share" / "metagen-studio"


def _find(name: str) -> Path:
    for base in (_REPO_ROOT, _SHARE):
        candidate = base / name
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"cannot find the {name}/ folder (looked in {_REPO_ROOT} and {_SHARE}); "
                            "reinstall metagen-studio")


def static_dir() -> Path:
    return _find("static")


def examples_dir() -> Path:
    """The example workflows shipped with the package."""
    return _find("workflows")


def tasks_dir() -> Path:
    """The task presets shipped with the package (`tasks/*.yaml`)."""
    return _find("tasks")
