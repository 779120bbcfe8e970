"""Trace and evaluation views by name, and self-contained HTML of workflows, runs and evaluations, for callers
outside the browser (the Python API's figures and notebook display): plotly.js is inlined, nothing loads from a
CDN."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from app.platform.fileio import atomic_write_text
from app.service.errors import UserError
from app.viz.common import esc, fmt_num, wrap_section
from app.viz.evaluation import (
    accuracy_curve_figure,
    accuracy_tokens_figure,
    evaluation_report_html,
    evaluation_summary_body,
    pass_at_k_figure,
)
from app.viz.samples import sample_view, vote_histogram
from app.viz.summary import summary_body
from app.viz.timeline import timeline_figure
from app.viz.tokens import token_figure
from app.viz.tree import search_tree_figure
from app.viz.workflow_graph import workflow_svg

TRACE_VIEWS: dict[str, Callable[..., Any]] = {
    "timeline": lambda record, node_id=None: timeline_figure(record),
    "samples": lambda record, node_id=None: sample_view(record, node_id),
    "votes": lambda record, node_id=None: vote_histogram(record, node_id),
    "tree": lambda record, node_id=None: search_tree_figure(record, node_id),
    "tokens": lambda record, node_id=None: token_figure(record, node_id),
}
"""A run's figures: the Traces tab's views (for `tokens`, node_id names an LM call id)."""
WHY_NO_FIGURE = {
    "samples": "this run produced no candidate set",
    "tree": "this run has no search tree (only beam and tree search nodes draw one)",
    "tokens": "no LM call of this run recorded log-probabilities (turn on the node's logprobs param)",
}


def _pareto_figure(summary: dict[str, Any]) -> Any:
    fig = accuracy_tokens_figure(summary)
    if fig is not None:
        fig.update_layout(title={"text": "Pareto frontier of accuracy against completion tokens per item"})
    return fig


EVALUATION_FIGURES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "accuracy": accuracy_curve_figure, "tokens": accuracy_tokens_figure, "pareto": _pareto_figure,
    "passk": pass_at_k_figure,
    "tokens-answer": lambda summary: accuracy_tokens_figure(summary, "answer"),
    "tokens-thinking": lambda summary: accuracy_tokens_figure(summary, "thinking"),
}
"""An evaluation's figures by name: accuracy by swept value, accuracy against tokens (all completion tokens, the
answers' alone, or the thinking alone), the same with its Pareto frontier titled as such, pass@k."""


def _pick(view: Any, table: dict[str, Any], argument: str) -> Callable[..., Any]:
    if not isinstance(view, str) or view not in table:
        raise UserError(f"{argument}: the figures are {', '.join(map(repr, table))}, got {view!r}")
    return table[view]


def message_figure(title: str, text: str) -> go.Figure:
    """An empty figure saying why there is nothing to draw (as the Traces tab shows a message there)."""
    fig = go.Figure()
    fig.add_annotation(text=esc(text), x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                       font={"size": 14, "color": "#666"})
    fig.update_layout(title={"text": esc(title), "font": {"size": 14}}, template="plotly_white", height=240,
                      xaxis={"visible": False}, yaxis={"visible": False}, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def trace_figure(record: dict[str, Any], view: str, node_id: str | None = None) -> go.Figure:
    """The Plotly figure of one trace view of a run record; when the run has nothing to draw there (no search
    tree, no log-probabilities...), a figure that says so, as the Traces tab does."""
    fig = _pick(view, TRACE_VIEWS, "view")(record, node_id)
    if fig is None or isinstance(fig, str):
        return message_figure(f"{view} of run {record['run'].get('id')}",
                              f"Nothing to draw: {WHY_NO_FIGURE.get(view, 'this run has no data for this view')}.")
    return fig


def evaluation_figure(summary: dict[str, Any], kind: str) -> go.Figure:
    """The Plotly figure of an evaluation summary; a figure saying why when there is nothing to draw (nothing
    graded yet, or no sampler graded per sample for pass@k)."""
    fig = _pick(kind, EVALUATION_FIGURES, "kind")(summary)
    if fig is None:
        return message_figure(f"{kind} of evaluation {summary.get('eval_id')}", "Nothing to draw: " + (
            "no sampler was graded per sample, so there is no pass@k." if kind == "passk"
            else "the evaluation has no graded points yet."))
    return fig


def figures_html(figures: list[Any]) -> str:
    """Figures as HTML divs, plotly.js inlined once (offline: no CDN)."""
    return "".join(fig.to_html(full_html=False, include_plotlyjs=k == 0, config={"displaylogo": False})
                   for k, fig in enumerate(figures))


def workflow_html(data: dict[str, Any], yaml_text: str) -> str:
    """A workflow (`to_dict()`) as its graph picture, its description and its YAML collapsed."""
    about = f'<p class="mg-muted">{esc(data.get("description"))}</p>' if data.get("description") else ""
    return wrap_section(f"<h3>{esc(data.get('name'))}</h3>{about}<div style=\"overflow-x:auto\">{workflow_svg(data)}"
                        f"</div><details><summary>YAML</summary><pre>{esc(yaml_text)}</pre></details>")


def _value_html(value: Any) -> str:
    """Text as it is; structured values (votes, candidate sets) folded under a one-line summary."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1, default=str)
    shown = f"<pre>{esc(text if len(text) <= 4000 else text[:4000] + ' …')}</pre>"
    if isinstance(value, str):
        return shown
    return f"<details><summary>{esc(type(value).__name__)} ({len(text):,} characters)</summary>{shown}</details>"


def run_html(result: dict[str, Any], record: dict[str, Any] | None) -> str:
    """A run (`RunResult.to_json()`): outputs, stats and, when it was traced, its summary and timeline."""
    stats = result.get("stats") or {}
    cards = "".join(f'<div class="mg-card"><b>{fmt_num(stats.get(key), 2)}</b><span>{label}</span></div>'
                    for key, label in (("lm_calls", "LM calls"), ("prompt_tokens", "prompt tokens"),
                                       ("completion_tokens", "completion tokens"), ("wall_s", "seconds")))
    error = f'<div class="mg-box"><b>error</b><pre>{esc(result.get("error"))}</pre></div>' if result.get("error") \
        else ""
    outputs = "".join(f"<tr><th>{esc(name)}</th><td>{_value_html(value)}</td></tr>"
                      for name, value in (result.get("outputs") or {}).items())
    head = (f"<h3>Run {esc(result.get('run_id'))} · {esc(result.get('status'))}</h3>{error}"
            f"<table>{outputs}</table><div class=mg-cards>{cards}</div>")
    if record is None:
        return wrap_section(head + '<p class="mg-muted">Not traced (run with trace=True for its figures).</p>')
    return wrap_section(head + f"<details><summary>nodes</summary>{summary_body(record)}</details>"
                        + figures_html([timeline_figure(record)]))


def evaluation_html(summary: dict[str, Any]) -> str:
    """An evaluation: its accuracy and Pareto figures and the points table."""
    figures = [fig for fig in (accuracy_curve_figure(summary), _pareto_figure(summary)) if fig is not None]
    return wrap_section(evaluation_summary_body(summary) + figures_html(figures))


def evaluation_report(summary: dict[str, Any], path: Path) -> Path:
    """Write the evaluation's offline HTML report (as `metagen eval export --html`) to `path`."""
    try:
        atomic_write_text(path, evaluation_report_html(summary))
    except OSError as exc:
        raise UserError(f"path: cannot write {path}: {exc.strerror or exc}") from None
    return path
