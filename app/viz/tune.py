"""A tune's report drawn from its result dict: the held-out Pareto plot (accuracy with its 95 % interval against
tokens per item) and the offline HTML page (the plot, the held-out table, the comparisons, the race log, and the
adaptive policy when the tune built one)."""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go

from app.viz.common import REUSED_FOOTNOTE
from app.viz.tune_adaptive import adaptive_html


def tune_figure(result: dict[str, Any]) -> go.Figure:
    """Each finalist on test as a point with its interval; the front joined; the recommended one and greedy marked;
    the adaptive policy (probe included) as a point of its own when the tune built one."""
    rows = [r for r in result.get("held_out", []) if r.get("accuracy") is not None]
    recommended = (result.get("recommended") or {}).get("label")
    baseline = (result.get("baseline") or {}).get("label")
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=[r["tokens_per_item"] for r in rows], y=[r["accuracy"] for r in rows], mode="markers",
        text=[r["label"] for r in rows], name="finalists (test)",
        error_y={"type": "data", "symmetric": False, "array": [r["ci"][1] - r["accuracy"] for r in rows],
                 "arrayminus": [r["accuracy"] - r["ci"][0] for r in rows]},
        marker={"size": [14 if r["label"] in (recommended, baseline) else 9 for r in rows],
                "symbol": ["star" if r["label"] == recommended else "circle" for r in rows]},
        hovertemplate="%{text}<br>accuracy %{y:.0%}<br>%{x:.0f} tokens/item<extra></extra>"))
    front = result.get("front") or []
    if front:
        fig.add_trace(go.Scatter(x=[f["tokens_per_item"] for f in front], y=[f["accuracy"] for f in front],
                                 mode="lines", name="Pareto front", line={"dash": "dot"}))
    policy = _policy_trace(result.get("adaptive"))
    if policy is not None:
        fig.add_trace(policy)
    fig.update_layout(title=f"Held-out test: {html.escape(str(result.get('dataset', '')))} · "
                            f"{html.escape(str(result.get('model', '')))}",
                      xaxis_title="tokens per item", yaxis_title="accuracy", yaxis={"range": [0, 1.05]},
                      template="plotly_white", height=420)
    return fig


def _policy_trace(adaptive: Any) -> go.Scatter | None:
    """The adaptive policy's test point (accuracy with its interval against tokens per item, the probe's included)."""
    if not isinstance(adaptive, dict) or adaptive.get("status") != "built":
        return None
    test = adaptive.get("test") or {}
    accuracy, tokens, ci = test.get("accuracy"), test.get("tokens_per_item"), test.get("ci") or [None, None]
    if accuracy is None or tokens is None:
        return None
    lo, hi = (accuracy if x is None else x for x in ci)
    return go.Scatter(x=[tokens], y=[accuracy], mode="markers", name="adaptive policy (test, probe included)",
                      text=["adaptive policy"], marker={"size": 15, "symbol": "diamond", "color": "#d62728"},
                      error_y={"type": "data", "symmetric": False, "array": [hi - accuracy],
                               "arrayminus": [accuracy - lo]},
                      hovertemplate="%{text}<br>accuracy %{y:.0%}<br>%{x:.0f} tokens/item<extra></extra>")


def _pct(x: Any) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _table(result: dict[str, Any]) -> str:
    """The held-out table; a row whose samples came from the shared pool marked `*`, with the footnote below."""
    head = ("<tr><th>finalist</th><th>accuracy</th><th>95% CI</th><th>tokens/item</th><th>s/item</th><th>n</th>"
            "<th></th></tr>")
    rows = result.get("held_out", [])
    body = "".join(
        f"<tr><td>{html.escape(r['label'])}</td><td>{_pct(r['accuracy'])}</td>"
        f"<td>[{_pct(r['ci'][0])}, {_pct(r['ci'][1])}]</td><td>{(r['tokens_per_item'] or 0):.0f}</td>"
        f"<td>{(r['seconds_per_item'] or 0):.2f}</td><td>{r['n']}</td>"
        f"<td class='mg-note'>{'* ' + html.escape(r['note']) if r.get('note') else ''}</td></tr>" for r in rows)
    note = f"<p class='mg-footnote'>* {html.escape(REUSED_FOOTNOTE)}</p>" if any(r.get("note") for r in rows) else ""
    return f"<table>{head}{body}</table>{note}"


def _race(result: dict[str, Any]) -> str:
    lines = []
    for entry in result.get("race", []):
        dropped = "".join(f"<li>{html.escape(d['label'])}: {html.escape(d['reason'])}</li>" for d in entry["dropped"])
        lines.append(f"<p>round {entry['round']} on {entry['items']} dev items: {len(entry['alive'])} left</p>"
                     f"<ul>{dropped}</ul>")
    return "".join(lines)


def tune_html(result: dict[str, Any]) -> str:
    """One self-contained page (plotly inlined: it opens offline)."""
    figure = tune_figure(result).to_html(full_html=False, include_plotlyjs=True)
    comparisons = "".join(f"<li>against {html.escape(c['against'])}: {html.escape(c['sentence'])}</li>"
                          for c in result.get("comparisons", []))
    rec = result.get("recommended") or {}
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>metagen tune</title><style>"
            "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:4px 8px}.mg-num{text-align:right}</style></head><body>"
            f"<h1>metagen tune: {html.escape(str(result.get('dataset', '')))}</h1>"
            f"<p><b>{html.escape(str(result.get('verdict', '')))}</b></p>"
            f"<p>Written to {html.escape(str(rec.get('path', '')))}. Tuning used {result.get('tune_tokens', 0)} "
            f"tokens.</p>{figure}<h2>Held-out test</h2>{_table(result)}<h2>Paired comparisons (test)</h2>"
            f"<ul>{comparisons}</ul>{adaptive_html(result)}<h2>The race (dev)</h2>{_race(result)}</body></html>")
