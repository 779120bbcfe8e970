"""Timeline: node runs and the LM calls inside them on one time axis (a Gantt chart), aggregated when big."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from typing import Any

import plotly.graph_objects as go

from app.run.status import CANCELLED, FAILED, NODE_CACHED, NODE_SKIPPED, RUNNING, SUCCEEDED
from app.viz.common import MUTED, STATUS_COLORS, esc, run_start, shorten
from app.viz.summary import request_key

MAX_CALL_BARS = 800
"""Above this many calls, each bar is a request (its samples together) instead of a call."""
MAX_REQUEST_BARS = 1500
"""Above this many requests, calls are counted in time bins per node."""
MAX_LANES = 12
"""Parallel lanes drawn per node; calls beyond share the last lane."""
TIME_BINS = 120


def _lanes(spans: list[tuple[float, float]]) -> list[int]:
    """Greedy interval partitioning: the lane of each span, so overlapping spans never share one."""
    order = sorted(range(len(spans)), key=lambda i: spans[i][0])
    lane_end: list[float] = []
    lanes = [0] * len(spans)
    for i in order:
        start, end = spans[i]
        for k, last in enumerate(lane_end):
            if last <= start + 1e-9:
                lane_end[k] = end
                lanes[i] = k
                break
        else:
            lanes[i] = len(lane_end)
            lane_end.append(end)
    return [min(lane, MAX_LANES - 1) for lane in lanes]


def _call_bars(calls: list[dict[str, Any]], t0: float, by_request: bool) -> list[dict[str, Any]]:
    """One bar per call, or per request: start, end, tokens and hover text."""
    if not by_request:
        return [{
            "node": c.get("node_id") or "?", "start": c["start"] - t0, "end": max(c["end"], c["start"]) - t0,
            "tokens": c.get("completion_tokens", 0),
            "hover": (f"<b>{esc(c.get('call_id'))}</b> · {esc(c.get('purpose'))} · sample {c.get('sample_index')}/"
                      f"{c.get('n')}<br>prompt {c.get('prompt_tokens')} tok ({c.get('prompt_tokens_evaluated')} "
                      f"evaluated, {c.get('prompt_tokens_cached')} cached) · completion "
                      f"{c.get('completion_tokens')} tok<br>{(c['end'] - c['start']):.3f}s · "
                      f"{esc(c.get('finish_reason'))}<br>{esc(shorten(c.get('completion'), 120))}"),
        } for c in calls]
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for c in calls:
        groups[request_key(c)].append(c)
    bars = []
    for members in groups.values():
        first = members[0]
        start = min(c["start"] for c in members)
        end = max(max(c["end"], c["start"]) for c in members)
        tokens = sum(c.get("completion_tokens", 0) for c in members)
        bars.append({
            "node": first.get("node_id") or "?", "start": start - t0, "end": end - t0, "tokens": tokens,
            "hover": (f"<b>request of {len(members)} sample(s)</b> · {esc(first.get('purpose'))}<br>prompt "
                      f"{first.get('prompt_tokens')} tok · completion {tokens} tok in total<br>{end - start:.3f}s"),
        })
    return bars


def _binned_bars(calls: list[dict[str, Any]], t0: float, span: float) -> list[dict[str, Any]]:
    width = max(span, 1e-6) / TIME_BINS
    bins: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for c in calls:
        bins[(c.get("node_id") or "?", int((c["start"] - t0) / width))].append(c)
    bars = []
    for (node, k), members in bins.items():
        tokens = sum(c.get("completion_tokens", 0) for c in members)
        bars.append({"node": node, "start": k * width, "end": (k + 1) * width, "tokens": tokens, "lane": 0,
                     "hover": f"<b>{len(members)} calls</b> started here · {tokens} completion tok"})
    return bars


def _nested_order(node_ids: list[str]) -> list[str]:
    """Node ids with the nodes of each sub-workflow right under its workflow node (`w`, `w/0`, `w/0/critique`,
    ..., numbered child runs in number order), adding a row for each child run of a mapped node (`w/0`)."""
    children: dict[str, list[str]] = defaultdict(list)
    for node_id in node_ids:
        parts = node_id.split("/")
        for depth in range(1, len(parts) + 1):
            path, parent = "/".join(parts[:depth]), "/".join(parts[:depth - 1])
            if path not in children[parent]:
                children[parent].append(path)
    out: list[str] = []

    def walk(parent: str) -> None:
        kids = children.get(parent, [])
        if kids and all(k.rpartition("/")[2].isdigit() for k in kids):
            kids = sorted(kids, key=lambda k: int(k.rpartition("/")[2]))
        for kid in kids:
            out.append(kid)
            walk(kid)

    walk("")
    return out


def collapsible_nodes(record: dict[str, Any]) -> list[str]:
    """The workflow nodes of a run whose sub-workflow nodes the timeline can hide (`collapsed=`), in row order:
    the traced nodes with nested nodes under them (`w` for `w/critique` or `w/2/critique`)."""
    ids = [n["node_id"] for n in record.get("nodes", []) if isinstance(n.get("node_id"), str)]
    known = set(ids)
    parents = {"/".join(i.split("/")[:depth]) for i in ids for depth in range(1, i.count("/") + 1)}
    return [i for i in _nested_order(ids) if i in parents and i in known]


def _hidden(node_id: str, collapsed: Collection[str]) -> bool:
    return any(node_id.startswith(f"{c}/") for c in collapsed)


def _child_runs(nodes: list[dict[str, Any]], rows: list[str], known: set[str]) -> list[dict[str, Any]]:
    """A node-like row for each child run of a mapped workflow node (`w/2`): from its first node's start to its
    last node's end, failed when one of its nodes failed."""
    runs = []
    for row in rows:
        if row in known:
            continue
        inside = [n for n in nodes if n["node_id"].startswith(f"{row}/")]
        if not inside:
            continue
        statuses = {n.get("status") for n in inside}
        status = next((s for s in (FAILED, CANCELLED, RUNNING, NODE_SKIPPED) if s in statuses),
                      NODE_CACHED if statuses == {NODE_CACHED} else SUCCEEDED)
        runs.append({"node_id": row, "kind": "child run", "status": status,
                     "started_at": min((n.get("started_at") or 0 for n in inside), default=0) or None,
                     "ended_at": max((n.get("ended_at") or 0 for n in inside), default=0) or None,
                     "duration_s": None, "error": None})
    return runs


