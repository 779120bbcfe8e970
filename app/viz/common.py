"""Shared bits of the trace views: record lookups, text shortening, colours and the views' CSS."""

from __future__ import annotations

import html
import math
from typing import Any

from app.run.status import (
    BUDGET_EXCEEDED,
    CANCELLED,
    FAILED,
    INTERRUPTED,
    NODE_CACHED,
    NODE_SKIPPED,
    RUNNING,
    SUCCEEDED,
)

REUSED = "reused from the shared pool"
"""Why a point's (a tune finalist's) per-item cost exceeds what it drew itself: its samples came from the pool."""
REUSED_FOOTNOTE = ("its tokens per item count the pooled samples as if it ran alone; its seconds are only its own "
                   "share (another finalist's run drew and timed them)")
"""The footnote of a held-out row marked `*` (its `note` is REUSED), the same in the CLI, the tab and the report."""

STATUS_COLORS = {
    SUCCEEDED: "#2f7ed8", NODE_CACHED: "#2ca02c", FAILED: "#d62728", CANCELLED: "#ff7f0e",
    BUDGET_EXCEEDED: "#ff7f0e", NODE_SKIPPED: "#b0b0b0", RUNNING: "#9467bd", INTERRUPTED: "#8c564b",
}
WINNER_COLOR = "#e6a700"
MUTED = "#9aa0a6"

CSS = """
.mg-viz{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;font-size:14px;line-height:1.45}
.mg-viz h3{margin:.6em 0 .3em;font-size:15px}
.mg-viz table{border-collapse:collapse;width:100%;margin:.3em 0}
.mg-viz th,.mg-viz td{border-bottom:1px solid rgba(127,127,127,.25);padding:3px 6px;text-align:left;
  vertical-align:top}
.mg-viz th{font-weight:600}
.mg-viz td.num,.mg-viz th.num{text-align:right;font-variant-numeric:tabular-nums}
.mg-viz .mg-cards{display:flex;flex-wrap:wrap;gap:8px;margin:.4em 0}
.mg-viz .mg-card{border:1px solid rgba(127,127,127,.3);border-radius:6px;padding:6px 10px;min-width:120px}
.mg-viz .mg-card b{display:block;font-size:18px}
.mg-viz .mg-card span{font-size:12px;opacity:.75}
.mg-viz .mg-badge{display:inline-block;border-radius:10px;padding:0 8px;color:#fff;font-size:12px}
.mg-viz .mg-muted{opacity:.7}
.mg-viz pre,.mg-viz .mg-text{white-space:pre-wrap;word-break:break-word;margin:.2em 0;font-family:
  ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px}
.mg-viz .mg-box{border:1px solid rgba(127,127,127,.3);border-radius:6px;padding:6px 10px;margin:.3em 0}
.mg-viz .mg-winner{background:rgba(230,167,0,.18)}
.mg-viz del{background:rgba(214,39,40,.22);text-decoration:line-through}
.mg-viz ins{background:rgba(44,160,44,.25);text-decoration:none}
.mg-viz .mg-tok{border-radius:2px}
.mg-viz .mg-diffadd{color:#2ca02c}.mg-viz .mg-diffdel{color:#d62728}
.mg-viz details>summary{cursor:pointer}
.mg-viz .mg-bracket{display:flex;gap:12px;align-items:center;overflow-x:auto}
.mg-viz .mg-round{display:flex;flex-direction:column;gap:6px;min-width:200px;max-width:360px}
"""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def shorten(text: str | None, limit: int = 160) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def wrap_for_hover(text: str | None, limit: int = 600, width: int = 80) -> str:
    """Text for a Plotly hover label: cut, HTML-escaped, with <br> every ~width characters."""
    text = shorten(text, limit)
    lines = []
    for para in text.splitlines() or [""]:
        while len(para) > width:
            cut = para.rfind(" ", 0, width)
            cut = cut if cut > width // 2 else width
            lines.append(para[:cut])
            para = para[cut:].lstrip()
        lines.append(para)
    return "<br>".join(html.escape(line) for line in lines)


def fmt_num(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:,.{digits}f}"
    return str(value)


def badge(status: str | None) -> str:
    color = STATUS_COLORS.get(status or "", MUTED)
    return f'<span class="mg-badge" style="background:{color}">{esc(status or "?")}</span>'


def run_start(record: dict[str, Any]) -> float:
    """The run's time origin: its start, or the earliest time seen in it."""
    run = record.get("run", {})
    times = [run.get("started_at")]
    times += [n.get("started_at") for n in record.get("nodes", [])]
    times += [c.get("start") for c in record.get("lm_calls", [])]
    found = [t for t in times if isinstance(t, int | float) and t > 0]
    return min(found) if found else 0.0


def node_by_id(record: dict[str, Any], node_id: str) -> dict[str, Any] | None:
    return next((n for n in record.get("nodes", []) if n.get("node_id") == node_id), None)


def events_of(record: dict[str, Any], kind: str, node_id: str | None = None) -> list[dict[str, Any]]:
    return [e for e in record.get("events", [])
            if e.get("kind") == kind and (node_id is None or e.get("node_id") == node_id)]


def wrap_section(body: str) -> str:
    """A fragment with its own CSS (for the UI, where each view is embedded on its own)."""
    return f'<div class="mg-viz"><style>{CSS}</style>{body}</div>'


def message(text: str) -> str:
    return wrap_section(f'<p class="mg-muted">{esc(text)}</p>')
