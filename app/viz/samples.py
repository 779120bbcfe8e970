"""Sample view: a candidate set's texts, answers, scores, clusters and winner, and the votes per answer."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.viz.code_runs import behaviour_note_body, has_test_runs, tests_cell, tests_summary
from app.viz.common import MUTED, WINNER_COLOR, esc, events_of, fmt_num, node_by_id, shorten, wrap_section
from app.viz.deepconf import stopped_samples_body
from app.viz.selection import selection_body
from app.viz.think_exit import early_exit_body
from app.viz.tool_calls import candidate_answer, candidate_text, schema_cell, schema_verdict

MAX_BARS = 40
"""Answers drawn in the histogram; the rest are summed into one 'other' bar."""
NO_ANSWER = "(no answer)"


def candidate_sets(record: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(node id, output port, candidate set) of every candidate set nodes produced, in run order."""
    found = []
    for node in record.get("nodes", []):
        for port, value in (node.get("outputs") or {}).items():
            if isinstance(value, dict) and value.get("__type__") == "candidates":
                found.append((node["node_id"], port, value))
    return found


def candidate_nodes(record: dict[str, Any]) -> list[str]:
    """Ids of nodes with a candidate set, for a picker."""
    return list(dict.fromkeys(node for node, _, _ in candidate_sets(record)))


def pick_set(record: dict[str, Any], node_id: str | None = None) -> tuple[str, dict[str, Any]] | None:
    """The node's candidate set (its `candidates` port first); without a node, the last set with a winner,
    else the last set."""
    sets = candidate_sets(record)
    if node_id:
        mine = [s for s in sets if s[0] == node_id]
        mine.sort(key=lambda s: s[1] != "candidates")
        return (mine[0][0], mine[0][2]) if mine else None
    decided = [s for s in sets if s[2].get("winner") is not None]
    chosen = (decided or sets)[-1:]
    return (chosen[0][0], chosen[0][2]) if chosen else None


def sample_rows(record: dict[str, Any], node_id: str | None = None) -> list[dict[str, Any]]:
    """One row per candidate: index, text, answer, score, cluster, winner, seed, finish reason, tokens."""
    picked = pick_set(record, node_id)
    if picked is None:
        return []
    _, cset = picked
    winner = cset.get("winner")
    return [{
        "index": i, "text": candidate_text(c), "answer": candidate_answer(c), "score": c.get("score"),
        "scores": c.get("scores") or {}, "cluster": c.get("cluster"), "winner": winner == i,
        "seed": c.get("seed"), "finish_reason": c.get("finish_reason", ""),
        "completion_tokens": c.get("completion_tokens", 0), "source": c.get("source", ""),
    } for i, c in enumerate(cset.get("candidates") or [])]


def vote_counts(record: dict[str, Any], node_id: str | None = None) -> list[tuple[str, int, float | None]]:
    """(answer, votes, weight) strongest first: from the node's vote event when it has one, else counted
    from the candidates' answers."""
    picked = pick_set(record, node_id)
    if picked is None:
        return []
    node, cset = picked
    votes = events_of(record, "vote", node)
    if votes:
        data = votes[-1]["data"]
        out: list[tuple[str, int, float | None]] = [
            (str(cl.get("answer")), int(cl.get("count") or 0), cl.get("weight")) for cl in data.get("clusters") or []]
        if data.get("no_answer_count"):
            out.append((NO_ANSWER, int(data["no_answer_count"]), None))
        return out
    counts = Counter(NO_ANSWER if c.get("answer") is None else str(candidate_answer(c))
                     for c in cset.get("candidates") or [])
    return [(a, n, None) for a, n in counts.most_common()]


def _winner_answer(rows: list[dict[str, Any]]) -> str | None:
    won = next((r for r in rows if r["winner"]), None)
    if won is None:
        return None
    return NO_ANSWER if won["answer"] is None else str(won["answer"])


def vote_histogram(record: dict[str, Any], node_id: str | None = None) -> go.Figure:
    counts = vote_counts(record, node_id)
    rows = sample_rows(record, node_id)
    fig = go.Figure()
    _add_histogram(fig, counts, _winner_answer(rows), row=None)
    fig.update_layout(title={"text": "Votes per answer", "font": {"size": 14}}, height=320,
                      template="plotly_white", margin={"l": 10, "r": 10, "t": 40, "b": 10})
    fig.update_xaxes(type="category")  # answers like "42" are labels, not positions on a number line
    fig.update_yaxes(title={"text": VOTES_AXIS}, rangemode="tozero")
    return fig


