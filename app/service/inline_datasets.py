"""Datasets given as rows in memory (the Python API's lists of dicts and DataFrames) kept as JSONL files by content,
so an evaluation on them is recorded, resumable and reproducible like one on a file."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from app.platform.fileio import atomic_write_text
from app.service.errors import UserError

PREFIX = "rows-"


def _plain(value: Any) -> Any:
    """JSON for one cell: numpy scalars as Python numbers, NaN (pandas' missing value) as null."""
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def rows_text(rows: Any) -> str:
    """The rows as JSONL text; UserError naming `data` when they are not a list of dicts with text keys."""
    if not isinstance(rows, list | tuple) or not rows:
        raise UserError("data: give a dataset path, a non-empty list of dicts or a pandas DataFrame")
    lines = []
    for index, row in enumerate(rows):
        if not isinstance(row, dict) or not all(isinstance(k, str) for k in row):
            raise UserError(f"data[{index}]: each row must be a dict with text keys (column -> value), "
                            f"got {type(row).__name__}")
        try:
            lines.append(json.dumps({k: _plain(v) for k, v in row.items()}, ensure_ascii=False, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise UserError(f"data[{index}]: a value is not JSON (text, numbers, lists, dicts): {exc}") from None
    return "\n".join(lines) + "\n"


def rows_file(rows: Any, folder: Path) -> Path:
    """Write the rows once as `rows-<hash>.jsonl` in `folder` (the same rows give the same file)."""
    text = rows_text(rows)
    path = folder / f"{PREFIX}{hashlib.sha256(text.encode()).hexdigest()[:16]}.jsonl"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
    return path
