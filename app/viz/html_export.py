"""A run as one self-contained HTML page (plotly.js inlined: it opens offline, from a file or an email)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from app.viz.common import CSS, esc, fmt_num, shorten
from app.viz.refine import refinement_body
from app.viz.samples import candidate_nodes, pick_set, sample_view, samples_table_body
from app.viz.summary import summary_body
from app.viz.timeline import timeline_figure
from app.viz.tokens import calls_with_logprobs, token_view_body
from app.viz.tree import search_tree_figure, tree_nodes_ids, tree_outline_body

MAX_CALL_ROWS = 500
MAX_TOKEN_VIEWS = 20

PAGE_CSS = """
body{margin:0 auto;max-width:1200px;padding:16px 20px;color:#1f2328;background:#fff}
header h1{font-size:20px;margin:0 0 4px}
nav a{margin-right:12px}
section{margin:18px 0;padding-top:6px;border-top:1px solid rgba(127,127,127,.25)}
section>h2{font-size:17px;margin:.4em 0}
"""

TOKEN_SWITCH_JS = """
document.querySelectorAll('select.mg-call-pick').forEach(function (pick) {
  pick.addEventListener('change', function () {
    document.querySelectorAll('.mg-token-panel').forEach(function (p) {
      p.hidden = p.dataset.call !== pick.value;
    });
  });
});
"""


class _Figures:
    """Renders figures as divs; the first one carries plotly.js inline, the others reuse it."""

    def __init__(self) -> None:
        self.included = False

    def div(self, fig: go.Figure, div_id: str) -> str:
        html = fig.to_html(full_html=False, include_plotlyjs=not self.included, div_id=div_id,
                           config={"displaylogo": False, "responsive": True})
        self.included = True
        return html


def _section(section_id: str, title: str, body: str) -> str:
    return f'<section id="{section_id}"><h2>{esc(title)}</h2>{body}</section>'


def _muted(text: str) -> str:
    return f'<p class="mg-muted">{esc(text)}</p>'


def _samples_section(record: dict[str, Any], figures: _Figures) -> str:
    picked = pick_set(record)
    if picked is None:
        return _muted("This run produced no candidate set.")
    default = picked[0]
    view = sample_view(record, default)
    parts = [figures.div(view, "mg-samples-plot")] if isinstance(view, go.Figure) else []
    for node in candidate_nodes(record):
        table = samples_table_body(record, node)
        parts.append(f"<details{' open' if node == default else ''}><summary>candidates of {esc(node)}</summary>"
                     f"{table}</details>")
    return "".join(parts)


def _tree_section(record: dict[str, Any], figures: _Figures) -> str:
    owners = tree_nodes_ids(record) or [None]
    parts = []
    for k, owner in enumerate(owners):
        fig = search_tree_figure(record, owner)
        if fig is None:
            continue
        parts.append(figures.div(fig, f"mg-tree-plot-{k}"))
        parts.append(tree_outline_body(record, owner))
    return "".join(parts) or _muted("This run has no search tree.")


def _tokens_section(record: dict[str, Any]) -> str:
    ids = calls_with_logprobs(record)[:MAX_TOKEN_VIEWS]
    if not ids:
        return _muted("No call of this run recorded per-token log-probabilities "
                      "(turn on a node's logprobs param to record them).")
    options = "".join(f'<option value="{esc(i)}">{esc(i)}</option>' for i in ids)
    panels = "".join(f'<div class="mg-token-panel" data-call="{esc(i)}"{" hidden" if k else ""}>'
                     f"{token_view_body(record, i)}</div>" for k, i in enumerate(ids))
    more = len(calls_with_logprobs(record)) - len(ids)
    note = _muted(f"{more} more calls with log-probabilities are in the JSON export.") if more > 0 else ""
    return (f'<label>LM call <select class="mg-call-pick" id="mg-call-pick">{options}</select></label>'
            f"{panels}{note}")


def _calls_section(record: dict[str, Any]) -> str:
    calls = record.get("lm_calls", [])
    if not calls:
        return _muted("This run made no LM calls.")
    rows = "".join(
        f"<tr><td>{esc(c.get('call_id'))}</td><td>{esc(c.get('purpose'))}</td>"
        f"<td class=num>{esc(c.get('sample_index'))}/{esc(c.get('n'))}</td>"
        f"<td class=num>{fmt_num(c.get('prompt_tokens'))}</td><td class=num>{fmt_num(c.get('prompt_tokens_evaluated'))}"
        f"</td><td class=num>{fmt_num(c.get('completion_tokens'))}</td>"
        f"<td class=num>{fmt_num((c.get('end') or 0) - (c.get('start') or 0), 3)}</td>"
        f"<td>{esc(c.get('finish_reason'))}</td><td class=mg-text>{esc(shorten(c.get('completion'), 200))}</td></tr>"
        for c in calls[:MAX_CALL_ROWS])
    more = _muted(f"Showing the first {MAX_CALL_ROWS} of {len(calls)} calls; `metagen traces export` has all.") \
        if len(calls) > MAX_CALL_ROWS else ""
    return ("<table class=mg-calls><thead><tr><th>call</th><th>purpose</th><th class=num>sample</th>"
            "<th class=num>prompt tok.</th><th class=num>evaluated</th><th class=num>completion tok.</th>"
            "<th class=num>seconds</th><th>finish</th><th>completion</th></tr></thead><tbody>"
            f"{rows}</tbody></table>{more}")


def export_html(record: dict[str, Any]) -> str:
    """The whole run on one page: summary, timeline, samples, search tree, refinement, tokens, calls, YAML."""
    run = record["run"]
    figures = _Figures()
    sections = [
        _section("mg-summary", "Summary", summary_body(record)),
        _section("mg-timeline", "Timeline", figures.div(timeline_figure(record), "mg-timeline-plot")),
        _section("mg-samples", "Samples and votes", _samples_section(record, figures)),
        _section("mg-search-tree", "Search tree", _tree_section(record, figures)),
        _section("mg-refinement", "Refinement", refinement_body(record) or _muted("This run has no refinement.")),
        _section("mg-tokens", "Token probabilities", _tokens_section(record)),
        _section("mg-calls", "LM calls", _calls_section(record)),
        _section("mg-workflow", "Workflow", f"<pre>{esc(run.get('workflow_yaml'))}</pre>"),
    ]
    nav = "".join(f'<a href="#{sid}">{label}</a>' for sid, label in (
        ("mg-summary", "summary"), ("mg-timeline", "timeline"), ("mg-samples", "samples"),
        ("mg-search-tree", "search tree"), ("mg-refinement", "refinement"), ("mg-tokens", "tokens"),
        ("mg-calls", "LM calls"), ("mg-workflow", "workflow")))
    title = f"Run {run.get('id')} · {run.get('workflow')}"
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<style>{CSS}{PAGE_CSS}</style></head><body class=\"mg-viz\">"
            f"<header><h1>Metagen Studio · {esc(title)}</h1><nav>{nav}</nav></header>"
            + "".join(sections)
            + f"<footer class=mg-muted>Exported trace of run {esc(run.get('id'))} (status {esc(run.get('status'))})."
            f"</footer><script>{TOKEN_SWITCH_JS}</script></body></html>\n")
