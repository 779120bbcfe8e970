"""Results of an evaluation from its stored rows: accuracy with a 95% interval and cost per point, pass@k from
per-sample grades, the Pareto frontier of accuracy against tokens, and the items where methods disagree."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from app.eval.baseline import point_label, resolve_baseline, workflow_names, yaml_name_of
from app.eval.paired import compare_points, item_means, point_interval
from app.eval.plan import split_key
from app.eval.stats import pareto_front, pass_at_k, wilson_interval
from app.eval.vote_curves import vote_curves
from app.run.status import SUCCEEDED, UNGRADED


def decoded_items(record: dict[str, Any]) -> list[dict[str, Any]]:
    """EvalStore.get's items with `item_idx` the dataset row and `repeat` the run of it (keys of repeats decoded)."""
    rows = int((record["evaluation"]["config"].get("dataset") or {}).get("rows") or 0)
    out = []
    for item in record["items"]:
        row, repeat = split_key(int(item["item_idx"]), rows)
        out.append({**item, "item_idx": row, "repeat": repeat})
    return out


def summarize(record: dict[str, Any], baseline: str | None = None) -> dict[str, Any]:
    """{eval_id, status, points: [...], comparisons: [...], pass_at_k: [...], disagreements: [...], ...} from
    EvalStore.get(); `baseline` (a point's label, or its workflow's name or file name: `baseline.resolve_baseline`;
    default the recorded one) compares each point with that one instead of every pair."""
    evaluation, all_items = record["evaluation"], decoded_items(record)
    items = [i for i in all_items if i["status"] != UNGRADED]  # no verdict: counted apart, never as wrong
    config = evaluation["config"]
    workflows = config.get("workflows", [])
    points = _points(workflows, items, [i for i in all_items if i["status"] == UNGRADED], config)
    _mark_pareto(points)
    seed = int(config.get("seed") or 0)
    return {
        "eval_id": evaluation["id"], "name": evaluation.get("name", ""), "status": evaluation["status"],
        "error": evaluation.get("error"), "dataset": config.get("dataset", {}), "metric": config.get("metric"),
        "output": config.get("output"), "sweep": config.get("sweep", []), "points": points,
        "comparisons": comparisons(items, points, baseline or config.get("baseline"), seed),
        "baseline": baseline or config.get("baseline"), "repeats": int(config.get("repeats") or 1), "seed": seed,
        "pass_at_k": pass_at_k_curves(items, workflows),
        "disagreements": disagreements([i for i in items if i["repeat"] == 0], points),
        "vote_curves": vote_curves(items, workflows, int(config.get("bootstrap") or 0), seed),
        "share_samples": bool(config.get("share_samples")),
        "estimate": evaluation.get("estimate") or {}, "elapsed_s": _elapsed(evaluation),
        "done": len(all_items), "total": int(config.get("total_tasks", 0)),
        "servers": config.get("servers") or {},
        "warnings": list(config.get("warnings") or []),
        "version_notes": version_notes(points, workflows),
    }


def _by_point(items: list[dict[str, Any]]) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """Items grouped by their (workflow_idx, point_idx)."""
    grouped: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        grouped[(item["workflow_idx"], item["point_idx"])].append(item)
    return grouped


def _points(workflows: list[dict[str, Any]], items: list[dict[str, Any]], ungraded: list[dict[str, Any]],
            config: dict[str, Any]) -> list[dict[str, Any]]:
    """One summary per (workflow, sweep point), in the plan's order, from its graded and ungraded items."""
    by_point, ungraded_by_point = _by_point(items), _by_point(ungraded)
    repeats = int(config.get("repeats") or 1)
    planned = len(config.get("items", [])) * repeats
    points = []
    for w_idx, wf in enumerate(workflows):
        names = workflow_names(wf["name"], wf.get("source"), yaml_name_of(wf.get("yaml")))
        for p_idx, params in enumerate(wf.get("points") or [{}]):
            rows = by_point.get((w_idx, p_idx), [])
            skipped = ungraded_by_point.get((w_idx, p_idx), [])
            points.append({
                "workflow": wf["name"], "workflow_idx": w_idx, "point_idx": p_idx, "params": params,
                "label": point_label(wf["name"], params), "names": names,
                "version": wf.get("version") or wf.get("hash"),
                **_accuracy(rows, repeats, planned), **_usage(rows),
                "ungraded": len(skipped),
                "ungraded_reason": skipped[0]["detail"] if skipped else "",
            })
    return points


