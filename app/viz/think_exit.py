"""Early exit of thinking (DEER) read from a run's trace: per node the probes, the samples that exited, tokens saved."""

from __future__ import annotations

from typing import Any

from app.viz.common import esc, events_of, fmt_num


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def early_exits(record: dict[str, Any], node_id: str | None = None) -> list[dict[str, Any]]:
    """One "think_early_exit" payload per generating node run with `think_early_exit`, its node id added."""
    return [{**(event.get("data") or {}), "node_id": event.get("node_id")}
            for event in events_of(record, "think_early_exit", node_id)]


def early_exit_totals(record: dict[str, Any]) -> tuple[int, int, int]:
    """(samples that exited early, thinking tokens saved (estimated), probe tokens spent) over the whole run."""
    found = early_exits(record)
    return (sum(_count(e.get("exited_count")) for e in found),
            sum(_count(e.get("thinking_tokens_saved_est")) for e in found),
            sum(_count(e.get("probe_tokens")) for e in found))


def early_exit_body(record: dict[str, Any], node_id: str) -> str:
    """The probes of `node_id`'s samples and what early exit saved, as HTML ('' without early exit)."""
    parts = []
    for data in early_exits(record, node_id):
        rows = []
        for sample in data.get("samples") or []:
            probes = "; ".join(f"at {fmt_num(p.get('at_tokens'))} tok: p̄ {fmt_num(p.get('confidence'), 3)} → "
                               f"{esc(p.get('answer'))}" for p in sample.get("probes") or []) or "no reflection point"
            rows.append(f"<tr class=\"{'mg-winner' if sample.get('exited') else ''}\">"
                        f"<td class=num>{esc(sample.get('index'))}</td><td>{'exited' if sample.get('exited') else '-'}"
                        f"</td><td class=num>{fmt_num(sample.get('thinking_tokens'))}</td>"
                        f"<td class=num>{fmt_num(sample.get('probe_tokens'))}</td><td>{probes}</td></tr>")
        parts.append(
            f"<h3>Early exit of thinking (DEER) · {fmt_num(data.get('exited_count'))} of "
            f"{len(data.get('samples') or [])} samples exited</h3>"
            f'<p class="mg-muted">confidence {fmt_num(data.get("confidence"), 3)} (mean token probability of the trial '
            f"answer); {fmt_num(data.get('thinking_tokens'))} thinking tokens written, "
            f"{fmt_num(data.get('probe_tokens'))} spent on probes, about "
            f"{fmt_num(data.get('thinking_tokens_saved_est'))} thinking tokens saved (against "
            f"{fmt_num(data.get('reference_tokens'))} per sample that thought to the end).</p>"
            "<table class=mg-early-exit><thead><tr><th class=num>#</th><th>exit</th><th class=num>thinking tok.</th>"
            f"<th class=num>probe tok.</th><th>probes</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")
    return "".join(parts)
