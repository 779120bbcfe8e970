"""DeepConf's confidence stop read from a run's trace: the samples it stopped and the tokens it saved, per node."""

from __future__ import annotations

from typing import Any

from app.viz.common import esc, events_of, fmt_num

CONFIDENCE_MODE = "confidence"
"""The "mode" of a sampler's adaptive_stop event under `adaptive: confidence` (nodes/kinds/generate.py)."""


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def confidence_stops(record: dict[str, Any], node_id: str | None = None) -> list[dict[str, Any]]:
    """One entry per DeepConf (`adaptive: confidence`) sampler run: its node, planned and drawn samples, the
    calibrated threshold, the samples stopped early (index, seed, tokens written) and the tokens saved (the
    node's own estimate: samples never drawn and the unwritten rest of the stopped ones)."""
    out = []
    for event in events_of(record, "adaptive_stop", node_id):
        data = event.get("data") or {}
        if data.get("mode") != CONFIDENCE_MODE:
            continue
        stopped = [s for s in data.get("stopped") or [] if isinstance(s, dict)]
        out.append({
            "node_id": event.get("node_id"), "n": _count(data.get("n")), "drawn": _count(data.get("drawn")),
            "threshold": data.get("threshold"), "group_size": data.get("group_size"),
            "stopped": stopped, "stopped_count": _count(data.get("stopped_count")) or len(stopped),
            "tokens_generated": _count(data.get("tokens_generated")),
            "tokens_saved_est": _count(data.get("tokens_saved_est")),
        })
    return out


def confidence_totals(record: dict[str, Any]) -> tuple[int, int]:
    """(samples stopped by the confidence stop, tokens saved by DeepConf, estimated) over the whole run."""
    stops = confidence_stops(record)
    return sum(s["stopped_count"] for s in stops), sum(s["tokens_saved_est"] for s in stops)


def stopped_samples_body(record: dict[str, Any], node_id: str) -> str:
    """The samples DeepConf stopped at `node_id` (left out of its candidates), as an HTML table ('' if none)."""
    parts = []
    for stop in confidence_stops(record, node_id):
        rows = "".join("<tr>" + "".join(f"<td class=num>{esc(str(s.get(key, '-')))}</td>"
                                        for key in ("index", "seed", "tokens")) + "</tr>" for s in stop["stopped"])
        parts.append(
            f"<h3>Stopped by the confidence stop (DeepConf) · {stop['stopped_count']} of {stop['drawn']} drawn</h3>"
            f'<p class="mg-muted">threshold {esc(fmt_num(stop["threshold"], 3))} on the lowest confidence of '
            f"{esc(fmt_num(stop['group_size']))} tokens in a row; {fmt_num(stop['tokens_generated'])} tokens "
            f"written, about {fmt_num(stop['tokens_saved_est'])} saved (samples not drawn included). Stopped "
            "samples have no trustworthy answer, so they are not candidates.</p>"
            + ("<table class=mg-stopped><thead><tr><th class=num>#</th><th class=num>seed</th>"
               f"<th class=num>tokens written</th></tr></thead><tbody>{rows}</tbody></table>" if rows else ""))
    return "".join(parts)
