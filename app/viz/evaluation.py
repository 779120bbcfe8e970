"""Evaluation views: accuracy curves, accuracy against tokens, pass@k, the items table and the offline report."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go

from app.viz.common import CSS, MUTED, REUSED, WINNER_COLOR, badge, esc, fmt_num, message, shorten, wrap_section
from app.viz.comparisons import comparisons_body
from app.viz.html_export import PAGE_CSS
from app.viz.label_layout import label_positions
from app.viz.version_links import version_cell

log = logging.getLogger(__name__)

WORKFLOW_COLORS = ("#2f7ed8", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#d62728", "#17becf", "#e377c2")
"""One colour per workflow, in the order the workflows first appear among the points."""
CORRECT_COLOR = "#2ca02c"
WRONG_COLOR = "#d62728"
NO_POINTS = "This evaluation has no graded points yet."
LAYOUT = {"template": "plotly_white", "height": 420, "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
          "legend": {"orientation": "h", "y": -0.2}}


# ---- shared helpers -------------------------------------------------------------------------------------------


def _graded(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Points with an accuracy (at least one graded item)."""
    return [p for p in summary.get("points") or [] if p.get("accuracy") is not None]


def _workflow_colors(summary: dict[str, Any]) -> dict[str, str]:
    names = dict.fromkeys(str(p.get("workflow")) for p in summary.get("points") or [])
    return {name: WORKFLOW_COLORS[k % len(WORKFLOW_COLORS)] for k, name in enumerate(names)}