def timeline_figure(record: dict[str, Any], collapsed: Collection[str] = ()) -> go.Figure:
    """Gantt chart: a row per node (coloured by status; cache hits as diamonds) and rows of its LM calls
    below it (coloured by completion tokens). Parallel calls sit in separate lanes. The nodes of a sub-workflow
    sit under their workflow node (`w/critique`, a row per child run of a mapped one: `w/2`); the workflow
    nodes named in `collapsed` hide theirs."""
    t0 = run_start(record)
    nodes = [n for n in record.get("nodes", []) if not _hidden(n["node_id"], collapsed)]
    calls = [c for c in record.get("lm_calls", []) if isinstance(c.get("start"), int | float)
             and not _hidden(c.get("node_id") or "?", collapsed)]
    ends = [c["end"] for c in calls] + [n.get("ended_at") or 0 for n in nodes]
    span = max([e - t0 for e in ends if e] + [record["run"].get("wall_s") or 0, 1e-3])
    mode, bars = _call_bars_for(calls, t0, span)
    per_node = _bars_in_lanes(bars)
    rows, row_of_lane, child_runs = _timeline_rows(nodes, per_node)
    fig = go.Figure()
    _add_node_bars(fig, nodes, calls, t0, span)
    _add_child_runs(fig, child_runs, t0, span)
    _add_cache_hits(fig, nodes, t0)
    _add_call_bars(fig, bars, row_of_lane, span)
    fig.update_layout(
        title={"text": f"Timeline · {len(nodes)} nodes · {len(calls)} LM calls · {mode}", "font": {"size": 14}},
        barmode="overlay", bargap=0.25, height=min(140 + 26 * max(len(rows), 1), 1600),
        xaxis={"title": {"text": "seconds since run start"}, "rangemode": "tozero"},
        yaxis={"categoryorder": "array", "categoryarray": rows, "autorange": "reversed", "automargin": True},
        legend={"orientation": "h", "y": -0.12 if len(rows) > 6 else -0.3},
        margin={"l": 10, "r": 10, "t": 40, "b": 40},
        template="plotly_white",
    )
    if not rows:
        fig.add_annotation(text="nothing ran", showarrow=False)
    return fig


def _call_bars_for(calls: list[dict[str, Any]], t0: float, span: float) -> tuple[str, list[dict[str, Any]]]:
    """(how the calls are drawn, their bars): one bar per call, per request, or counts in time bins."""
    if len(calls) <= MAX_CALL_BARS:
        return "one bar per LM call", _call_bars(calls, t0, by_request=False)
    if len({request_key(c) for c in calls}) <= MAX_REQUEST_BARS:
        return "one bar per request (its samples together)", _call_bars(calls, t0, by_request=True)
    return f"LM calls counted in {TIME_BINS} time bins", _binned_bars(calls, t0, span)


