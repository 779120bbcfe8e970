"""The "Adaptive policy" section of a tune's report, from the `adaptive` part of its result JSON: the probe, the bins
and the strategy chosen per bin on dev, the policy's held-out figures against the best single strategy at equal
tokens and against greedy, the files written, and what the comparison does (not) show. One renderer: the offline
HTML report (`tune.py`) and the Tune tab both show it."""

from __future__ import annotations

from typing import Any

from app.viz.common import esc

SIGNIFICANCE = 0.05
"""The paired test's level (app/eval/paired.py ALPHA; viz sits below eval, so it is restated here)."""
SECTION_TITLE = "Adaptive policy (difficulty-routed)"


def _pct(x: Any) -> str:
    return "–" if x is None else f"{100 * float(x):.0f}%"


def _ci(ci: Any) -> str:
    if not isinstance(ci, list | tuple) or len(ci) != 2 or None in ci:
        return "–"
    return f"{_pct(ci[0])}–{_pct(ci[1])}"


def _tokens(x: Any) -> str:
    return "–" if x is None else f"{float(x):,.0f}"


def _points(x: Any) -> str:
    return "–" if x is None else f"{100 * float(x):+.1f}"


def _p(p: Any) -> str:
    if p is None:
        return "–"
    p = float(p)
    return "&lt; 0.001" if p < 0.001 else f"{p:.2g}" if p < 0.1 else f"{p:.2f}"


def _range(low: Any, high: Any) -> str:
    if low is None and high is None:
        return "any score (one bin: no difficulty signal on dev)"
    if low is None:
        return f"score &lt; {float(high):g} (hardest)"
    if high is None:
        return f"score ≥ {float(low):g} (easiest)"
    return f"{float(low):g} ≤ score &lt; {float(high):g}"


def probe_html(probe: dict[str, Any]) -> str:
    """What the probe is and what it costs per item (dev)."""
    k = probe.get("k")
    return (f'<p data-testid="tune-adaptive-probe">The probe: {esc(k)} short samples of greedy\'s prompt per item; '
            f"its score is {esc(probe.get('score') or 'their agreement')} (1 = all agree: an easy item; low: a hard "
            f"one). It costs <b>{_tokens(probe.get('tokens_per_item'))} tokens per item</b> (measured on "
            f"{esc(probe.get('n'))} dev items), counted in every figure of the policy below.</p>")


def bins_html(adaptive: dict[str, Any]) -> str:
    """One row per bin of the probe's score (fixed on dev): its range, its dev items, the strategy chosen."""
    rows = "".join(
        f'<tr data-testid="tune-adaptive-bin"><td class="mg-num">{esc(b.get("bin"))}</td>'
        f'<td>{_range(*(b.get("range") or [None, None]))}</td><td class="mg-num">{esc(b.get("n"))}</td>'
        f'<td>{esc(b.get("label"))}</td><td class="mg-num">{_pct(b.get("accuracy"))}</td>'
        f'<td class="mg-num">{_tokens(b.get("tokens_per_item"))}</td></tr>' for b in adaptive.get("branches") or [])
    dev = adaptive.get("dev") or {}
    return ('<table class="mg-tune-table"><thead><tr><th>bin</th><th>probe score</th><th>dev items</th>'
            '<th>strategy chosen (dev)</th><th>dev accuracy</th><th>dev tokens/item (probe included)</th></tr>'
            f'</thead><tbody>{rows}</tbody></table><p>On dev the policy scored {_pct(dev.get("accuracy"))} at '
            f'{_tokens(dev.get("tokens_per_item"))} tokens per item ({esc(dev.get("n"))} items).</p>')


def _test_row(name: str, label: Any, test: dict[str, Any], testid: str) -> str:
    return (f'<tr data-testid="{testid}"><td>{esc(name)}</td><td>{esc(label)}</td>'
            f'<td class="mg-num">{_pct(test.get("accuracy"))} ({_ci(test.get("ci"))})</td>'
            f'<td class="mg-num">{_tokens(test.get("tokens_per_item"))}</td>'
            f'<td class="mg-num">{esc(test.get("n"))}</td></tr>')