def _by_workflow(points: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        grouped.setdefault(str(p.get("workflow")), []).append(p)
    return grouped


def _axis_keys(summary: dict[str, Any]) -> list[str]:
    """The sweep axes as point param keys ("node.param"), in sweep order."""
    return [f"{a.get('node')}.{a.get('param')}" for a in summary.get("sweep") or []]


def _axis_of(point: dict[str, Any], keys: list[str]) -> str | None:
    """The first sweep axis present in the point's params (its first param when the sweep list is missing)."""
    params = point.get("params") or {}
    return next((k for k in keys if k in params), next(iter(params), None))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _powers_of_two(values: list[Any]) -> bool:
    """True when every value is a positive whole power of two and there are at least two distinct ones."""
    if not all(_is_number(v) for v in values) or len(set(values)) < 2:
        return False
    return all(v > 0 and float(v).is_integer() and (int(v) & (int(v) - 1)) == 0 for v in values)


def _log2_axis(values: list[Any]) -> dict[str, Any]:
    ticks = sorted({v for v in values if _is_number(v)})
    return {"type": "log", "tickvals": ticks, "ticktext": [fmt_num(v) for v in ticks]}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _error_bars(points: list[dict[str, Any]]) -> dict[str, Any]:
    """95% interval as asymmetric error bars, in percent."""
    lo = [100 * (p["accuracy"] - (p.get("ci") or [p["accuracy"]] * 2)[0]) for p in points]
    hi = [100 * ((p.get("ci") or [p["accuracy"]] * 2)[1] - p["accuracy"]) for p in points]
    return {"type": "data", "symmetric": False, "array": hi, "arrayminus": lo, "thickness": 1.2, "width": 4}


TOKEN_AXES = {"completion": "completion tokens", "answer": "answer tokens (thinking left out)",
              "thinking": "thinking tokens"}
"""What the accuracy-against-tokens figure can put on its x axis."""


def _tokens_per_item(point: dict[str, Any], tokens: str = "completion") -> float:
    if tokens == "completion":
        cost = point.get("cost_tokens", point.get("completion_tokens")) or 0  # as if the point had run alone
    else:
        cost = point.get(f"{tokens}_tokens") or 0
    return cost / max(point.get("total") or 0, 1)


def _reused_note(point: dict[str, Any]) -> str:
    """' (reused from the shared pool)' for a point whose draws came from the shared sample pool, else ''."""
    cost = point.get("cost_tokens")
    reused = isinstance(cost, int | float) and cost > (point.get("completion_tokens") or 0)
    return f" ({REUSED})" if reused else ""


def _hover(point: dict[str, Any]) -> str:
    lo, hi = (point.get("ci") or [None, None])[:2]
    return (f"<b>{esc(point.get('label'))}</b><br>accuracy {_pct(point['accuracy'])} "
            f"(95% CI {_pct(lo)}–{_pct(hi)})<br>{point.get('correct')}/{point.get('total')} correct<br>"
            f"{fmt_num(_tokens_per_item(point), 1)} completion tokens per item{esc(_reused_note(point))}")


def _percent_yaxis(fig: go.Figure, title: str) -> None:
    fig.update_yaxes(title={"text": title}, range=[0, 100], ticksuffix="%", dtick=20)


# ---- figures --------------------------------------------------------------------------------------------------


def accuracy_curve_figure(summary: dict[str, Any]) -> go.Figure | None:
    """Accuracy against the swept value, one line per workflow with 95% intervals; a workflow without a sweep is
    one labelled marker (at x=1 when the axis is a sample count n). None without graded points."""
    points = _graded(summary)
    if not points:
        return None
    keys = _axis_keys(summary)
    axes = [a for a in dict.fromkeys(_axis_of(p, keys) for p in points) if a]
    swept = [(p.get("params") or {})[a] for p in points if (a := _axis_of(p, keys))]
    numeric = bool(swept) and all(_is_number(v) for v in swept)
    n_like = bool(axes) and all(a.rpartition(".")[2] in ("n", "samples") for a in axes)
    colors = _workflow_colors(summary)
    fig = go.Figure()
    plotted: list[Any] = []
    for workflow, group in _by_workflow(points).items():
        color = colors.get(workflow, MUTED)
        on_axis = [(p["params"][a], p) for p in group if (a := _axis_of(p, keys))]
        if numeric:
            on_axis.sort(key=lambda xp: xp[0])
        if on_axis:
            xs = [x if numeric else str(x) for x, _ in on_axis]
            plotted += xs
            fig.add_trace(go.Scatter(
                x=xs, y=[100 * p["accuracy"] for _, p in on_axis], mode="lines+markers", name=workflow,
                line={"color": color}, marker={"color": color, "size": 8}, error_y=_error_bars([p for _, p in on_axis]),
                hovertext=[_hover(p) for _, p in on_axis], hoverinfo="text", cliponaxis=False))
        for p in (p for p in group if not _axis_of(p, keys)):
            label = str(p.get("label"))
            x: Any = (1 if n_like else min(swept)) if numeric else label  # no sweep anywhere: a category each
            plotted.append(x)
            fig.add_trace(go.Scatter(
                x=[x], y=[100 * p["accuracy"]], mode="markers+text", name=label, text=[shorten(label, 40)],
                textposition="middle right", marker={"color": color, "size": 11, "symbol": "diamond"},
                error_y=_error_bars([p]), hovertext=[_hover(p)], hoverinfo="text", cliponaxis=False))
            if swept:  # a reference level across the sweep, to read the curve against
                fig.add_hline(y=100 * p["accuracy"], line={"color": color, "dash": "dot", "width": 1}, opacity=0.6)
    x_title = ", ".join(axes) if axes else "workflow"
    fig.update_layout(title={"text": "Accuracy by " + x_title, "font": {"size": 14}}, **LAYOUT)
    labelled = max((len(shorten(str(p.get("label")), 40)) for p in points if not _axis_of(p, keys)), default=0)
    if labelled:  # a marker's label is written to its right: room for the last one, which was cut off
        fig.update_layout(margin={**LAYOUT["margin"], "r": min(320, 20 + 7 * labelled)})
    if numeric and _powers_of_two(plotted):
        fig.update_xaxes(title={"text": x_title + " (log₂ scale)"}, **_log2_axis(plotted))
    else:
        fig.update_xaxes(title={"text": x_title}, type=None if numeric else "category")
    _percent_yaxis(fig, "accuracy (95% CI)")
    return fig


def accuracy_tokens_figure(summary: dict[str, Any], tokens: str = "completion") -> go.Figure | None:
    """Accuracy against mean completion tokens per item (`tokens`: "answer" or "thinking" for those alone): a
    labelled marker per point, one colour per workflow, and the Pareto frontier (of completion tokens) as a dashed
    step line. None without graded points."""
    if tokens not in TOKEN_AXES:
        raise ValueError(f"tokens must be one of {', '.join(TOKEN_AXES)}, got {tokens!r}")
    points = _graded(summary)
    if not points:
        return None
    colors = _workflow_colors(summary)
    xs = [_tokens_per_item(p, tokens) for p in points]
    wide = min(xs) > 0 and max(xs) / min(xs) >= 10
    texts = [shorten(str(p.get("label")), 40) for p in points]
    # each label on a side of its marker where it overlaps no other label and is not cut at the plot's edge
    sides = dict(zip(map(id, points), label_positions(xs, [p["accuracy"] for p in points], texts, log_x=wide),
                     strict=True))
    fig = go.Figure()
    for workflow, group in _by_workflow(points).items():
        color = colors.get(workflow, MUTED)
        fig.add_trace(go.Scatter(
            x=[_tokens_per_item(p, tokens) for p in group], y=[100 * p["accuracy"] for p in group],
            mode="markers+text", name=workflow, text=[shorten(str(p.get("label")), 40) for p in group],
            textposition=[sides[id(p)] for p in group],
            marker={"color": color, "size": 10, "symbol": ["star" if p.get("pareto") else "circle" for p in group]},
            hovertext=[_hover(p) for p in group], hoverinfo="text", cliponaxis=False))
    front = sorted((p for p in points if p.get("pareto")), key=_tokens_per_item) if tokens == "completion" else []
    if front:
        fig.add_trace(go.Scatter(
            x=[_tokens_per_item(p) for p in front], y=[100 * p["accuracy"] for p in front], mode="lines",
            name="Pareto frontier", line={"color": WINNER_COLOR, "dash": "dash", "shape": "hv", "width": 2},
            hoverinfo="skip"))
    fig.update_layout(title={"text": f"Accuracy against {TOKEN_AXES[tokens]} per item", "font": {"size": 14}},
                      **LAYOUT)
    fig.update_xaxes(title={"text": f"mean {TOKEN_AXES[tokens]} per item" + (" (log scale)" if wide else "")},
                     type="log" if wide else "linear", rangemode="tozero")
    _percent_yaxis(fig, "accuracy")
    return fig


def pass_at_k_figure(summary: dict[str, Any]) -> go.Figure | None:
    """Unbiased pass@k against k, one line per curve. None without per-sample grades."""
    curves = summary.get("pass_at_k") or []
    if not curves:
        return None
    colors = _workflow_colors(summary)
    fig = go.Figure()
    ks: list[Any] = []
    for k, curve in enumerate(curves):
        color = colors.get(str(curve.get("workflow")), WORKFLOW_COLORS[k % len(WORKFLOW_COLORS)])
        ks += list(curve.get("k") or [])
        fig.add_trace(go.Scatter(
            x=list(curve.get("k") or []), y=[100 * v for v in curve.get("pass_at_k") or []], mode="lines+markers",
            name=f"{curve.get('label')} (n={curve.get('n')}, {curve.get('items')} items)",
            line={"color": color}, marker={"color": color, "size": 8}, cliponaxis=False,
            hovertemplate=f"<b>{esc(curve.get('label'))}</b><br>pass@%{{x}} = %{{y:.1f}}%<extra></extra>"))
    fig.update_layout(title={"text": "pass@k (any of k samples correct)", "font": {"size": 14}}, **LAYOUT)
    if _powers_of_two(ks):
        fig.update_xaxes(title={"text": "k (log₂ scale)"}, **_log2_axis(ks))
    else:
        fig.update_xaxes(title={"text": "k"}, tickvals=sorted(set(ks)))
    _percent_yaxis(fig, "pass@k")
    return fig


# ---- HTML -----------------------------------------------------------------------------------------------------


def _column_labels(summary: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """Point labels in point order, then any label only the grades know."""
    seen = {label for r in rows for label in (r.get("grades") or {})}
    ordered = [str(p.get("label")) for p in summary.get("points") or [] if str(p.get("label")) in seen]
    return list(dict.fromkeys(ordered + sorted(seen - set(ordered))))


def _grade_cell(grade: dict[str, Any] | None, run_link: Callable[[str], str] | None) -> str:
    if grade is None:
        return '<td class="mg-muted">·</td>'
    ok = bool(grade.get("correct"))
    mark = "✓" if ok else "✗"
    title = f"score {fmt_num(grade.get('score'), 3)} · output: {shorten(str(grade.get('output') or ''), 300)}"
    style = f"color:{CORRECT_COLOR if ok else WRONG_COLOR};font-weight:600;text-decoration:none"
    if run_link is not None and grade.get("run_id"):
        mark_html = f'<a href="{esc(run_link(str(grade["run_id"])))}" style="{style}">{mark}</a>'
    else:
        mark_html = f'<span style="{style}">{mark}</span>'
    output = shorten(str(grade.get("output") or ""), 60)
    return (f'<td title="{esc(title)}" class="{"mg-ok" if ok else "mg-wrong"}">{mark_html}'
            f' <span class="mg-muted mg-text">{esc(output)}</span></td>')


def items_table_body(summary: dict[str, Any], run_link: Callable[[str], str] | None = None,
                     limit: int = 200) -> str:
    """The items table without its CSS wrapper ('' without graded items)."""
    rows = summary.get("disagreements") or []
    if not rows:
        return ""
    labels = _column_labels(summary, rows)
    split = sum(1 for r in rows if r.get("split"))
    head = "".join(f"<th>{esc(label)}</th>" for label in labels)
    body = []
    for r in rows[:limit]:
        grades = r.get("grades") or {}
        cells = "".join(_grade_cell(grades.get(label), run_link) for label in labels)
        cls = ' class="mg-winner"' if r.get("split") else ""
        body.append(f'<tr{cls} data-item="{esc(r.get("item"))}"><td class=num>{esc(r.get("item"))}</td>'
                    f"<td class=num>{fmt_num(r.get('split'))}</td>{cells}</tr>")
    more = (f'<p class="mg-muted">{len(rows) - limit} more items not shown.</p>' if len(rows) > limit else "")
    return (f"<h3>Items · {len(rows)} graded, {split} where methods disagree (first, most split first)</h3>"
            f"<table class=mg-eval-items><thead><tr><th class=num>item</th><th class=num>split</th>{head}</tr>"
            "</thead><tbody>" + "".join(body) + "</tbody></table>" + more)


def servers_table_body(summary: dict[str, Any]) -> str:
    """Requests each server of a replicated remote model served during the evaluation ('' with one server)."""
    servers: dict[str, int] = summary.get("servers") or {}
    if not servers:
        return ""
    total = sum(servers.values()) or 1
    rows = "".join(f"<tr><td>{esc(url)}</td><td class=num>{count}</td><td class=num>{count / total:.0%}</td></tr>"
                   for url, count in servers.items())
    return ("<table class=mg-eval-servers><thead><tr><th>server</th><th class=num>requests served</th>"
            f"<th class=num>share</th></tr></thead><tbody>{rows}</tbody></table>")


def items_table_html(summary: dict[str, Any], run_link: Callable[[str], str] | None = None,
                     limit: int = 200) -> str:
    """Items by point: ✓/✗ per point label (score and output on hover, a link to the run with `run_link`),
    items where methods disagree first."""
    body = items_table_body(summary, run_link, limit)
    return wrap_section(body) if body else message("No graded items yet.")


def _facts(summary: dict[str, Any]) -> list[tuple[str, str]]:
    dataset = summary.get("dataset") or {}
    sweep = "; ".join(f"{a.get('node')}.{a.get('param')} = " + ", ".join(map(str, a.get("values") or []))
                      for a in summary.get("sweep") or []) or "none"
    return [("metric", str(summary.get("metric") or "-")), ("output", str(summary.get("output") or "-")),
            ("dataset", f"{dataset.get('name') or dataset.get('path') or '-'} · {fmt_num(dataset.get('rows'))} rows"
                        + (f" · sha256 {str(dataset['sha256'])[:12]}" if dataset.get("sha256") else "")),
            ("sweep", sweep), ("runs", f"{fmt_num(summary.get('done', 0))} of {fmt_num(summary.get('total', 0))}")]


def _cost_table(summary: dict[str, Any]) -> str:
    """Estimate against actual: completion tokens and seconds (projected to all runs while still running)."""
    est = summary.get("estimate") or {}
    points = summary.get("points") or []
    done, total = int(summary.get("done") or 0), int(summary.get("total") or 0)
    # the evaluation's own elapsed time (items run concurrently, so their run times add up to more)
    elapsed = summary.get("elapsed_s")
    actual = {"tokens": sum(p.get("completion_tokens") or 0 for p in points),
              "seconds": elapsed if elapsed is not None else max([p.get("wall_s") or 0.0 for p in points] or [0.0])}
    partial = 0 < done < total
    rows = []
    for key, label, expected, most in (("tokens", "completion tokens", "expected_completion_tokens",
                                        "max_completion_tokens"), ("seconds", "seconds (wall)", "expected_s", "max_s")):
        projected = f"<td class=num>{fmt_num(actual[key] * total / done, 0)}</td>" if partial else ""
        rows.append(f"<tr><th>{label}</th><td class=num>{fmt_num(est.get(expected))}</td>"
                    f"<td class=num>{fmt_num(est.get(most))}</td><td class=num>{fmt_num(actual[key])}</td>"
                    f"{projected}</tr>")
    extra = "<th class=num>projected to all runs</th>" if partial else ""
    note = f'<p class="mg-muted">Estimate: {esc(est["assumptions"])}</p>' if est.get("assumptions") else ""
    if not est:
        note = '<p class="mg-muted">No pre-run estimate was stored.</p>'
    return ("<table id=mg-eval-cost><thead><tr><th></th><th class=num>estimate (expected)</th>"
            f"<th class=num>estimate (max)</th><th class=num>actual</th>{extra}</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>" + note)


WALL_TITLE = "seconds while the point had an item running (at most the evaluation's own time)"
BUSY_HEADER = "busy s (summed over concurrent items)"
BUSY_TITLE = "its items' run seconds added up: more than the wall time when items run concurrently"
VERSION_TITLE = ("the version of the workflow the point ran (its hash's start); a link opens that version in the "
                 "editor when a save recorded it")


def _points_table(summary: dict[str, Any]) -> str:
    points = summary.get("points") or []
    if not points:
        return f'<p class="mg-muted">{esc(NO_POINTS)}</p>'
    rows = []
    for p in points:
        lo, hi = (p.get("ci") or [None, None])[:2]
        se = f" ±{_pct(p['se'])} SE" if p.get("se") is not None and (p.get("repeats") or 1) > 1 else ""
        acc = (f"{_pct(p['accuracy'])}{se} <span class=mg-muted>({_pct(lo)}–{_pct(hi)})</span>"
               if p.get("accuracy") is not None else "-")
        planned = f" of {fmt_num(p['planned'])}" if p.get("planned") and p.get("planned") != p.get("total") else ""
        failed = f' <span class=mg-muted>({fmt_num(p["failed"])} failed)</span>' if p.get("failed") else ""
        if p.get("ungraded"):  # the grader could not run on these: no verdict, not in the accuracy
            failed += (f' <span class="mg-ungraded" title="{esc(p.get("ungraded_reason") or "")}">'
                       f'({fmt_num(p["ungraded"])} ungraded)</span>')
        star = "★" if p.get("pareto") else ""
        reused = (f' <span class="mg-muted mg-reused" title="its per-item cost counts the pooled draws it used">'
                  f"{esc(_reused_note(p).strip())}</span>" if _reused_note(p) else "")
        version = version_cell(p.get("version"), p.get("version_workflow"), "version_workflow" in p)
        rows.append(f"<tr{' class=mg-winner' if star else ''}><td>{esc(p.get('label'))}</td>"
                    f"<td class=mg-version-cell>{version}</td>"
                    f"<td class=num>{acc}</td>"
                    f"<td class=num>{fmt_num(p.get('correct'))}/{fmt_num(p.get('total'))}{planned}{failed}</td>"
                    f"<td class=num>{fmt_num(p.get('completion_tokens'))}{reused}</td>"
                    f"<td class=num>{fmt_num(p.get('thinking_tokens', 0))} / {fmt_num(p.get('answer_tokens'))}</td>"
                    f"<td class=num>{fmt_num(_tokens_per_item(p), 1)}</td>"
                    f"<td class=num>{fmt_num(p.get('prompt_tokens_evaluated'))} / "
                    f"{fmt_num(p.get('prompt_tokens_cached'))}</td>"
                    f"<td class=num>{fmt_num(p.get('wall_s'), 1)}</td><td class=num>{fmt_num(p.get('busy_s'), 1)}</td>"
                    f"<td title=\"Pareto frontier\">{star}</td></tr>")
    return ("<table id=mg-eval-points><thead><tr><th>point</th>"
            f"<th title=\"{esc(VERSION_TITLE)}\">version</th><th class=num>accuracy (95% CI)</th>"
            "<th class=num>correct/total</th><th class=num>completion tok.</th>"
            "<th class=num>of them thinking / answer</th><th class=num>completion tok./item</th>"
            "<th class=num>prompt tok. evaluated / cached</th>"
            f"<th class=num title=\"{esc(WALL_TITLE)}\">wall s</th>"
            f"<th class=num title=\"{esc(BUSY_TITLE)}\">{esc(BUSY_HEADER)}</th><th>Pareto</th></tr>"
            "</thead><tbody>" + "".join(rows) + "</tbody></table>"
            '<p class="mg-muted">★ on the Pareto frontier: no other point is as accurate for fewer completion '
            f"tokens. wall s: {esc(WALL_TITLE)}; busy s: {esc(BUSY_TITLE)}.</p>")


def evaluation_summary_body(summary: dict[str, Any]) -> str:
    """The header, the estimate against the actual cost, and the per-point table, without the CSS wrapper."""
    title = summary.get("name") or summary.get("eval_id")
    parts = [f"<h3>Evaluation {esc(title)} · {esc(summary.get('eval_id'))} {badge(summary.get('status'))}</h3>"]
    if summary.get("error"):
        parts.append(f'<div class="mg-box"><b>error</b><pre>{esc(summary["error"])}</pre></div>')
    parts.extend(f'<div class="mg-box mg-eval-warning"><b>warning</b> {esc(w)}</div>'
                 for w in summary.get("warnings") or [])
    parts.extend(f'<div class="mg-box mg-eval-version-note"><b>note</b> {esc(n)}</div>'
                 for n in summary.get("version_notes") or [])  # app.eval.results.version_notes, as the CLI prints
    parts.append("<table id=mg-eval-facts>" + "".join(
        f"<tr><th>{esc(k)}</th><td><span class=mg-text>{esc(v)}</span></td></tr>" for k, v in _facts(summary))
        + "</table>")
    parts.append(_cost_table(summary))
    parts.append(_points_table(summary))
    comparisons = comparisons_body(summary)
    if comparisons:
        parts.append(f"<h4>Is the difference real?</h4>{comparisons}")
    return "".join(parts)


def evaluation_summary_html(summary: dict[str, Any]) -> str:
    """The evaluation's header (name, status, metric, dataset, runs, estimate vs actual) and per-point table."""
    return wrap_section(f'<div id="mg-eval-summary">{evaluation_summary_body(summary)}</div>')


def evaluation_report_html(summary: dict[str, Any]) -> str:
    """The whole evaluation on one self-contained page (plotly.js inlined, as in export_html): it opens offline."""
    included = False

    def figure(fig: go.Figure | None, div_id: str, missing: str) -> str:
        nonlocal included
        if fig is None:
            return f'<p class="mg-muted">{esc(missing)}</p>'
        out = fig.to_html(full_html=False, include_plotlyjs=not included, div_id=div_id,
                          config={"displaylogo": False, "responsive": True})
        included = True
        return out

    sections = (
        ("mg-eval-summary", "Summary", evaluation_summary_body(summary)),
        ("mg-eval-curve", "Accuracy by swept value",
         figure(accuracy_curve_figure(summary), "mg-eval-curve-plot", NO_POINTS)),
        ("mg-eval-tokens", "Accuracy against tokens",
         figure(accuracy_tokens_figure(summary), "mg-eval-tokens-plot", NO_POINTS)),
        ("mg-eval-pass-at-k", "pass@k", figure(pass_at_k_figure(summary), "mg-eval-pass-at-k-plot",
                                               "No sampler was graded per sample, so there is no pass@k.")),
        ("mg-eval-items", "Items", items_table_body(summary) or '<p class="mg-muted">No graded items yet.</p>'),
    ) + ((("mg-eval-servers", "Servers", servers_table_body(summary)),) if summary.get("servers") else ())
    nav = "".join(f'<a href="#{sid}">{esc(title)}</a>' for sid, title, _ in sections)
    title = f"Evaluation {summary.get('name') or summary.get('eval_id')} · {summary.get('eval_id')}"
    log.debug("evaluation report of %s: %d points", summary.get("eval_id"), len(summary.get("points") or []))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<style>{CSS}{PAGE_CSS}</style></head><body class=\"mg-viz\">"
            f"<header><h1>Metagen Studio · {esc(title)}</h1><nav>{nav}</nav></header>"
            + "".join(f'<section id="{sid}"><h2>{esc(name)}</h2>{body}</section>' for sid, name, body in sections)
            + f"<footer class=mg-muted>Exported evaluation {esc(summary.get('eval_id'))} "
            f"(status {esc(summary.get('status'))}).</footer></body></html>\n")
