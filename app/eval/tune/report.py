"""The held-out report of a tune: the finalists' test table (accuracy with its 95 % interval, tokens and seconds
per item), the Pareto front of accuracy against tokens, and the paired comparisons of the recommended one."""

from __future__ import annotations

import math
from typing import Any

from app.eval.paired import compare
from app.eval.stats import pareto_front, wilson_interval
from app.eval.tune.race import Results, figures, scores
from app.viz.common import REUSED

MAJORITY_WORKFLOWS = ("self_consistency",)
BEST_OF_N_WORKFLOWS = ("best_of_n", "code_best_of_n")


def _finite(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def accuracy_interval(item_scores: list[float]) -> tuple[float, float]:
    """The 95 % interval of a mean score: Wilson's when every score is 0 or 1, else the normal interval of the
    mean (its standard error from the scores' own spread) clipped to [0, 1] — a Wilson interval of
    round(mean * n) treats partial credit as whole successes."""
    n = len(item_scores)
    if not n:
        return (0.0, 1.0)
    if all(s in (0.0, 1.0) for s in item_scores):
        return wilson_interval(int(sum(item_scores)), n)
    mean = math.fsum(item_scores) / n
    if n < 2:
        return (0.0, 1.0)
    sd = math.sqrt(math.fsum((s - mean) ** 2 for s in item_scores) / (n - 1))
    half = 1.96 * sd / math.sqrt(n)
    return (max(0.0, mean - half), min(1.0, mean + half))


def test_figures(rows: dict[int, Any], test: list[int]) -> dict[str, Any]:
    """{accuracy, ci, tokens_per_item, seconds_per_item, n} on the test items."""
    f = figures(rows, test)
    lo, hi = accuracy_interval([rows[i].score for i in test if i in rows])
    return {"accuracy": _finite(f.accuracy), "ci": [lo, hi], "tokens_per_item": _finite(f.tokens_per_item),
            "seconds_per_item": _finite(f.seconds_per_item), "n": f.n}


def held_out_table(finalists: list[str], results: Results, test: list[int]) -> list[dict[str, Any]]:
    """One row per finalist: its test figures, and `reused_tokens_per_item` with a `note` when some of its samples
    came from the shared pool: its tokens then count them as if it ran alone, while its seconds are only its own
    (another finalist's run drew them), so the two columns are not the same kind of cost."""
    rows = []
    for label in finalists:
        got = [results.get(label, {})[i] for i in test if i in results.get(label, {})]
        reused = math.fsum(r.reused for r in got) / len(got) if got else 0.0
        rows.append({"label": label, **test_figures(results.get(label, {}), test), "reused_tokens_per_item": reused,
                     "note": REUSED if reused > 0 else ""})
    return rows


def front(table: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The test Pareto front: no other finalist is as accurate for fewer tokens."""
    points = [(row["tokens_per_item"] if row["tokens_per_item"] is not None else math.nan,
               row["accuracy"] if row["accuracy"] is not None else math.nan) for row in table]
    return [{"label": table[i]["label"], "accuracy": table[i]["accuracy"],
             "tokens_per_item": table[i]["tokens_per_item"]} for i in pareto_front(points)]


def comparison(a: str, b: str, results: Results, test: list[int]) -> dict[str, Any]:
    """{a, b, diff, ci, p, n, sentence}: the paired comparison of a against b on test."""
    c = compare(a, b, scores(results.get(a, {}), test), scores(results.get(b, {}), test))
    return {"a": a, "b": b, "diff": _finite(c.diff), "ci": [_finite(x) for x in c.ci], "p": c.p_value, "n": c.n,
            "sentence": c.sentence()}


def _closest(finalists: list[str], labels: dict[str, str], family: tuple[str, ...], results: Results,
             dev: list[int], recommended: str) -> str | None:
    """The finalist of a family (plain majority, best-of-N) at the dev tokens nearest the recommended one's, ties
    to the more accurate on dev: the opponent is picked on dev, as the recommendation was, so the held-out
    comparison is not one chosen with the test items' own figures."""
    rec = figures(results.get(recommended, {}), dev)
    if not rec.n or math.isnan(rec.tokens_per_item):
        return None
    figs = {label: figures(results.get(label, {}), dev) for label in finalists
            if labels.get(label) in family and label != recommended}
    rows = [(label, f) for label, f in figs.items() if f.n and not math.isnan(f.tokens_per_item)]
    if not rows:
        return None
    return min(rows, key=lambda lf: (abs(lf[1].tokens_per_item - rec.tokens_per_item), -lf[1].accuracy))[0]


def comparisons(recommended: str, baseline: str, table: list[dict[str, Any]], workflow_of: dict[str, str],
                results: Results, test: list[int], dev: list[int]) -> list[dict[str, Any]]:
    """The recommended one against greedy, and against the plain majority / best-of-N finalist at equal tokens
    (picked on dev), compared on test."""
    out = []
    if recommended != baseline:
        out.append({"against": "greedy", **comparison(recommended, baseline, results, test)})
    finalists = [r["label"] for r in table]
    for name, family in (("plain majority", MAJORITY_WORKFLOWS), ("best-of-N", BEST_OF_N_WORKFLOWS)):
        other = _closest(finalists, workflow_of, family, results, dev, recommended)
        if other is not None:
            out.append({"against": f"{name} at equal tokens", **comparison(recommended, other, results, test)})
    return out


def verdict(recommended: str, baseline: str, why: str, main: dict[str, Any]) -> str:
    """One sentence for the user: what is recommended, from dev, and what the held-out test says."""
    if recommended == baseline:
        return f"Recommended: greedy {baseline}. {why[:1].upper()}{why[1:]}."
    held = f"on held-out test, {main['sentence']}" if main.get("n") else "no test items"
    return f"Recommended: {recommended} ({why}); {held}."