def _bars_in_lanes(bars: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Each node's call bars, overlapping ones given separate lanes."""
    per_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for bar in bars:
        per_node[bar["node"]].append(bar)
    for node_bars in per_node.values():
        if "lane" not in node_bars[0]:
            for bar, lane in zip(node_bars, _lanes([(b["start"], b["end"]) for b in node_bars]), strict=True):
                bar["lane"] = lane
    return per_node


def _timeline_rows(nodes: list[dict[str, Any]], per_node: dict[str, list[dict[str, Any]]]
                   ) -> tuple[list[str], dict[tuple[str, int], str], list[dict[str, Any]]]:
    """The y rows top to bottom (a node, then its call lanes), the row of each (node, lane), and child runs."""
    rows: list[str] = []
    row_of_lane: dict[tuple[str, int], str] = {}
    known = [n["node_id"] for n in nodes] + [k for k in per_node if k not in {n["node_id"] for n in nodes}]
    child_runs: list[dict[str, Any]] = []
    if any("/" in node_id for node_id in known):
        known = _nested_order(known)
        child_runs = _child_runs(nodes, known, {n["node_id"] for n in nodes})
    for node_id in known:
        rows.append(node_id)
        lanes = sorted({b["lane"] for b in per_node.get(node_id, [])})
        for lane in lanes:
            label = f"{node_id} · calls" + (f" {lane + 1}" if len(lanes) > 1 else "")
            row_of_lane[(node_id, lane)] = label
            rows.append(label)
    return rows, row_of_lane, child_runs


def _add_node_bars(fig: go.Figure, nodes: list[dict[str, Any]], calls: list[dict[str, Any]], t0: float,
                   span: float) -> None:
    """A bar per node that ran, one trace per status; a node still running (or cut off) ends at its last call."""
    last_seen: dict[str, float] = {}
    for c in calls:
        node_id = c.get("node_id") or "?"
        last_seen[node_id] = max(last_seen.get(node_id, 0.0), c["end"])
    for status in sorted({n.get("status") or "?" for n in nodes}):
        group = [n for n in nodes if (n.get("status") or "?") == status and n.get("status") != NODE_CACHED]
        if not group:
            continue
        starts = [((n.get("started_at") or t0) - t0) for n in group]
        ends_ = [((n.get("ended_at") or last_seen.get(n["node_id"]) or n.get("started_at") or t0) - t0)
                 for n in group]
        fig.add_trace(go.Bar(
            orientation="h", y=[n["node_id"] for n in group], base=starts,
            x=[max(e - s, span / 500) for s, e in zip(starts, ends_, strict=True)],
            marker={"color": STATUS_COLORS.get(status, MUTED)}, name=f"node {status}",
            customdata=[[n.get("kind"), n.get("duration_s"), shorten(n.get("error"), 200)] for n in group],
            hovertemplate="<b>%{y}</b> (%{customdata[0]})<br>" + status
            + "<br>start %{base:.3f}s · %{customdata[1]:.3f}s<br>%{customdata[2]}<extra></extra>",
        ))


def _add_child_runs(fig: go.Figure, child_runs: list[dict[str, Any]], t0: float, span: float) -> None:
    if not child_runs:
        return
    starts = [((r.get("started_at") or t0) - t0) for r in child_runs]
    fig.add_trace(go.Bar(
        orientation="h", y=[r["node_id"] for r in child_runs], base=starts,
        x=[max(((r.get("ended_at") or t0) - t0) - s, span / 500) for r, s in zip(child_runs, starts, strict=True)],
        marker={"color": [STATUS_COLORS.get(r["status"], MUTED) for r in child_runs], "opacity": 0.55},
        name="child run", hovertemplate="<b>%{y}</b><br>child run of a mapped workflow node<br>start "
        "%{base:.3f}s<extra></extra>"))


def _add_cache_hits(fig: go.Figure, nodes: list[dict[str, Any]], t0: float) -> None:
    cached = [n for n in nodes if n.get("status") == NODE_CACHED]
    if not cached:
        return
    fig.add_trace(go.Scatter(
        x=[(n.get("started_at") or t0) - t0 for n in cached], y=[n["node_id"] for n in cached],
        mode="markers+text", text=["cache hit"] * len(cached), textposition="middle right",
        marker={"symbol": "diamond", "size": 12, "color": STATUS_COLORS[NODE_CACHED]}, name="node from cache",
        hovertemplate="<b>%{y}</b><br>cache hit: outputs reused, no LM calls<extra></extra>"))


def _add_call_bars(fig: go.Figure, bars: list[dict[str, Any]], row_of_lane: dict[tuple[str, int], str],
                   span: float) -> None:
    """The LM calls' bars, coloured by completion tokens (a colour bar explains them, no legend swatch)."""
    if not bars:
        return
    tokens = [b["tokens"] for b in bars]
    fig.add_trace(go.Bar(
        orientation="h", y=[row_of_lane[(b["node"], b["lane"])] for b in bars],
        base=[b["start"] for b in bars], x=[max(b["end"] - b["start"], span / 1000) for b in bars],
        marker={"color": tokens, "colorscale": "Viridis", "cmin": 0, "cmax": max(max(tokens), 1),
                "colorbar": {"title": {"text": "completion<br>tokens"}, "thickness": 12},
                "line": {"width": 0}},
        name="LM calls", hovertext=[b["hover"] for b in bars], hoverinfo="text", showlegend=False,
    ))
