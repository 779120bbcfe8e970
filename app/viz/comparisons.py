"""The paired comparisons of an evaluation as an HTML table: largest difference first, the significant ones
marked, each with its plain sentence (the Evaluate tab and the offline report)."""

from __future__ import annotations

from typing import Any

from app.viz.common import esc


def _points(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:+.1f}"


def comparisons_body(summary: dict[str, Any]) -> str:
    """The table of the summary's comparisons ('' when fewer than two points ran on shared items)."""
    comparisons = summary.get("comparisons") or []
    if not comparisons:
        return ""
    rows = []
    for c in comparisons:
        lo, hi = (c.get("ci") or [None, None])[:2]
        mark = "✔" if c.get("significant") else ""
        rows.append(f"<tr class=\"mg-cmp{' mg-cmp-significant' if mark else ''}\">"
                    f"<td>{esc(c['a'])}</td><td>{esc(c['b'])}</td><td class=num>{c['n']}</td>"
                    f"<td class=num>{_points(c.get('diff'))}</td><td class=num>[{_points(lo)}, {_points(hi)}]</td>"
                    f"<td class=num>{c['p_value']:.3g}</td><td>{esc(c['method'])}</td>"
                    f"<td title=\"p &lt; 0.05\">{mark}</td><td class=mg-muted>{esc(c.get('sentence', ''))}</td></tr>")
    against = f" against the baseline {esc(summary['baseline'])}" if summary.get("baseline") else ""
    return ("<table id=mg-eval-comparisons><thead><tr><th>A</th><th>B</th><th class=num>items</th>"
            "<th class=num>A − B (points)</th><th class=num>95% CI (paired)</th><th class=num>p</th><th>test</th>"
            "<th>p &lt; 0.05</th><th>in words</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
            f'<p class="mg-muted">Paired comparisons{against} on the items both points ran, largest difference '
            "first: exact McNemar for one 0/1 run per item, a sign-flip permutation test otherwise (items with "
            "repeats scored by the mean of their runs).</p>")
