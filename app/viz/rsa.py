"""Recursive self-aggregation's lineage: each round's candidates with lines from the candidates that fed them (SVG)."""

from __future__ import annotations

from typing import Any

from app.viz.common import WINNER_COLOR, esc, events_of, shorten

COLUMN = 170
ROW = 54
BOX_W, BOX_H = 130, 40


def rsa_runs(record: dict[str, Any], node_id: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(refiner node id, its last "rsa" event payload) for each RSA refiner (or the given node)."""
    latest: dict[str, dict[str, Any]] = {}
    for event in events_of(record, "rsa", node_id):
        latest[str(event.get("node_id"))] = event.get("data") or {}
    return list(latest.items())


def lineage_svg(data: dict[str, Any]) -> str:
    """The generations as columns of boxes (round 0 the first population), a line from each parent to its child;
    the final population outlined. Full texts on hover (<title>)."""
    generations = [g for g in data.get("generations") or [] if isinstance(g, list)]
    pos: dict[str, tuple[float, float]] = {}
    for g, gen in enumerate(generations):
        for i, item in enumerate(gen):
            pos[str(item.get("id"))] = (20 + g * COLUMN, 30 + i * ROW)
    final = {str(i) for i in data.get("final") or []}
    lines, boxes = [], []
    for gen in generations:
        for item in gen:
            x1, y1 = pos[str(item.get("id"))]
            for parent in item.get("parents") or []:
                if str(parent) in pos:
                    x0, y0 = pos[str(parent)]
                    lines.append(f'<line class="mg-rsa-edge" data-from="{esc(parent)}" data-to="{esc(item.get("id"))}" '
                                 f'x1="{x0 + BOX_W}" y1="{y0 + BOX_H / 2}" x2="{x1}" y2="{y1 + BOX_H / 2}" '
                                 'stroke="#8fa9c9" stroke-width="1.2"/>')
            stroke = WINNER_COLOR if str(item.get("id")) in final else "#777"
            boxes.append(f'<g class="mg-rsa-node" data-id="{esc(item.get("id"))}"><title>{esc(item.get("text"))}'
                         f'</title><rect x="{x1}" y="{y1}" width="{BOX_W}" height="{BOX_H}" rx="5" fill="white" '
                         f'stroke="{stroke}" stroke-width="{2 if stroke == WINNER_COLOR else 1}"/>'
                         f'<text x="{x1 + 6}" y="{y1 + 15}" font-size="11" font-weight="600">{esc(item.get("id"))}'
                         f'</text><text x="{x1 + 6}" y="{y1 + 31}" font-size="10">{esc(shorten(item.get("text"), 24))}'
                         "</text></g>")
    heads = "".join(f'<text x="{20 + g * COLUMN}" y="16" font-size="12">{"population" if g == 0 else f"round {g}"}'
                    "</text>" for g in range(len(generations)))
    width = 40 + max(len(generations), 1) * COLUMN
    height = 40 + max((len(g) for g in generations), default=1) * ROW
    return (f'<svg class="mg-rsa-lineage" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">{heads}{"".join(lines)}{"".join(boxes)}</svg>')


def _from(item: dict[str, Any]) -> str:
    parents = item.get("parents") or []
    return " ← " + ", ".join(esc(p) for p in parents) if parents else ""


def rsa_body(record: dict[str, Any], node_id: str | None = None) -> str:
    """Each RSA refiner's lineage drawing and its rounds as lists ('' when the run has no RSA)."""
    sections = []
    for owner, data in rsa_runs(record, node_id):
        rounds = []
        for g, gen in enumerate(data.get("generations") or []):
            items = "".join(f"<li><b>{esc(item.get('id'))}</b>{_from(item)}"
                            f"<div class=mg-text>{esc(item.get('text'))}</div></li>" for item in gen)
            rounds.append(f"<details{' open' if g == len(data.get('generations') or []) - 1 else ''}><summary>"
                          f"{'First population' if g == 0 else f'Round {g}'} · {len(gen)} candidates</summary>"
                          f"<ul>{items}</ul></details>")
        sections.append(
            f'<div class="mg-rsa" data-node="{esc(owner)}"><h3>Recursive self-aggregation of {esc(owner)} · '
            f"population {esc(data.get('population'))} · subset {esc(data.get('subset'))} · "
            f"{esc(data.get('rounds'))} round(s)</h3><div style=\"overflow-x:auto\">{lineage_svg(data)}</div>"
            + "".join(rounds) + "</div>")
    return "".join(sections)
