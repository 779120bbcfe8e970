"""maj@k and best-of-k curves from each item's N graded samples: the first k samples (bootstrap 0), or the mean
over B random k-subsets drawn without replacement (so a curve is not one lucky ordering of the samples). The
subsets depend on the seed and the item only, so workflows sharing their samples are compared on the same subsets
(a paired bootstrap).

Per item, a sample has an answer (None: none extracted), a correctness and, when a verifier scored the samples,
a score. maj@k: the most frequent answer among the k (ties: the answer that appeared first in the subset's
order); best-of-k: the highest-scoring of the k (ties: the lower sample index). A subset is right when its
chosen sample is.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

KS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def majority_pick(answers: Sequence[str | None], subset: Sequence[int]) -> int | None:
    """The sample of `subset` carrying its most frequent answer (first appearance among equals), or None."""
    counts = Counter(answers[i] for i in subset if answers[i] is not None)
    if not counts:
        return None
    top = max(counts.values())
    return next(i for i in subset if answers[i] is not None and counts[answers[i]] == top)


def best_pick(scores: Sequence[float | None], subset: Sequence[int]) -> int | None:
    """The highest-scoring sample of `subset` (lower index among equals), or None when none is scored."""
    scored = [i for i in subset if scores[i] is not None]
    if not scored:
        return None
    return min(scored, key=lambda i: (-float(scores[i]), i))  # type: ignore[arg-type]


def _subsets(n: int, k: int, bootstrap: int, rng: random.Random) -> list[list[int]]:
    if bootstrap <= 0 or k >= n:
        return [list(range(k))]
    return [rng.sample(range(n), k) for _ in range(bootstrap)]


def item_curve(answers: Sequence[str | None], correct: Sequence[bool], scores: Sequence[float | None] | None,
               ks: Sequence[int], bootstrap: int, seed: int) -> dict[str, list[float]]:
    """This item's maj@k (and best@k when scored) for each k: the share of k-subsets whose pick is right."""
    rng = random.Random(seed)
    out: dict[str, list[float]] = {"maj": []}
    if scores is not None:
        out["best"] = []
    for k in ks:
        subsets = _subsets(len(answers), k, bootstrap, rng)
        picks = [majority_pick(answers, s) for s in subsets]
        out["maj"].append(sum(1 for p in picks if p is not None and correct[p]) / len(subsets))
        if scores is not None:
            best = [best_pick(scores, s) for s in subsets]
            out["best"].append(sum(1 for p in best if p is not None and correct[p]) / len(subsets))
    return out


def _item_seed(seed: int, *parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(repr((seed, *parts)).encode()).digest()[:8], "big")


def vote_curves(items: list[dict[str, Any]], workflows: list[dict[str, Any]], bootstrap: int = 0,
                seed: int = 0) -> list[dict[str, Any]]:
    """Mean maj@k and best@k over items per workflow point whose graded sampler's answers were recorded
    (items[i]["sample_votes"] = {"answers", "scores"} beside items[i]["samples"], the per-sample grades)."""
    grouped: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for item in items:
        votes = item.get("sample_votes") or {}
        answers, correct = votes.get("answers"), item.get("samples")
        if answers and correct and len(answers) == len(correct):
            grouped.setdefault((item["workflow_idx"], item["point_idx"]), []).append(item)
    curves = []
    for (w_idx, p_idx), rows in sorted(grouped.items()):
        n = min(len(r["samples"]) for r in rows)
        ks = [k for k in KS if k <= n] or [n]
        scored = all((r["sample_votes"].get("scores") or [None])[0] is not None for r in rows)
        sums: dict[str, list[float]] = {"maj": [0.0] * len(ks), **({"best": [0.0] * len(ks)} if scored else {})}
        for r in rows:
            votes = r["sample_votes"]
            curve = item_curve(votes["answers"][:n], [bool(c) for c in r["samples"][:n]],
                               (votes.get("scores") or [])[:n] if scored else None, ks, bootstrap,
                               _item_seed(seed, r["item_idx"]))  # the same subsets for every workflow: paired
            for key, values in curve.items():
                sums[key] = [a + b for a, b in zip(sums[key], values, strict=True)]
        wf = workflows[w_idx]
        params = (wf.get("points") or [{}])[p_idx]
        label = wf["name"] + (" · " + ", ".join(f"{k}={v}" for k, v in params.items()) if params else "")
        curves.append({"workflow": wf["name"], "params": params, "label": label, "n": n, "k": ks,
                       "items": len(rows), "bootstrap": bootstrap,
                       **{f"{key}_at_k": [v / len(rows) for v in values] for key, values in sums.items()}})
    return curves
