"""Run totals (calls, tokens, tokens saved, time), per-node figures, and two runs side by side."""

from __future__ import annotations

import difflib
import json
from collections import defaultdict
from typing import Any

from app.run.status import FAILED, NODE_CACHED
from app.viz.common import badge, esc, events_of, fmt_num, shorten, wrap_section
from app.viz.deepconf import CONFIDENCE_MODE, confidence_totals
from app.viz.think_exit import early_exit_totals, early_exits
from nodes.algorithms.tool_calls import readable


def request_key(call: dict[str, Any]) -> tuple[Any, ...]:
    """Samples drawn by one request share node, purpose, start time and n."""
    return (call.get("node_id"), call.get("purpose"), call.get("start"), call.get("n"), call.get("prompt_hash"))


def _wall(record: dict[str, Any]) -> float | None:
    run = record["run"]
    if isinstance(run.get("wall_s"), int | float):
        return float(run["wall_s"])
    if run.get("ended_at") and run.get("started_at"):
        return float(run["ended_at"]) - float(run["started_at"])
    return None


def adaptive_savings(record: dict[str, Any]) -> tuple[int, int]:
    """(samples saved, estimated completion tokens saved) by adaptive stopping: each sample not drawn
    is counted at the mean completion length of the samples its node did draw; a DeepConf node's own estimate
    (which adds the unwritten rest of the samples its confidence stop ended) is taken as it is."""
    samples = tokens = 0
    for event in events_of(record, "adaptive_stop"):
        saved = int(event["data"].get("saved") or 0)
        if event["data"].get("mode") == CONFIDENCE_MODE:  # DeepConf estimates its own savings, stopped samples too
            samples += max(saved, 0)
            tokens += int(event["data"].get("tokens_saved_est") or 0)
            continue
        if saved <= 0:
            continue
        drawn = [c["completion_tokens"] for c in record.get("lm_calls", [])
                 if c.get("node_id") == event.get("node_id") and c.get("finish_reason") not in ("score", "choice")]
        mean = sum(drawn) / len(drawn) if drawn else 0.0
        samples += saved
        tokens += round(saved * mean)
    return samples, tokens


