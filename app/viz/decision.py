""""How it was decided" for an app page: a run's votes as bars, its candidates and its search tree, as one HTML
fragment (the Traces tab's sample and tree views, without plotly, so it loads fast on a phone)."""

from __future__ import annotations

from typing import Any

from app.viz.common import MUTED, WINNER_COLOR, esc, shorten, wrap_section
from app.viz.samples import NO_ANSWER, pick_set, sample_rows, samples_table_body, vote_counts
from app.viz.summary import run_summary
from app.viz.tree import tree_outline_body

MAX_VOTE_BARS = 12
"""Answers drawn as bars; the rest are told in one line."""
SAMPLES_SHOWN = 64
"""Candidates listed in the table (a phone page stays short; the Traces tab lists them all)."""

CSS = """
.mg-decided .mg-votes{display:flex;flex-direction:column;gap:4px;margin:.3em 0 .8em}
.mg-decided .mg-vote{display:grid;grid-template-columns:minmax(0,9em) minmax(0,1fr) 2.5em;gap:8px;align-items:center}
.mg-decided .mg-vote-label{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.mg-decided .mg-vote-bar{height:14px;border-radius:3px;min-width:2px}
.mg-decided .mg-vote-n{text-align:right;font-variant-numeric:tabular-nums}
.mg-decided .mg-scroll{overflow-x:auto;max-width:100%}
"""


def votes_body(record: dict[str, Any]) -> str:
    """The votes per answer as horizontal bars, the winner's gold ('' when the run voted on nothing)."""
    counts = vote_counts(record)
    if not counts:
        return ""
    rows = sample_rows(record)
    won = next((r for r in rows if r["winner"]), None)
    winner = None if won is None else (NO_ANSWER if won["answer"] is None else str(won["answer"]))
    top = max(n for _, n, _ in counts) or 1
    bars = []
    for answer, n, _weight in counts[:MAX_VOTE_BARS]:
        color = WINNER_COLOR if answer == winner else (MUTED if answer == NO_ANSWER else "#2f7ed8")
        mark = "★ " if answer == winner else ""
        bars.append(f'<div class="mg-vote" data-testid="vote-row"><span class="mg-vote-label" title="{esc(answer)}">'
                    f"{mark}{esc(shorten(answer, 60))}</span><span class=\"mg-vote-bar\" style=\"width:"
                    f'{100 * n / top:.1f}%;background:{color}"></span><span class="mg-vote-n">{n}</span></div>')
    rest = counts[MAX_VOTE_BARS:]
    more = (f'<p class="mg-muted">+ {len(rest)} more answers with {sum(n for _, n, _ in rest)} votes.</p>'
            if rest else "")
    return f'<h3>Votes per answer</h3><div class="mg-votes">{"".join(bars)}</div>{more}'


def _totals(record: dict[str, Any]) -> str:
    s = run_summary(record)
    return (f'<p class="mg-muted" data-testid="decided-totals">{s.get("lm_calls", 0)} model calls · '
            f'{s.get("completion_tokens", 0)} tokens generated · {float(s.get("wall_s") or 0):.1f} s</p>')


def decision_html(record: dict[str, Any]) -> str:
    """The run's votes, candidates and search tree with its totals; a plain sentence when it has none of them
    (a single generation decides nothing)."""
    parts = [votes_body(record)]
    if pick_set(record) is not None:
        parts.append(f'<div class="mg-scroll">{samples_table_body(record, limit=SAMPLES_SHOWN)}</div>')
    tree = tree_outline_body(record)
    if tree:
        parts.append(f"<h3>Search tree</h3>{tree}")
    if not any(parts):
        parts.append('<p class="mg-muted">This workflow made no choice between candidates: its answer is one '
                     "generation, with no votes, samples or search tree to show.</p>")
    return wrap_section(f'<div class="mg-decided"><style>{CSS}</style>{_totals(record)}{"".join(parts)}</div>')
