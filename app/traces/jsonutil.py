"""JSON encoding of trace columns: tolerant of odd values, compact, and previews of large inputs."""

from __future__ import annotations

import json
import math
from typing import Any

PREVIEW_CHARS = 2000


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def loads(text: str | None, default: Any = None) -> Any:
    if text is None or text == "":
        return default
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return default


def finite(value: Any) -> Any:
    """The value with NaN/±inf floats replaced by None (strict JSON, as browsers parse it)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def preview(value: Any, limit: int = PREVIEW_CHARS) -> Any:
    """A small stand-in for a node input: candidate sets become a count, long texts are cut."""
    if isinstance(value, dict) and value.get("__type__") == "candidates":
        return {"__type__": "candidates", "count": len(value.get("candidates", [])),
                "winner": value.get("winner")}
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + f"... ({len(value)} chars)"
    if isinstance(value, dict):
        return {k: preview(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        if len(value) > 50:
            return [preview(v, limit) for v in value[:50]] + [f"... ({len(value)} items)"]
        return [preview(v, limit) for v in value]
    return value