def thinking_tokens(call: dict[str, Any]) -> int:
    """The thinking tokens of an LM call (a part of its completion tokens; kept in its tag's extras)."""
    value = ((call.get("tag") or {}).get("extra") or {}).get("thinking_tokens", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def request_prompt_tokens(calls: list[dict[str, Any]]) -> int:
    """Prompt tokens counted once per request, from its lowest sample index drawn (sample 0 may have come from the
    sample cache, leaving no call of its own). The prompt is not part of the key: the sequences of one PRM
    positions request each have their own, and the request counts the first one's, as the run's totals do."""
    lead: dict[tuple[Any, ...], dict[str, Any]] = {}
    for c in calls:
        key = request_key(c)[:4]
        if key not in lead or c.get("sample_index", 0) < lead[key].get("sample_index", 0):
            lead[key] = c
    return sum(c.get("prompt_tokens", 0) for c in lead.values())


def run_summary(record: dict[str, Any]) -> dict[str, Any]:
    """Totals of a run. Prompt tokens are counted per request (samples share their prompt);
    `prompt_tokens_all_samples` is what evaluating each sample's prompt on its own would have cost."""
    run = record["run"]
    calls = record.get("lm_calls", [])
    nodes = record.get("nodes", [])
    requests = {request_key(c) for c in calls}
    all_samples = sum(c.get("prompt_tokens", 0) for c in calls)
    evaluated = sum(c.get("prompt_tokens_evaluated", 0) for c in calls)
    saved_samples, saved_tokens = adaptive_savings(record)
    stopped_samples, _ = confidence_totals(record)
    exited_samples, exit_saved, probe_tokens = early_exit_totals(record)
    by_model: dict[str, int] = defaultdict(int)
    by_purpose: dict[str, int] = defaultdict(int)
    for c in calls:
        by_model[c.get("model") or "?"] += 1
        by_purpose[c.get("purpose") or "?"] += 1
    status_count: dict[str, int] = defaultdict(int)
    for n in nodes:
        status_count[n.get("status") or "?"] += 1
    return {
        "run_id": run.get("id"), "workflow": run.get("workflow"), "status": run.get("status"),
        "seed": run.get("seed"), "error": run.get("error"), "wall_s": _wall(record),
        "lm_calls": len(calls), "requests": len(requests),
        "prompt_tokens": request_prompt_tokens(calls),
        "prompt_tokens_all_samples": all_samples,
        "prompt_tokens_evaluated": evaluated,
        "prompt_tokens_cached": sum(c.get("prompt_tokens_cached", 0) for c in calls),
        "completion_tokens": sum(c.get("completion_tokens", 0) for c in calls),
        "thinking_tokens": sum(thinking_tokens(c) for c in calls),
        "tokens_saved_by_prefix_sharing": max(0, all_samples - evaluated),
        "samples_saved_by_adaptive_stop": saved_samples,
        "tokens_saved_by_adaptive_stop": saved_tokens,
        "samples_stopped_by_confidence": stopped_samples,
        "samples_exited_thinking_early": exited_samples,
        "thinking_tokens_saved_by_early_exit": exit_saved,
        "early_exit_probe_tokens": probe_tokens,
        "nodes": len(nodes), "nodes_cached": status_count.get(NODE_CACHED, 0),
        "nodes_failed": status_count.get(FAILED, 0), "node_status": dict(status_count),
        "calls_by_model": dict(by_model), "calls_by_purpose": dict(by_purpose),
    }


def node_stats(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Per node, in run order: kind, status, duration, LM calls and tokens."""
    calls_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in record.get("lm_calls", []):
        calls_of[c.get("node_id") or ""].append(c)
    out = []
    for n in record.get("nodes", []):
        calls = calls_of.get(n["node_id"], [])
        completion = sum(c.get("completion_tokens", 0) for c in calls)
        evaluated = sum(c.get("prompt_tokens_evaluated", 0) for c in calls)
        out.append({"node_id": n["node_id"], "kind": n.get("kind"), "status": n.get("status"),
                    "cache_hit": n.get("cache_hit", False), "duration_s": n.get("duration_s"),
                    "lm_calls": len(calls), "prompt_tokens_evaluated": evaluated, "completion_tokens": completion,
                    "tokens": evaluated + completion, "error": n.get("error")})
    return out


CARDS = (("wall_s", "wall time (s)"), ("lm_calls", "LM calls"), ("requests", "requests"),
         ("prompt_tokens_all_samples", "prompt tokens, all samples"),
         ("prompt_tokens_evaluated", "prompt tokens evaluated"),
         ("tokens_saved_by_prefix_sharing", "prompt tokens saved by prefix sharing"),
         ("completion_tokens", "completion tokens"),
         ("tokens_saved_by_adaptive_stop", "tokens saved by adaptive stop (est.)"),
         ("nodes_cached", "nodes from cache"))


def _value_text(value: Any, limit: int = 400) -> str:
    """A value as a line of the summary: a candidate set by its size, a tool-call answer as its name(args) calls."""
    if isinstance(value, dict) and value.get("__type__") == "candidates":
        return f"candidate set of {len(value.get('candidates', []))} (winner {value.get('winner')})"
    if isinstance(value, dict):  # a vote's result: its answer too
        value = {k: readable(v) if isinstance(v, str) else v for k, v in value.items()}
    text = readable(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return shorten(text, limit)


def node_table_html(record: dict[str, Any]) -> str:
    rows = []
    for n in node_stats(record):
        error = f'<div class="mg-muted">{esc(shorten(n["error"], 300))}</div>' if n["error"] else ""
        rows.append(f"<tr><td>{esc(n['node_id'])}{error}</td><td>{esc(n['kind'])}</td><td>{badge(n['status'])}</td>"
                    f"<td class=num>{fmt_num(n['duration_s'])}</td><td class=num>{fmt_num(n['lm_calls'])}</td>"
                    f"<td class=num>{fmt_num(n['prompt_tokens_evaluated'])}</td>"
                    f"<td class=num>{fmt_num(n['completion_tokens'])}</td></tr>")
    return ("<table class=mg-nodes><thead><tr><th>node</th><th>kind</th><th>status</th><th class=num>seconds</th>"
            "<th class=num>LM calls</th><th class=num>prompt tok. evaluated</th><th class=num>completion tok."
            "</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def summary_body(record: dict[str, Any]) -> str:
    run = record["run"]
    s = run_summary(record)
    shown = CARDS if not s["thinking_tokens"] else (*CARDS, ("thinking_tokens", "of them thinking tokens"))
    if s["samples_stopped_by_confidence"]:
        shown = (*shown, ("samples_stopped_by_confidence", "samples stopped by confidence (DeepConf)"))
    if early_exits(record):
        shown = (*shown, ("thinking_tokens_saved_by_early_exit", "thinking tokens saved by early exit (est.)"),
                 ("early_exit_probe_tokens", "tokens spent on early-exit probes"))
    cards = "".join(f'<div class="mg-card"><b>{fmt_num(s[key])}</b><span>{esc(label)}</span></div>'
                    for key, label in shown)
    parts = [f"<h3>Run {esc(run.get('id'))} · {esc(run.get('workflow'))} {badge(run.get('status'))}</h3>",
             f'<div class="mg-cards" id="mg-summary-cards">{cards}</div>']
    if run.get("error"):
        parts.append(f'<div class="mg-box"><b>error</b><pre>{esc(run["error"])}</pre></div>')
    provenance = record.get("provenance") or {}
    replayed = [("replay of", provenance.get("imported_from") or "-")] if provenance.get("source") == "replay" else []
    facts = [*replayed, ("seed", run.get("seed")), ("workflow hash", run.get("workflow_hash")),
             ("models", ", ".join(run.get("model_ids") or []) or "-")]
    facts += [(f"input {k}", _value_text(v)) for k, v in (run.get("inputs") or {}).items()]
    facts += [(f"output {k}", _value_text(v)) for k, v in (run.get("outputs") or {}).items()]
    parts.append("<table>" + "".join(f"<tr><th>{esc(k)}</th><td><span class=mg-text>{esc(v)}</span></td></tr>"
                                     for k, v in facts) + "</table>")
    parts.append(node_table_html(record))
    return "".join(parts)


def summary_html(record: dict[str, Any]) -> str:
    return wrap_section(f'<div id="mg-summary">{summary_body(record)}</div>')


COMPARE_KEYS = ("status", "wall_s", "lm_calls", "requests", "prompt_tokens", "prompt_tokens_evaluated",
                "prompt_tokens_cached", "completion_tokens", "thinking_tokens", "tokens_saved_by_prefix_sharing",
                "tokens_saved_by_adaptive_stop", "samples_stopped_by_confidence", "thinking_tokens_saved_by_early_exit",
                "nodes_cached", "nodes_failed")


def _delta(a: Any, b: Any) -> str:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        d = b - a
        ratio = f" ({b / a:.2f}×)" if a else ""
        return (f"{d:+,.2f}" if isinstance(d, float) else f"{d:+,}") + ratio
    return "" if a == b else "differs"


def _param_changes(ra: dict[str, Any], rb: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    changes = []
    if ra["run"].get("seed") != rb["run"].get("seed"):
        changes.append(("seed", ra["run"].get("seed"), rb["run"].get("seed")))
    ia, ib = ra["run"].get("inputs") or {}, rb["run"].get("inputs") or {}
    for key in sorted(set(ia) | set(ib)):
        if ia.get(key) != ib.get(key):
            changes.append((f"input {key}", ia.get(key), ib.get(key)))
    na = {n["node_id"]: n.get("params") or {} for n in ra.get("nodes", [])}
    nb = {n["node_id"]: n.get("params") or {} for n in rb.get("nodes", [])}
    for node in sorted(set(na) | set(nb)):
        pa, pb = na.get(node, {}), nb.get(node, {})
        if node in na and node in nb and not (pa and pb):
            continue  # params not recorded on one side (a cached node in traces before they were): unknown
        for key in sorted(set(pa) | set(pb)):
            if pa.get(key) != pb.get(key):
                changes.append((f"{node}.{key}", pa.get(key), pb.get(key)))
    return changes


def compare_runs_html(record_a: dict[str, Any], record_b: dict[str, Any]) -> str:
    """Two runs side by side: totals with differences, changed params/inputs/seed, outputs, nodes, YAML diff."""
    sa, sb = run_summary(record_a), run_summary(record_b)
    ra, rb = record_a["run"], record_b["run"]
    head = (f"<tr><th></th><th>A: {esc(ra.get('id'))} · {esc(ra.get('workflow'))}</th>"
            f"<th>B: {esc(rb.get('id'))} · {esc(rb.get('workflow'))}</th><th>B − A</th></tr>")
    rows = "".join(f"<tr><th>{esc(k.replace('_', ' '))}</th><td class=num>{fmt_num(sa[k])}</td>"
                   f"<td class=num>{fmt_num(sb[k])}</td><td class=num>{esc(_delta(sa[k], sb[k]))}</td></tr>"
                   for k in COMPARE_KEYS)
    parts = [f'<h3>Compare runs</h3><table id="mg-compare-totals">{head}{rows}</table>']
    changes = _param_changes(record_a, record_b)
    same_workflow = ra.get("workflow_hash") == rb.get("workflow_hash")
    parts.append("<h3>What differs</h3>")
    if not changes and same_workflow:
        parts.append('<p class="mg-muted">Same workflow, inputs and seed.</p>')
    if changes:
        parts.append("<table id=mg-compare-params><tr><th>setting</th><th>A</th><th>B</th></tr>" + "".join(
            f"<tr><td>{esc(k)}</td><td class=mg-text>{esc(_value_text(a, 200))}</td>"
            f"<td class=mg-text>{esc(_value_text(b, 200))}</td></tr>" for k, a, b in changes) + "</table>")
    outputs = sorted(set(ra.get("outputs") or {}) | set(rb.get("outputs") or {}))
    if outputs:
        parts.append("<h3>Outputs</h3><table><tr><th>output</th><th>A</th><th>B</th></tr>" + "".join(
            f"<tr><td>{esc(k)}</td><td class=mg-text>{esc(_value_text((ra.get('outputs') or {}).get(k)))}</td>"
            f"<td class=mg-text>{esc(_value_text((rb.get('outputs') or {}).get(k)))}</td></tr>" for k in outputs)
            + "</table>")
    na = {n["node_id"]: n for n in node_stats(record_a)}
    nb = {n["node_id"]: n for n in node_stats(record_b)}
    order = list(na) + [k for k in nb if k not in na]
    parts.append("<h3>Nodes</h3><table><tr><th>node</th><th>status A / B</th><th class=num>seconds A / B</th>"
                 "<th class=num>LM calls A / B</th><th class=num>tokens A / B</th></tr>" + "".join(
                     f"<tr><td>{esc(k)}</td><td>{badge(na.get(k, {}).get('status'))} "
                     f"{badge(nb.get(k, {}).get('status'))}</td>"
                     f"<td class=num>{fmt_num(na.get(k, {}).get('duration_s'))} / "
                     f"{fmt_num(nb.get(k, {}).get('duration_s'))}</td>"
                     f"<td class=num>{fmt_num(na.get(k, {}).get('lm_calls'))} / "
                     f"{fmt_num(nb.get(k, {}).get('lm_calls'))}</td>"
                     f"<td class=num>{fmt_num(na.get(k, {}).get('tokens'))} / "
                     f"{fmt_num(nb.get(k, {}).get('tokens'))}</td></tr>" for k in order) + "</table>")
    if not same_workflow:
        diff = difflib.unified_diff((ra.get("workflow_yaml") or "").splitlines(),
                                    (rb.get("workflow_yaml") or "").splitlines(), "A", "B", lineterm="")
        lines = []
        for line in diff:
            cls = "mg-diffadd" if line.startswith("+") else "mg-diffdel" if line.startswith("-") else ""
            lines.append(f'<span class="{cls}">{esc(line)}</span>')
        parts.append("<h3>Workflow YAML diff</h3><pre id=mg-compare-yaml>" + "\n".join(lines) + "</pre>")
    return wrap_section(f'<div id="mg-compare-view">{"".join(parts)}</div>')
