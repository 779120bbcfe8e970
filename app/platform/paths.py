"""Where user data lives: the platform's conventional data folder, overridable by environment."""

from __future__ import annotations

import os
import sys
from pathlib import Path

APP_DIR_NAME = "metagen-studio"


def data_dir() -> Path:
    """$METAGEN_HOME, else ~/.local/share/metagen-studio (Linux, honouring XDG_DATA_HOME),
    ~/Library/Application Support/metagen-studio (macOS), %APPDATA%/metagen-studio (Windows)."""
    override = os.environ.get("METAGEN_HOME")
    if override:
        return Path(override).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / APP_DIR_NAME
    if os.name == "nt":
        return Path(os.environ.get("APPDATA", Path.home() / "AppData" / "Roaming")) / APP_DIR_NAME
    return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / APP_DIR_NAME


def workflows_dir() -> Path:
    return Path(os.environ.get("METAGEN_WORKFLOWS", data_dir() / "workflows")).expanduser()


def datasets_dir() -> Path:
    """Evaluation datasets (JSONL / CSV) the user keeps or uploads."""
    return Path(os.environ.get("METAGEN_DATASETS", data_dir() / "datasets")).expanduser()


def models_dir() -> Path:
    return Path(os.environ.get("METAGEN_MODELS", data_dir() / "models")).expanduser()


def trace_db_path() -> Path:
    return Path(os.environ.get("METAGEN_TRACE_DB", data_dir() / "traces.db")).expanduser()


def settings_path() -> Path:
    return data_dir() / "settings.json"