def held_out_policy_html(adaptive: dict[str, Any], baseline: dict[str, Any]) -> str:
    """The held-out figures of the policy, the best single strategy at equal tokens and greedy, then each paired
    comparison of the policy (diff in points, its 95 % CI, p)."""
    against = adaptive.get("against") or {}
    rows = [_test_row("adaptive policy", "probe, then the route", adaptive.get("test") or {}, "tune-adaptive-test"),
            _test_row("best single strategy at equal tokens" + (" (greedy)" if against.get("label") == baseline.get(
                "label") else ""), against.get("label"), against.get("test") or {}, "tune-adaptive-single")]
    if baseline.get("test") and baseline.get("label") != against.get("label"):
        rows.append(_test_row("greedy", baseline.get("label"), baseline["test"], "tune-adaptive-greedy"))
    comps = "".join(
        f'<tr data-testid="tune-adaptive-comparison"><td>{esc(c.get("against"))} ({esc(c.get("b"))})</td>'
        f'<td class="mg-num">{_points(c.get("diff"))}</td><td class="mg-num">{_points(_at(c.get("ci"), 0))} to '
        f'{_points(_at(c.get("ci"), 1))}</td><td class="mg-num">{_p(c.get("p"))}</td>'
        f'<td>{esc(c.get("sentence"))}</td></tr>' for c in adaptive.get("comparisons") or [])
    return ('<p>The best single strategy at equal tokens is the finalist with the best dev accuracy whose dev tokens '
            "per item are at most the policy's (chosen on dev, never on test).</p>"
            '<table class="mg-tune-table"><thead><tr><th></th><th>workflow</th><th>test accuracy (95% CI)</th>'
            f'<th>tokens/item (the policy\'s: probe included)</th><th>items</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>'
            '<table class="mg-tune-table"><thead><tr><th>the policy against</th><th>diff (points)</th>'
            f'<th>95% CI</th><th>p</th><th></th></tr></thead><tbody>{comps}</tbody></table>')


def _at(pair: Any, i: int) -> Any:
    return pair[i] if isinstance(pair, list | tuple) and len(pair) == 2 else None


def honest_sentence(adaptive: dict[str, Any]) -> str:
    """What the held-out comparison with the best single strategy at equal tokens says, in words."""
    main = adaptive.get("comparison") or {}
    other = esc((adaptive.get("against") or {}).get("label"))
    diff, p = main.get("diff"), main.get("p")
    figures = f"{_points(diff)} points, p = {_p(p)}"
    if diff is not None and p is not None and float(p) < SIGNIFICANCE and float(diff) > 0:
        text = f"On held-out test the policy beats the best single strategy at equal tokens, {other}, significantly " \
               f"({figures})."
    elif diff is not None and p is not None and float(p) < SIGNIFICANCE:
        text = f"On held-out test the policy does worse than the best single strategy at equal tokens, {other} " \
               f"({figures}): use {other}."
    else:
        text = f"On held-out test the policy does not beat the best single strategy at equal tokens, {other}, " \
               f"significantly ({figures}): routing by difficulty is not shown to pay off here, and the single " \
               "strategy is the simpler choice."
    if len(adaptive.get("branches") or []) == 1:
        text += " The probe found no difficulty signal on dev (one bin), so the policy is one strategy behind a probe."
    return f'<p class="mg-tune-verdict" data-testid="tune-adaptive-verdict">{text}</p>'


def files_html(adaptive: dict[str, Any]) -> str:
    """The policy file and its branch files (the policy first)."""
    files = adaptive.get("files") or ([adaptive["path"]] if adaptive.get("path") else [])
    items = "".join(f"<li><code>{esc(f)}</code></li>" for f in files)
    return ('<p>Written (the policy first, then one branch workflow per bin):</p>'
            f'<ul data-testid="tune-adaptive-files">{items}</ul>')


def adaptive_html(result: dict[str, Any]) -> str:
    """The section for a tune's result JSON ("" when the tune was not asked for a policy)."""
    adaptive = result.get("adaptive")
    if not isinstance(adaptive, dict):
        return ""
    head = f'<div class="mg-tune-adaptive" data-testid="tune-adaptive"><h2>{SECTION_TITLE}</h2>'
    probe = probe_html(adaptive["probe"]) if isinstance(adaptive.get("probe"), dict) else ""
    if adaptive.get("status") != "built":
        return (f'{head}<p class="mg-tune-verdict" data-testid="tune-adaptive-verdict">No adaptive policy was '
                f'written: {esc(adaptive.get("reason") or "no reason given")}.</p>{probe}</div>')
    held_out = held_out_policy_html(adaptive, result.get("baseline") or {})
    return (f"{head}{honest_sentence(adaptive)}{probe}<h3>The bins (fixed on dev)</h3>{bins_html(adaptive)}"
            f"<h3>Held-out test</h3>{held_out}{files_html(adaptive)}</div>")
