"""A read-only picture of a workflow graph (SVG): the editor's saved layout, else its left-to-right layers."""

from __future__ import annotations

from typing import Any

from app.viz.common import esc, shorten

NODE_W, NODE_H = 180, 54
PORT_W, PORT_H = 150, 32
GAP_X, GAP_Y = 80, 30
MARGIN = 16
KIND_COLORS = {"input": "#2ca02c", "output": "#9467bd"}
NODE_COLOR = "#2f7ed8"


def _edges(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(from box, to box) for every wire: node inputs, and workflow outputs from their nodes."""
    edges = []
    for node in data.get("nodes") or []:
        for ref in (node.get("inputs") or {}).values():
            source, _, port = str(ref).partition(".")
            edges.append((f"inputs.{port}" if source == "inputs" else source, str(node.get("id"))))
    for name, ref in (data.get("outputs") or {}).items():
        edges.append((str(ref).partition(".")[0], f"outputs.{name}"))
    return edges


def _boxes(data: dict[str, Any]) -> list[dict[str, Any]]:
    inputs, outputs = data.get("inputs") or {}, data.get("outputs") or {}
    boxes = [{"id": f"inputs.{name}", "title": f"in · {name}", "sub": "input", "kind": "input"} for name in inputs]
    boxes += [{"id": str(n.get("id")), "title": str(n.get("id")), "sub": str(n.get("kind")), "kind": "node"}
              for n in data.get("nodes") or []]
    boxes += [{"id": f"outputs.{name}", "title": f"out · {name}", "sub": "output", "kind": "output"}
              for name in outputs]
    return boxes


def _layers(boxes: list[dict[str, Any]], edges: list[tuple[str, str]]) -> dict[str, tuple[float, float]]:
    """Longest-path layers (inputs first, outputs last), boxes stacked in each layer in workflow order."""
    preds: dict[str, list[str]] = {b["id"]: [] for b in boxes}
    for a, b in edges:
        if a in preds and b in preds and a != b:
            preds[b].append(a)
    depth: dict[str, int] = {}

    def layer(box: str, seen: frozenset[str] = frozenset()) -> int:
        if box not in depth:
            depth[box] = max((layer(p, seen | {box}) + 1 for p in preds[box] if p not in seen), default=0)
        return depth[box]

    for b in boxes:
        layer(b["id"])
    last = max(depth.values(), default=0)
    for b in boxes:
        if b["kind"] == "output":
            depth[b["id"]] = last
    rows: dict[int, int] = {}
    out = {}
    for b in boxes:
        d = depth[b["id"]]
        out[b["id"]] = (d * (NODE_W + GAP_X), rows.get(d, 0) * (NODE_H + GAP_Y))
        rows[d] = rows.get(d, 0) + 1
    return out


def workflow_svg(data: dict[str, Any]) -> str:
    """The workflow (`Workflow.to_dict()`) as an inline SVG: a box per input, node and output, and its wires."""
    boxes = _boxes(data)
    edges = _edges(data)
    layout = data.get("layout") or {}
    saved = all(isinstance(layout.get(b["id"]), list | tuple) and len(layout[b["id"]]) == 2 for b in boxes)
    where = {b["id"]: (float(layout[b["id"]][0]), float(layout[b["id"]][1])) for b in boxes} if saved \
        else _layers(boxes, edges)
    size = {b["id"]: (NODE_W, NODE_H) if b["kind"] == "node" else (PORT_W, PORT_H) for b in boxes}
    x0 = min((x for x, _ in where.values()), default=0) - MARGIN
    y0 = min((y for _, y in where.values()), default=0) - MARGIN
    width = max((where[k][0] + size[k][0] for k in where), default=0) - x0 + MARGIN
    height = max((where[k][1] + size[k][1] for k in where), default=0) - y0 + MARGIN
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="mg-workflow-graph" viewBox="{x0:g} {y0:g} {width:g} '
             f'{height:g}" width="{width:g}" height="{height:g}" font-family="system-ui,sans-serif">']
    for a, b in edges:
        if a not in where or b not in where:
            continue
        sx, sy = where[a][0] + size[a][0], where[a][1] + size[a][1] / 2
        tx, ty = where[b][0], where[b][1] + size[b][1] / 2
        bend = max(30.0, abs(tx - sx) / 2)
        parts.append(f'<path d="M{sx:g},{sy:g} C{sx + bend:g},{sy:g} {tx - bend:g},{ty:g} {tx:g},{ty:g}" '
                     'fill="none" stroke="#8a8f98" stroke-width="1.6"/>')
    for b in boxes:
        x, y = where[b["id"]]
        w, h = size[b["id"]]
        color = KIND_COLORS.get(b["kind"], NODE_COLOR)
        parts.append(f'<g><title>{esc(b["id"])} ({esc(b["sub"])})</title>'
                     f'<rect x="{x:g}" y="{y:g}" width="{w}" height="{h}" rx="8" fill="#fff" stroke="{color}" '
                     f'stroke-width="2"/><text x="{x + 10:g}" y="{y + 20:g}" font-size="13" font-weight="600" '
                     f'fill="#1f2328">{esc(shorten(b["title"], 22))}</text>')
        if b["kind"] == "node":
            parts.append(f'<text x="{x + 10:g}" y="{y + 40:g}" font-size="12" fill="{color}">'
                         f'{esc(shorten(b["sub"], 24))}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)