def _add_histogram(fig: go.Figure, counts: list[tuple[str, int, float | None]], winner: str | None,
                   row: int | None, label_chars: int = 40) -> None:
    shown = counts[:MAX_BARS]
    rest = counts[MAX_BARS:]
    won = next((c for c in rest if c[0] == winner), None)
    if won is not None:  # the winner always gets its own bar (e.g. best-of-N picks a rare answer)
        rest = [c for c in rest if c is not won] + shown[-1:]
        shown = [*shown[:-1], won]
    labels = _distinct_labels([a for a, _, _ in shown], label_chars)
    values = [n for _, n, _ in shown]
    colors = [WINNER_COLOR if a == winner else (MUTED if a == NO_ANSWER else "#2f7ed8") for a, _, _ in shown]
    hover = [f"<b>{esc(shorten(a, 200))}</b><br>{n} vote(s)" + (f" · weight {w:.3g}" if w is not None else "")
             for a, n, w in shown]
    trace = go.Bar(x=labels, y=values, marker={"color": colors}, hovertext=hover, hoverinfo="text", name="votes",
                   showlegend=False)
    if row is None:
        fig.add_trace(trace)
    else:
        fig.add_trace(trace, row=row, col=1)
    if rest:  # a long tail is told, not drawn: one huge 'other' bar would flatten every real one
        fig.add_annotation(
            text=f"+ {len(rest)} more answers with {sum(n for _, n, _ in rest)} votes "
                 f"(at most {max(n for _, n, _ in rest)} each)",
            xref="x domain", yref="y domain", x=1, y=1.08, xanchor="right",
            showarrow=False, font={"size": 12, "color": "#666"})


def _distinct_labels(answers: list[str], chars: int) -> list[str]:
    """Answers shortened to `chars` for the axis; two that shorten alike get their rank, so bars never merge."""
    labels: list[str] = []
    for i, answer in enumerate(answers):
        label = shorten(answer, chars)
        labels.append(label if label not in labels else f"{label} #{i + 1}")
    return labels


def sample_view(record: dict[str, Any], node_id: str | None = None, page: int = 0,
                page_size: int = 200) -> go.Figure | str:
    """One figure: the vote histogram on top, a page of the candidate table below (winner highlighted).
    An HTML message when the run has no candidate set."""
    picked = pick_set(record, node_id)
    if picked is None:
        return wrap_section('<p class="mg-muted">This run produced no candidate set'
                            + (f" at node {esc(node_id)}" if node_id else "") + ".</p>")
    node = picked[0]
    rows = sample_rows(record, node)
    counts = vote_counts(record, node)
    winner = _winner_answer(rows)
    first = max(0, page) * page_size
    shown = rows[first:first + page_size]
    # no answer extracted from any candidate (e.g. a plain generator): one grey "(no answer)" bar says
    # nothing, so the view is the table alone
    has_votes = any(answer != NO_ANSWER for answer, _, _ in counts)
    chart_px = 280 if has_votes else 0
    table_px = min(40 + sum(_row_px(r["text"]) for r in shown) if shown else 70, 900)  # longer ones scroll
    height = chart_px + table_px + 90
    if has_votes:
        # answers as short, level tick labels with room below them: rotated long labels ran into the table
        fig = make_subplots(rows=2, cols=1, vertical_spacing=0.16 * 370 / (chart_px + table_px + 90),
                            specs=[[{"type": "xy"}], [{"type": "table"}]],
                            row_heights=[chart_px / (chart_px + table_px), table_px / (chart_px + table_px)])
        _add_histogram(fig, counts, winner, row=1, label_chars=14)
    else:
        fig = make_subplots(rows=1, cols=1, specs=[[{"type": "table"}]])
    fill = ["rgba(230,167,0,.25)" if r["winner"] else "rgba(0,0,0,0)" for r in shown]
    cands = [c for c in picked[1].get("candidates") or [] if isinstance(c, dict)]
    tests = ([tests_summary(cands[r["index"]], node) for r in shown]
             if has_test_runs(cands, node) else None)  # each test's detail is in the HTML table below
    schema = ([_schema_text(cands[r["index"]]) for r in shown]
              if any(schema_verdict(c) is not None for c in cands) else None)  # tool calls' tool_schema verdicts
    fig.add_trace(go.Table(
        columnwidth=[30, 360, 70, 50, 45, 60, 60] + ([70] if tests else []) + ([110] if schema else []),
        header={"values": ["#", "text", "answer", "score", "cluster", "winner", "tokens"]
                + (["tests"] if tests else []) + (["schema"] if schema else []), "align": "left"},
        cells={"values": [
            [r["index"] for r in shown], [shorten(r["text"], TABLE_TEXT_CHARS) for r in shown],
            [("—" if r["answer"] is None else shorten(str(r["answer"]), 40)) for r in shown],
            [fmt_num(r["score"], 3) for r in shown], [fmt_num(r["cluster"]) for r in shown],
            ["★ winner" if r["winner"] else "" for r in shown], [r["completion_tokens"] for r in shown]]
            + ([tests] if tests else []) + ([schema] if schema else []),
            "align": "left", "fill": {"color": [fill]}, "height": 24},
    ), row=2 if has_votes else 1, col=1)
    paging = f" · rows {first + 1}–{first + len(shown)} of {len(rows)}" if len(rows) > len(shown) else ""
    about = (f"winner: {shorten(winner or '—', 40)}" if has_votes
             else "no answers extracted, so no votes (a voter or an extract param gives answers)")
    fig.update_layout(
        title={"text": f"Samples of {node} · {len(rows)} candidate{'s' if len(rows) != 1 else ''} · {about}"
                       + paging, "font": {"size": 14}},
        height=height, template="plotly_white", margin={"l": 10, "r": 10, "t": 40, "b": 10}, showlegend=False)
    if has_votes:
        fig.update_xaxes(type="category", tickangle=0, automargin=True, row=1, col=1)
        fig.update_yaxes(title={"text": VOTES_AXIS}, rangemode="tozero", row=1, col=1)
    return fig