def version_notes(points: list[dict[str, Any]], workflows: list[dict[str, Any]]) -> list[str]:
    """A sentence for each group of rows that share a workflow name (and sweep point) but ran different versions
    of it: two files named alike, or a file edited between evaluations, are two workflows."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for point in points:  # by the YAML's own name: the plan tells two files named alike apart as `NAME (2)`
        wf = workflows[point["workflow_idx"]] if point["workflow_idx"] < len(workflows) else {}
        name = yaml_name_of(wf.get("yaml")) or point["workflow"]
        groups[(name, json.dumps(point["params"], sort_keys=True, default=str))].append(point)
    notes = []
    for (name, _), rows in groups.items():
        versions = {r.get("version") for r in rows}
        if len(versions) < 2:
            continue
        shown = ", ".join(f"{r.get('version')} ({workflows[r['workflow_idx']].get('source') or r['label']})"
                          for r in rows)
        notes.append(f"rows named {name!r} ran different versions of the workflow: {shown}; "
                     "`metagen diff A B` shows what differs")
    return notes


def _accuracy(rows: list[dict[str, Any]], repeats: int, planned: int) -> dict[str, Any]:
    """A point's accuracy over its graded rows, with its 95% interval and standard error."""
    correct = sum(1 for r in rows if r["correct"])
    total = len(rows)
    accuracy, se, (lo, hi) = point_interval(list(item_means(_runs_by_item(rows)).values()))
    if repeats == 1:  # one 0/1 run per item: the Wilson interval (better than the t interval near 0 and 1)
        lo, hi = wilson_interval(correct, total)
    return {"accuracy": accuracy if total else None, "correct": correct, "total": total,
            "planned": planned, "ci": [lo, hi], "se": None if se != se else se, "repeats": repeats,
            "items": len({r["item_idx"] for r in rows}),
            "mean_score": sum(r["score"] for r in rows) / total if total else None}


