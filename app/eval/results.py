"""Results of an evaluation from its stored rows: accuracy with a 95% interval and cost per point, pass@k from
per-sample grades, the Pareto frontier of accuracy against tokens, and the items where methods disagree."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from app.eval.stats import pareto_front, pass_at_k, wilson_interval
from app.eval.vote_curves import vote_curves
from app.run.status import SUCCEEDED


def point_label(workflow: str, params: dict[str, Any]) -> str:
    if not params:
        return workflow
    return f"{workflow} · " + ", ".join(f"{k}={v}" for k, v in params.items())


def summarize(record: dict[str, Any]) -> dict[str, Any]:
    """{eval_id, status, points: [...], pass_at_k: [...], pareto: [labels], disagreements: [...]} from
    EvalStore.get()."""
    evaluation, items = record["evaluation"], record["items"]
    config = evaluation["config"]
    workflows = config.get("workflows", [])
    by_point: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        by_point[(item["workflow_idx"], item["point_idx"])].append(item)
    n_items = len(config.get("items", []))
    points = []
    for w_idx, wf in enumerate(workflows):
        for p_idx, params in enumerate(wf.get("points") or [{}]):
            rows = by_point.get((w_idx, p_idx), [])
            correct = sum(1 for r in rows if r["correct"])
            total = len(rows)
            lo, hi = wilson_interval(correct, total)
            points.append({
                "workflow": wf["name"], "workflow_idx": w_idx, "point_idx": p_idx, "params": params,
                "label": point_label(wf["name"], params),
                "accuracy": correct / total if total else None, "correct": correct, "total": total,
                "planned": n_items, "ci": [lo, hi],
                "mean_score": sum(r["score"] for r in rows) / total if total else None,
                "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
                "prompt_tokens_evaluated": sum(r["prompt_tokens_evaluated"] for r in rows),
                "prompt_tokens_cached": sum(r["prompt_tokens_cached"] for r in rows),
                "completion_tokens": sum(r["completion_tokens"] for r in rows),
                "completion_tokens_reused": sum(r["completion_tokens_reused"] for r in rows),
                "cost_tokens": sum(r["completion_tokens"] + r["completion_tokens_reused"] for r in rows),
                "lm_calls": sum(r["lm_calls"] for r in rows),
                "wall_s": sum(r["wall_s"] for r in rows),
                "failed": sum(1 for r in rows if r["status"] not in (SUCCEEDED, "")),
            })
    costed = [(i, p) for i, p in enumerate(points) if p["accuracy"] is not None]
    # a point's cost is what it would take alone: its own draws plus those it reused from a larger point
    front = pareto_front([(p["cost_tokens"] / max(p["total"], 1), p["accuracy"]) for _, p in costed])
    for k in front:
        points[costed[k][0]]["pareto"] = True
    return {
        "eval_id": evaluation["id"], "name": evaluation.get("name", ""), "status": evaluation["status"],
        "error": evaluation.get("error"), "dataset": config.get("dataset", {}), "metric": config.get("metric"),
        "output": config.get("output"), "sweep": config.get("sweep", []), "points": points,
        "pass_at_k": pass_at_k_curves(items, workflows), "disagreements": disagreements(items, points),
        "vote_curves": vote_curves(items, workflows, int(config.get("bootstrap") or 0), int(config.get("seed") or 0)),
        "share_samples": bool(config.get("share_samples")),
        "estimate": evaluation.get("estimate") or {}, "elapsed_s": _elapsed(evaluation),
        "done": len(items), "total": int(config.get("total_tasks", 0)),
        "servers": config.get("servers") or {},
    }


POINT_JSON_KEYS = ("workflow", "params", "accuracy", "correct", "total", "ci", "prompt_tokens",
                   "prompt_tokens_evaluated", "prompt_tokens_cached", "completion_tokens", "cost_tokens", "wall_s",
                   "pareto")
"""The fields of a point in `metagen eval --json` (and the Python API's `Evaluation.points`)."""


def json_points(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The summary's points as `metagen eval --json` prints them (`pareto` False when not on the frontier)."""
    return [{k: p.get(k, False) for k in POINT_JSON_KEYS} for p in summary["points"]]


def item_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    """One dict per graded item and point (EvalStore.get's items), with its workflow, sweep params and label."""
    workflows = record["evaluation"]["config"].get("workflows", [])
    rows = []
    for item in record["items"]:
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