def _schema_text(c: dict[str, Any]) -> str:
    """A tool_schema verdict as a table cell's text: ✓ valid, ✗ and its reason, or '' when unchecked."""
    verdict = schema_verdict(c)
    if verdict is None:
        return ""
    return "✓ valid" if verdict.get("ok") else shorten("✗ " + str(verdict.get("reason", "")), 60)


TABLE_TEXT_CHARS = 240
LINE_CHARS = 55
"""Characters of a candidate's text on one line of the figure's table at half a page's width (a conservative
guess: a narrower line wraps the text onto more lines than the rows were given, and the last rows went out of
sight, e.g. 5 of self_certainty_bon's 6 samples on the bundled model)."""


def _row_px(text: str) -> int:
    """Pixels a table row takes: its text shortened to TABLE_TEXT_CHARS, wrapped at LINE_CHARS a line."""
    lines = max(1, math.ceil(len(shorten(text, TABLE_TEXT_CHARS)) / LINE_CHARS))
    return max(30, 10 + 17 * lines)


VOTES_AXIS = "votes (candidates per answer)"
"""The histogram's y axis: bars count the candidates that gave each answer, not their scores (the table's)."""


def samples_html(record: dict[str, Any], node_id: str | None = None, limit: int = 300) -> str:
    """The candidate table as a styled HTML fragment ('' without a candidate set)."""
    body = samples_table_body(record, node_id, limit)
    return wrap_section(body) if body else ""


def samples_table_body(record: dict[str, Any], node_id: str | None = None, limit: int = 300) -> str:
    """The candidate table: full texts behind <details>, the winner highlighted; where candidates' code ran
    against tests, each candidate's tests (app.viz.code_runs) and a behaviour vote's note above the table."""
    picked = pick_set(record, node_id)
    if picked is None:
        return ""
    node, cset = picked
    rows = sample_rows(record, node)
    cands = [c for c in cset.get("candidates") or [] if isinstance(c, dict)]
    with_tests = has_test_runs(cands, node)
    with_schema = any(schema_verdict(c) is not None for c in cands)
    body = []
    for r in rows[:limit]:
        text = r["text"]
        cell = (f"<details><summary>{esc(shorten(text, 140))}</summary><div class=mg-text>{esc(text)}</div></details>"
                if len(text) > 140 else f"<span class=mg-text>{esc(text)}</span>")
        body.append(f"<tr class=\"{'mg-winner' if r['winner'] else ''}\"><td class=num>{r['index']}</td><td>{cell}</td>"
                    f"<td>{esc('—' if r['answer'] is None else r['answer'])}</td>"
                    f"<td class=num>{fmt_num(r['score'], 3)}</td><td class=num>{fmt_num(r['cluster'])}</td>"
                    f"<td>{'★' if r['winner'] else ''}</td><td class=num>{r['completion_tokens']}</td>"
                    + (f"<td>{tests_cell(cands[r['index']], node)}</td>" if with_tests else "")
                    + (f"<td>{schema_cell(cands[r['index']])}</td>" if with_schema else "") + "</tr>")
    more = (f'<p class="mg-muted">{len(rows) - limit} more candidates not shown; export the run as JSON for all '
            "of them.</p>" if len(rows) > limit else "")
    node_kind = (node_by_id(record, node) or {}).get("kind", "")
    return (f"<h3>Candidates of {esc(node)} ({esc(node_kind)}) · {len(rows)}</h3>" + behaviour_note_body(record, node)
            + "<table class=mg-samples><thead><tr><th class=num>#</th><th>text</th><th>answer</th><th class=num>score"
            "</th><th class=num>cluster</th><th>winner</th><th class=num>tokens</th>"
            + ("<th>tests</th>" if with_tests else "") + ("<th>schema</th>" if with_schema else "")
            + "</tr></thead><tbody>"
            + "".join(body) + "</tbody></table>" + more + stopped_samples_body(record, node)
            + selection_body(record, node) + early_exit_body(record, node))