def _usage(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What a point's rows cost: tokens, model calls, time, and how many failed."""
    return {
        "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
        "prompt_tokens_evaluated": sum(r["prompt_tokens_evaluated"] for r in rows),
        "prompt_tokens_cached": sum(r["prompt_tokens_cached"] for r in rows),
        "completion_tokens": sum(r["completion_tokens"] for r in rows),
        "completion_tokens_reused": sum(r["completion_tokens_reused"] for r in rows),
        "cost_tokens": sum(r["completion_tokens"] + r["completion_tokens_reused"] for r in rows),
        # of the completion tokens, those spent thinking, and the answers' own
        "thinking_tokens": sum(r.get("thinking_tokens", 0) for r in rows),
        "answer_tokens": sum(r["completion_tokens"] - r.get("thinking_tokens", 0) for r in rows),
        "lm_calls": sum(r["lm_calls"] for r in rows),
        # seconds while at least one of its items ran (never more than the evaluation's), and its items'
        # run times summed (more than the wall time when items run concurrently)
        "wall_s": wall_seconds(rows), "busy_s": sum(r["wall_s"] for r in rows),
        "failed": sum(1 for r in rows if r["status"] not in (SUCCEEDED, "")),
    }


def _mark_pareto(points: list[dict[str, Any]]) -> None:
    """Set `pareto` on the points of the accuracy-against-cost frontier."""
    costed = [(i, p) for i, p in enumerate(points) if p["accuracy"] is not None]
    # a point's cost is what it would take alone: its own draws plus those it reused from a larger point
    front = pareto_front([(p["cost_tokens"] / max(p["total"], 1), p["accuracy"]) for _, p in costed])
    for k in front:
        points[costed[k][0]]["pareto"] = True


POINT_JSON_KEYS = ("workflow", "params", "accuracy", "correct", "total", "ci", "prompt_tokens",
                   "prompt_tokens_evaluated", "prompt_tokens_cached", "completion_tokens", "cost_tokens", "wall_s",
                   "busy_s", "pareto", "se", "repeats", "thinking_tokens", "answer_tokens", "ungraded", "version")
"""The fields of a point in `metagen eval --json` (and the Python API's `Evaluation.points`); `version` the hash of the
workflow it ran (`metagen history` lists it)."""


def json_points(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The summary's points as `metagen eval --json` prints them (`pareto` False when not on the frontier;
    `accuracy`, `correct` and `total` over the graded items, `ungraded` the items the grader could not grade)."""
    return [{k: p.get(k, 0 if k == "ungraded" else False) for k in POINT_JSON_KEYS} for p in summary["points"]]


COMPARISON_JSON_KEYS = ("a", "b", "n", "diff", "ci", "p_value", "method")
"""The fields of a comparison in `metagen eval --json` (the summary's comparisons add significant, sentence)."""


def json_comparisons(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: c[k] for k in COMPARISON_JSON_KEYS} for c in summary.get("comparisons", [])]


def wall_seconds(rows: list[dict[str, Any]]) -> float | None:
    """The wall time during which at least one of these items was running: the length of the union of the
    intervals [finished_at - wall_s, finished_at] (a pause between a cancel and a resume is not counted). None when
    no item records when it finished (evaluations recorded before items did)."""
    spans = sorted((float(r["finished_at"]) - float(r["wall_s"] or 0.0), float(r["finished_at"]))
                   for r in rows if r.get("finished_at"))
    if not spans:
        return None
    total, (start, end) = 0.0, spans[0]
    for lo, hi in spans[1:]:
        if lo > end:
            total, start, end = total + end - start, lo, hi
        else:
            end = max(end, hi)
    return total + end - start


def _runs_by_item(rows: list[dict[str, Any]]) -> dict[int, list[float]]:
    runs: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        runs[r["item_idx"]].append(1.0 if r["correct"] else 0.0)
    return runs


def comparisons(items: list[dict[str, Any]], points: list[dict[str, Any]], baseline: str | None = None,
                seed: int = 0) -> list[dict[str, Any]]:
    """Paired comparisons of every pair of points (or each against the baseline) on their shared items."""
    by_point: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        by_point[(item["workflow_idx"], item["point_idx"])].append(item)
    runs = {p["label"]: _runs_by_item(by_point.get((p["workflow_idx"], p["point_idx"]), [])) for p in points}
    return [c.as_dict() for c in compare_points(runs, resolve_baseline(baseline, points), seed=seed)]


def item_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    """One dict per graded item and point (EvalStore.get's items), with its workflow, sweep params and label."""
    workflows = record["evaluation"]["config"].get("workflows", [])
    rows = []
    for item in decoded_items(record):
        wf = workflows[item["workflow_idx"]] if item["workflow_idx"] < len(workflows) else {}
        points = wf.get("points") or [{}]
        params = points[item["point_idx"]] if item["point_idx"] < len(points) else {}
        name = wf.get("name", "")
        rows.append({"workflow": name, "params": params, "label": point_label(name, params), **item})
    return rows


def _elapsed(evaluation: dict[str, Any]) -> float | None:
    """Seconds the evaluation has run: from its start to its end (or its last finished item while running).
    A resumed evaluation counts the pause too; its items' own run times are in the points."""
    start = evaluation.get("created_at")
    end = evaluation.get("ended_at") or evaluation.get("heartbeat_at")
    return round(end - start, 2) if start and end else None


def pass_at_k_curves(items: list[dict[str, Any]], workflows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean unbiased pass@k over items, per workflow point whose sampler was graded per sample."""
    grouped: dict[tuple[int, int], list[list[bool]]] = defaultdict(list)
    for item in items:
        if item.get("samples"):
            grouped[(item["workflow_idx"], item["point_idx"])].append(item["samples"])
    curves = []
    for (w_idx, p_idx), sample_lists in sorted(grouped.items()):
        n = min(len(s) for s in sample_lists)
        ks = [k for k in (1, 2, 4, 8, 16, 32, 64, 128, 256) if k <= n] or [n]
        values = [sum(pass_at_k(len(s), sum(s), k) for s in sample_lists) / len(sample_lists) for k in ks]
        wf = workflows[w_idx]
        curves.append({"workflow": wf["name"], "params": (wf.get("points") or [{}])[p_idx],
                       "label": point_label(wf["name"], (wf.get("points") or [{}])[p_idx]),
                       "n": n, "k": ks, "pass_at_k": values, "items": len(sample_lists)})
    # the largest draw per workflow is the curve worth drawing (smaller sweep points are its prefixes)
    best: dict[str, dict[str, Any]] = {}
    for curve in curves:
        if curve["workflow"] not in best or curve["n"] > best[curve["workflow"]]["n"]:
            best[curve["workflow"]] = curve
    return list(best.values())


def disagreements(items: list[dict[str, Any]], points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items whose grade differs between points (methods disagree), most split first; then the rest."""
    labels = {(p["workflow_idx"], p["point_idx"]): p["label"] for p in points}
    per_item: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for item in items:
        per_item[item["item_idx"]][labels.get((item["workflow_idx"], item["point_idx"]), "?")] = {
            "correct": item["correct"], "score": item["score"], "run_id": item["run_id"], "output": item["output"]}
    rows = []
    for idx, grades in per_item.items():
        right = sum(1 for g in grades.values() if g["correct"])
        split = min(right, len(grades) - right)
        rows.append({"item": idx, "grades": grades, "split": split})
    rows.sort(key=lambda r: (-r["split"], r["item"]))
    return rows
