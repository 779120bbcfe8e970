"""Search tree: partial solutions with their step scores, pruned branches greyed, the chosen path
highlighted, full text on hover (figure) or behind expandable rows (HTML outline); per strategy, DVTS's
subtrees coloured, particle filtering's resampling copies, MCTS's visit counts on the states, AB-MCTS's "wider" and
"deeper" steps marked (labels and edge colours)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import plotly.graph_objects as go

from app.viz.beam_tree import beam_tree_states
from app.viz.common import MUTED, WINNER_COLOR, esc, events_of, fmt_num, shorten, wrap_for_hover, wrap_section

MAX_OUTLINE_NODES = 600
BRANCH_STYLES = {"wider": {"color": "#1f77b4", "width": 2}, "deeper": {"color": "#9467bd", "width": 2, "dash": "dash"}}
"""AB-MCTS: the edge into a step made by going wider (a new child) or deeper (continuing a partial solution)."""
SUBTREE_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


def strategy_note(n: dict[str, Any]) -> str:
    """What a strategy recorded on a state: its subtree (DVTS), its generation and copies (particles), its
    visits and mean value (MCTS), as ' · '-joined words ('' for beam and best-first)."""
    parts = []
    if n.get("branch") in BRANCH_STYLES:
        parts.append(str(n["branch"]))
    if isinstance(n.get("subtree"), int):
        parts.append(f"subtree {n['subtree']}")
    if isinstance(n.get("generation"), int):
        parts.append(f"generation {n['generation']} · {fmt_num(n.get('copies'))} cop"
                     f"{'y' if n.get('copies') == 1 else 'ies'}")
    if isinstance(n.get("beam_group"), int):
        parts.append(f"group {n['beam_group']} · token logprob {fmt_num(n.get('token_logprob'), 3)}")
    if isinstance(n.get("visits"), int):
        visits = n["visits"]
        mean = n.get("value") / visits if visits and isinstance(n.get("value"), int | float) else None
        parts.append(f"{visits} visits · mean value {fmt_num(mean, 3)}" + (" · rollout" if n.get("rollout") else ""))
    return " · ".join(parts)


def marker_label(n: dict[str, Any]) -> str:
    """The short label drawn beside a state: AB-MCTS's wider / deeper, MCTS visits, or a particle's copies."""
    if n.get("branch") in BRANCH_STYLES:
        return str(n["branch"])
    if isinstance(n.get("visits"), int):
        return str(n["visits"])
    if isinstance(n.get("copies"), int) and n["copies"] > 0:
        return f"×{n['copies']}"
    return ""


def tree_nodes(record: dict[str, Any], node_id: str | None = None) -> tuple[str, list[dict[str, Any]]] | None:
    """(workflow node id, tree nodes) from the node's "tree" events (later events update earlier ones by
    id), a token-level beam's "beam_tree" event, or else from LM calls linked by `parent`. None when the run has
    no tree."""
    events = events_of(record, "tree", node_id)
    beams = events_of(record, "beam_tree", node_id)
    if beams and not events:
        return str(node_id or beams[-1].get("node_id") or "?"), beam_tree_states(beams[-1]["data"])
    if events:
        owner = node_id or events[0].get("node_id") or "?"
        merged: dict[str, dict[str, Any]] = {}
        for event in events:
            if event.get("node_id") != owner:
                continue
            for item in event["data"].get("nodes") or []:
                key = str(item.get("id"))
                merged[key] = {**merged.get(key, {}), **item, "id": key}
        return owner, list(merged.values())
    calls = [c for c in record.get("lm_calls", [])
             if (node_id is None or c.get("node_id") == node_id)
             and (c.get("parent") or "depth" in (c.get("tag") or {}))]
    if not calls:
        return None
    owner = node_id or calls[0].get("node_id") or "?"
    nodes = []
    for c in calls:
        if c.get("node_id") != owner:
            continue
        tag = c.get("tag") or {}
        nodes.append({"id": c["call_id"], "parent": c.get("parent"), "depth": tag.get("depth"),
                      "text": c.get("completion", ""), "score": tag.get("score"), "pruned": bool(tag.get("pruned")),
                      "chosen": bool(tag.get("chosen"))})
    return owner, nodes


def tree_nodes_ids(record: dict[str, Any]) -> list[str]:
    """Workflow nodes that drew a search tree."""
    return list(dict.fromkeys(str(e.get("node_id")) for e in events_of(record, "tree") + events_of(record,
                                                                                                "beam_tree")))


def layout_tree(nodes: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """(x = depth, y = row) of each node: leaves on consecutive rows, a parent centred on its children."""
    ids = {n["id"] for n in nodes}
    children: dict[str | None, list[str]] = defaultdict(list)
    for n in nodes:
        parent = n.get("parent")
        children[str(parent) if parent is not None and str(parent) in ids else None].append(n["id"])
    pos: dict[str, tuple[float, float]] = {}
    next_row = 0.0
    roots = children.get(None, []) + [n["id"] for n in nodes]  # leftovers (cycles) become roots
    for root in roots:
        if root in pos:
            continue
        # iterative post-order walk: deep chains must not hit the recursion limit
        stack: list[tuple[str, int, bool]] = [(root, 0, False)]
        entered: set[str] = set()
        while stack:
            node, depth, expanded = stack.pop()
            if expanded:
                kid_ys = [pos[k][1] for k in children.get(node, []) if k in pos and k not in entered]
                if kid_ys:
                    y = sum(kid_ys) / len(kid_ys)
                else:
                    y = next_row
                    next_row += 1
                pos[node] = (float(depth), y)
                entered.discard(node)
                continue
            if node in pos or node in entered:
                continue
            entered.add(node)
            stack.append((node, depth, True))
            for kid in reversed(children.get(node, [])):
                if kid not in pos and kid not in entered:
                    stack.append((kid, depth + 1, False))
    by_id = {n["id"]: n for n in nodes}
    return {k: (float(by_id[k].get("depth")) if isinstance(by_id[k].get("depth"), int | float) else x, y)
            for k, (x, y) in pos.items()}


EdgeSets = dict[str, tuple[list[float | None], list[float | None]]]


def _edge_sets(nodes: list[dict[str, Any]], pos: dict[str, tuple[float, float]]) -> EdgeSets:
    """The tree's edges as line coordinates, one set per style: normal, pruned, chosen, a DVTS subtree (pruned or
    not) or an AB-MCTS branch (wider / deeper)."""
    by_id = {n["id"]: n for n in nodes}
    edge_sets: EdgeSets = {"normal": ([], []), "pruned": ([], []), "chosen": ([], [])}
    for n in nodes:
        parent = n.get("parent")
        if parent is None or str(parent) not in pos:
            continue
        parent = str(parent)
        kind = ("chosen" if n.get("chosen") and by_id[parent].get("chosen")
                else "pruned" if n.get("pruned") else "normal")
        if kind != "chosen" and isinstance(n.get("subtree"), int):
            kind = f"subtree {n['subtree']}" + (" pruned" if kind == "pruned" else "")
        elif kind == "normal" and n.get("branch") in BRANCH_STYLES:
            kind = str(n["branch"])
        xs, ys = edge_sets.setdefault(kind, ([], []))
        (x0, y0), (x1, y1) = pos[parent], pos[n["id"]]
        xs.extend([x0, x1, None])
        ys.extend([y0, y1, None])
    return edge_sets


def _add_edges(fig: go.Figure, scatter: Any, nodes: list[dict[str, Any]], edge_sets: EdgeSets) -> None:
    styles = {"normal": {"color": "#8fa9c9", "width": 1}, "pruned": {"color": "#d0d0d0", "width": 1, "dash": "dot"},
              "chosen": {"color": WINNER_COLOR, "width": 4}, **BRANCH_STYLES}
    subtrees = sorted({n["subtree"] for n in nodes if isinstance(n.get("subtree"), int)})
    for i, subtree in enumerate(subtrees):  # DVTS: each subtree's branches in its own colour (pruned ones dotted)
        color = SUBTREE_COLORS[i % len(SUBTREE_COLORS)]
        styles[f"subtree {subtree}"] = {"color": color, "width": 2}
        styles[f"subtree {subtree} pruned"] = {"color": color, "width": 1, "dash": "dot"}
    legend = ("pruned", "chosen", *BRANCH_STYLES)
    for kind, (xs, ys) in edge_sets.items():
        if xs:
            fig.add_trace(scatter(x=xs, y=ys, mode="lines", line=styles[kind], hoverinfo="skip",
                                  name=f"{kind} branch" if not kind.startswith("subtree") else kind,
                                  showlegend=kind in legend or (kind.startswith("subtree")
                                                                and not kind.endswith(" pruned"))))


def _hover(n: dict[str, Any]) -> str:
    flags = " · pruned" if n.get("pruned") else ""
    flags += " · chosen" if n.get("chosen") else ""
    note = strategy_note(n)
    flags += f"<br>{esc(note)}" if note else ""
    return (f"<b>{esc(n['id'])}</b> · depth {fmt_num(n.get('depth'))} · score {fmt_num(n.get('score'), 3)}"
            f"{flags}<br>{wrap_for_hover(n.get('text'))}")


def _add_states(fig: go.Figure, scatter: Any, nodes: list[dict[str, Any]],
                pos: dict[str, tuple[float, float]]) -> None:
    """The states as markers: kept ones coloured by score (the chosen path ringed), pruned ones muted."""
    live = [n for n in nodes if not n.get("pruned")]
    pruned = [n for n in nodes if n.get("pruned")]
    scores = [n.get("score") for n in live if isinstance(n.get("score"), int | float)]
    labels = [marker_label(n) for n in live]
    if live:
        fig.add_trace(scatter(
            x=[pos[n["id"]][0] for n in live], y=[pos[n["id"]][1] for n in live], name="kept",
            mode="markers+text" if any(labels) else "markers", text=labels, textposition="top center",
            textfont={"size": 10, "color": "#444"},
            marker={"size": [14 if n.get("chosen") else 9 for n in live],
                    "color": [n.get("score") if isinstance(n.get("score"), int | float) else 0.0 for n in live],
                    "colorscale": "RdYlGn", "cmin": min(scores, default=0.0), "cmax": max(scores, default=1.0),
                    "colorbar": {"title": {"text": "step score"}, "thickness": 12},
                    "line": {"color": [WINNER_COLOR if n.get("chosen") else "#555" for n in live],
                             "width": [3 if n.get("chosen") else 0.5 for n in live]}},
            hovertext=[_hover(n) for n in live], hoverinfo="text"))
    if pruned:
        fig.add_trace(scatter(
            x=[pos[n["id"]][0] for n in pruned], y=[pos[n["id"]][1] for n in pruned], mode="markers",
            name="pruned", marker={"size": 7, "color": MUTED, "opacity": 0.6},
            hovertext=[_hover(n) for n in pruned], hoverinfo="text"))


def search_tree_figure(record: dict[str, Any], node_id: str | None = None) -> go.Figure | None:
    """The search tree as a figure, or None when the run has none."""
    found = tree_nodes(record, node_id)
    if found is None or not found[1]:
        return None
    owner, nodes = found
    pos = layout_tree(nodes)
    scatter = go.Scattergl if len(nodes) > 1500 else go.Scatter
    fig = go.Figure()
    _add_edges(fig, scatter, nodes, _edge_sets(nodes, pos))
    _add_states(fig, scatter, nodes, pos)
    depth = int(max((x for x, _ in pos.values()), default=0))
    pruned = sum(1 for n in nodes if n.get("pruned"))
    fig.update_layout(
        title={"text": f"Search tree of {owner} · {len(nodes)} states · {pruned} pruned · "
                       f"{sum(1 for n in nodes if n.get('chosen'))} on the chosen path{_strategy_summary(nodes)}",
               "font": {"size": 14}},
        height=min(max(360, 18 * (max((y for _, y in pos.values()), default=0) + 2)), 1400),
        xaxis={"title": {"text": "depth (step)"}, "dtick": 1, "range": [-0.5, depth + 0.5]},
        yaxis={"visible": False, "autorange": "reversed"}, template="plotly_white", hovermode="closest",
        legend={"orientation": "h", "y": -0.15}, margin={"l": 10, "r": 10, "t": 40, "b": 40})
    return fig


def _strategy_summary(nodes: list[dict[str, Any]]) -> str:
    """The title's strategy part: DVTS subtrees, particle generations, AB-MCTS's wider / deeper steps, MCTS root
    visits ('' for beam)."""
    branches = [n["branch"] for n in nodes if n.get("branch") in BRANCH_STYLES]
    if branches:
        return (f" · {branches.count('wider')} wider, {branches.count('deeper')} deeper (AB-MCTS: labels and edge "
                "colours)")
    subtrees = {n["subtree"] for n in nodes if isinstance(n.get("subtree"), int)}
    if subtrees:
        return f" · {len(subtrees)} subtrees (coloured)"
    generations = {n["generation"] for n in nodes if isinstance(n.get("generation"), int)}
    if generations:
        return f" · {len(generations)} resampling generations (labels: copies drawn)"
    visits = [n["visits"] for n in nodes if n.get("parent") is None and isinstance(n.get("visits"), int)]
    if visits:
        return f" · {visits[0]} simulation values at the root (labels: visits)"
    return ""


def tree_html(record: dict[str, Any], node_id: str | None = None) -> str:
    """The tree outline as a styled HTML fragment ('' when the run has no tree)."""
    body = tree_outline_body(record, node_id)
    return wrap_section(body) if body else ""


def tree_outline_body(record: dict[str, Any], node_id: str | None = None) -> str:
    """The tree as nested expandable rows (full texts), chosen path marked ★, pruned ones greyed."""
    found = tree_nodes(record, node_id)
    if found is None or not found[1]:
        return ""
    owner, nodes = found
    ids = {n["id"] for n in nodes}
    children: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    for n in nodes[:MAX_OUTLINE_NODES]:
        parent = n.get("parent")
        children[str(parent) if parent is not None and str(parent) in ids else None].append(n)

    def head(n: dict[str, Any]) -> str:
        style = ' style="opacity:.55"' if n.get("pruned") else ""
        mark = "★ " if n.get("chosen") else ""
        note = strategy_note(n)
        summary = (f"{mark}<b>{esc(n['id'])}</b> · score {fmt_num(n.get('score'), 3)}"
                   f"{' · pruned' if n.get('pruned') else ''}{' · ' + esc(note) if note else ''}"
                   f" — {esc(shorten(n.get('text'), 100))}")
        return (f"<details data-state=\"{esc(n['id'])}\"{' open' if n.get('chosen') else ''}{style}>"
                f"<summary>{summary}</summary>"
                f"<div style=\"margin-left:1.2em\"><div class=mg-text>{esc(n.get('text'))}</div>")

    parts: list[str] = []
    seen: set[str] = set()
    stack: list[dict[str, Any] | None] = list(reversed(children.get(None, [])))
    while stack:  # iterative pre-order; None closes the element opened before its children
        item = stack.pop()
        if item is None:
            parts.append("</div></details>")
            continue
        if item["id"] in seen:
            continue
        seen.add(item["id"])
        parts.append(head(item))
        stack.append(None)
        stack.extend(reversed(children.get(item["id"], [])))
    body = "".join(parts)
    more = (f'<p class="mg-muted">{len(nodes) - MAX_OUTLINE_NODES} more states in the figure only.</p>'
            if len(nodes) > MAX_OUTLINE_NODES else "")
    return f"<h3>Search tree of {esc(owner)} (outline)</h3><div class=mg-tree-outline>{body}</div>{more}"
