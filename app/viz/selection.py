"""The voter's model-judged selections read from a run's trace: a tournament's bracket (knockout rounds as columns of
matches, or a league table) and GenSelect's groups with each draw's pick and reasoning."""

from __future__ import annotations

from typing import Any

from app.viz.common import esc, events_of, fmt_num

SELECT_METHODS = ("genselect", "tournament")


def selection_votes(record: dict[str, Any], node_id: str | None = None) -> list[dict[str, Any]]:
    """The vote events of genselect / tournament voters (node id and the vote's data), in run order."""
    out = []
    for event in events_of(record, "vote", node_id):
        data = event.get("data") or {}
        if data.get("method") in SELECT_METHODS and isinstance(data.get("detail"), dict):
            out.append({"node_id": event.get("node_id"), **data})
    return out


def _label(index: Any, winner: Any) -> str:
    star = " ★" if index is not None and index == winner else ""
    return f"#{esc(index)}{star}" if index is not None else "—"


def _reasoning(items: list[dict[str, Any]], what: str) -> str:
    rows = []
    for k, item in enumerate(items):
        text = str(item.get("reasoning") or "")
        rows.append(f"<details><summary>{esc(what)} {k + 1}: {esc(item.get('summary', ''))}</summary>"
                    f"<div class=mg-text>{esc(text) or '<i>(empty)</i>'}</div></details>")
    return "".join(rows)


def _match_box(match: dict[str, Any], final: Any) -> str:
    a, b, winner = match.get("a"), match.get("b"), match.get("winner")
    wins = match.get("wins") or [0, 0]
    judgements = [{**j, "summary": f"order {j.get('order', '?')} → "
                   + (f"#{j.get('pick')}" if j.get("pick") is not None else "no verdict")}
                  for j in match.get("judgements") or []]
    tie = ' <span class="mg-muted">(tie rule)</span>' if match.get("tied") else ""
    cls = "mg-box mg-winner" if winner == final else "mg-box"
    return (f'<div class="{cls}"><b>{_label(a, winner)}</b> vs <b>{_label(b, winner)}</b><br>'
            f"judgements won {fmt_num(wins[0])}–{fmt_num(wins[1])}{tie}"
            f"{_reasoning(judgements, 'judgement')}</div>")


def bracket_body(vote: dict[str, Any]) -> str:
    """A tournament vote as HTML: knockout rounds as columns left to right, league standings as a table."""
    detail = vote.get("detail") or {}
    final = vote.get("winner")
    rounds = detail.get("rounds") or []
    parts = [f"<h3>Tournament at {esc(vote.get('node_id'))} · {esc(detail.get('format'))} · "
             f"{fmt_num(detail.get('judgements'))} judgement(s) per pair · winner {_label(final, final)}</h3>"]
    standings = detail.get("standings")
    if standings:
        rows = "".join(f"<tr class=\"{'mg-winner' if s.get('index') == final else ''}\"><td class=num>"
                       f"{k + 1}</td><td>#{esc(s.get('index'))}</td><td class=num>{fmt_num(s.get('wins'))}</td>"
                       f"<td class=num>{fmt_num(s.get('matches_won'))}</td><td class=num>{fmt_num(s.get('played'))}"
                       "</td></tr>" for k, s in enumerate(standings))
        parts.append("<table class=mg-league><thead><tr><th class=num>place</th><th>candidate</th>"
                     "<th class=num>judgements won</th><th class=num>matches won</th><th class=num>played</th>"
                     f"</tr></thead><tbody>{rows}</tbody></table>")
    columns = []
    for rnd in rounds:
        if standings and rnd is rounds[0]:
            title = "League: every pair"
        else:
            title = f"Round {int(rnd.get('round', 0)) + 1}"
        boxes = "".join(_match_box(m, final) for m in rnd.get("matches") or [])
        if rnd.get("bye") is not None:
            boxes += f'<div class="mg-box mg-muted">#{esc(rnd["bye"])} (bye)</div>'
        columns.append(f'<div class="mg-round"><b>{esc(title)}</b>{boxes}</div>')
    if columns and not standings:
        columns.append(f'<div class="mg-round"><b>Winner</b><div class="mg-box mg-winner">{_label(final, final)}'
                       "</div></div>")
    parts.append(f'<div class="mg-bracket">{"".join(columns)}</div>')
    return "".join(parts)


def genselect_body(vote: dict[str, Any]) -> str:
    """A GenSelect vote as HTML: per round its groups, each draw's pick and reasoning, the group's winner."""
    detail = vote.get("detail") or {}
    final = vote.get("winner")
    parts = [f"<h3>GenSelect at {esc(vote.get('node_id'))} · {fmt_num(detail.get('draws'))} draw(s) per group · "
             f"at most {fmt_num(detail.get('max_candidates'))} per prompt · winner {_label(final, final)}</h3>"]
    columns = []
    for r, groups in enumerate(detail.get("rounds") or []):
        boxes = []
        for group in groups:
            draws = [{**d, "summary": (f"#{d.get('pick')}" if d.get("pick") is not None else "no pick")}
                     for d in group.get("draws") or []]
            members = ", ".join(f"#{esc(i)}" for i in group.get("group") or [])
            note = ' <span class="mg-muted">(no pick: tie rule)</span>' if group.get("fallback") else ""
            cls = "mg-box mg-winner" if group.get("winner") == final else "mg-box"
            boxes.append(f'<div class="{cls}">{members}<br>picked <b>{_label(group.get("winner"), final)}</b>{note}'
                         f"{_reasoning(draws, 'draw')}</div>")
        columns.append(f'<div class="mg-round"><b>Round {r + 1}</b>{"".join(boxes)}</div>')
    parts.append(f'<div class="mg-bracket">{"".join(columns)}</div>')
    return "".join(parts)


def selection_body(record: dict[str, Any], node_id: str | None = None) -> str:
    """Every genselect / tournament vote at `node_id` (all nodes when None) as HTML ('' when there is none)."""
    return "".join(bracket_body(v) if v.get("method") == "tournament" else genselect_body(v)
                   for v in selection_votes(record, node_id))

