"""The Tune tab's live race (one row per candidate: its accuracy's CI as a bar that narrows as items come in,
dropped ones greyed with the reason; the plan's warnings above it) and its held-out table (pooled rows marked `*`),
as HTML from the tuner's progress and result JSON."""

from __future__ import annotations

from typing import Any

from app.viz.common import REUSED_FOOTNOTE, esc

STATUS_TEXT = {"running": "in the race", "finalist": "finalist", "dropped": "dropped", "skipped": "skipped"}
PHASE_TEXT = {"dev": "Racing on the dev items", "test": "Running the finalists once on the held-out test items"}


def _pct(x: Any) -> str:
    return "–" if x is None else f"{float(x):.0%}"


def _ci_bar(accuracy: Any, ci: Any) -> str:
    """A 0–100 % track with the CI as a band and the accuracy as a tick (empty before the first item)."""
    if accuracy is None:
        return '<span class="mg-tune-ci mg-tune-ci-empty"></span>'
    lo, hi = (float(ci[0]), float(ci[1])) if isinstance(ci, list | tuple) and len(ci) == 2 else (accuracy, accuracy)
    return (f'<span class="mg-tune-ci" title="95% CI {lo:.0%}–{hi:.0%}" data-ci-width="{hi - lo:.4f}">'
            f'<span class="mg-tune-band" style="left:{lo * 100:.1f}%;width:{max(0.5, (hi - lo) * 100):.1f}%"></span>'
            f'<span class="mg-tune-tick" style="left:{float(accuracy) * 100:.1f}%"></span></span>')


def _row(row: dict[str, Any]) -> str:
    status = str(row.get("status") or "running")
    ci = row.get("ci")
    ci_text = f" ({_pct(ci[0])}–{_pct(ci[1])})" if isinstance(ci, list | tuple) and len(ci) == 2 else ""
    tokens = row.get("tokens_per_item")
    reason = row.get("reason") or ""
    return (f'<tr class="mg-tune-row mg-tune-{esc(status)}" data-testid="tune-row" data-status="{esc(status)}" '
            f'data-label="{esc(row.get("label"))}"><td class="mg-tune-label">{esc(row.get("label"))}</td>'
            f'<td>{esc(STATUS_TEXT.get(status, status))}</td><td class="mg-num">{int(row.get("n_items") or 0)}</td>'
            f'<td class="mg-num">{_pct(row.get("accuracy"))}{esc(ci_text)}</td>'
            f'<td>{_ci_bar(row.get("accuracy"), ci)}</td>'
            f'<td class="mg-num">{"–" if tokens is None else f"{float(tokens):,.0f}"}</td>'
            f'<td class="mg-tune-reason">{esc(reason)}</td></tr>')


def _eta(seconds: Any) -> str:
    if seconds is None:
        return "estimating the time left"
    minutes, secs = divmod(int(seconds), 60)
    return f"about {minutes} min {secs} s left" if minutes else f"about {secs} s left"


def final_rows(rows: list[dict[str, Any]], candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The race's last rows with each candidate's final status and reason from the result (finalist, dropped after
    N items, skipped), and a row for each skipped candidate that never raced."""
    by_label = {c.get("label"): c for c in candidates}
    out = []
    for row in rows:
        cand = by_label.get(row.get("label"))
        out.append(row if cand is None else {**row, "status": cand.get("status") or row.get("status"),
                                             "reason": cand.get("reason") or row.get("reason") or ""})
    shown = {r.get("label") for r in rows}
    out += [{"label": c.get("label"), "status": c.get("status"), "n_items": 0, "accuracy": None, "ci": None,
             "tokens_per_item": None, "reason": c.get("reason") or ""}
            for c in candidates if c.get("label") not in shown]
    return out


def race_html(progress: dict[str, Any] | None, state: str = "running", result: dict[str, Any] | None = None) -> str:
    """The race so far (`TuneProgress` as a dict): where it is, then one row per candidate, the leaders first; with
    the finished tune's `result` (its JSON), each row's final status and reason."""
    if not progress:
        return '<div class="mg-tune-race" data-testid="tune-race">Choosing the candidates…</div>'
    rows = progress.get("rows") or []
    if result is not None:
        rows = final_rows(rows, result.get("candidates") or [])
    rows = sorted(rows, key=lambda r: (
        {"finalist": 0, "running": 0, "dropped": 1, "skipped": 2}.get(str(r.get("status")), 1),
        -(r.get("accuracy") or 0.0)))
    done, total = int(progress.get("done") or 0), int(progress.get("total") or 0)
    where = PHASE_TEXT.get(str(progress.get("phase")), str(progress.get("phase")))
    if result is not None:
        where = f"The race on the dev items, as it ended ({state})"
    head = (f"{esc(where)}" + (f", round {int(progress['round'])}" if progress.get("round") else "") +
            (f" · {done}/{total} runs" if total else "") + f" · {int(progress.get('tokens_used') or 0):,} tokens used" +
            (f" · {_eta(progress.get('eta_s'))}" if state == "running" else ""))
    alive = sum(1 for r in rows if r.get("status") in ("running", "finalist"))
    left = "finalists" if result is not None else "candidates left"
    return (f'<div class="mg-tune-race" data-testid="tune-race"><div class="mg-tune-head" data-testid="tune-head">'
            f'{head} · {alive} of {len(rows)} {left}</div>{_warnings(progress, result)}'
            '<table class="mg-tune-table"><thead><tr><th>candidate</th><th>status</th><th>items</th>'
            '<th>accuracy (95% CI)</th><th>CI</th><th>tokens/item</th><th>why dropped / skipped</th></tr></thead>'
            f'<tbody>{"".join(_row(r) for r in rows)}</tbody></table></div>')


def held_out_html(result: dict[str, Any]) -> str:
    """The verdict, the finalists' held-out (test) table with the recommended one and greedy marked, and the
    paired comparisons, from `TuneResult.to_json()`."""
    recommended = (result.get("recommended") or {}).get("label")
    baseline = (result.get("baseline") or {}).get("label")
    body = []
    for row in result.get("held_out") or []:
        mark = " ★ recommended" if row.get("label") == recommended else (" (greedy)" if row.get("label") == baseline
                                                                         else "")
        ci = row.get("ci") or [None, None]
        note = f'<span class="mg-tune-note" title="{esc(row["note"])}">*</span>' if row.get("note") else ""
        body.append(f'<tr data-testid="tune-held-out-row"><td>{esc(row.get("label"))}{esc(mark)}</td>'
                    f'<td class="mg-num">{_pct(row.get("accuracy"))} ({_pct(ci[0])}–{_pct(ci[1])})</td>'
                    f'<td class="mg-num">{float(row.get("tokens_per_item") or 0):,.0f}{note}</td>'
                    f'<td class="mg-num">{float(row.get("seconds_per_item") or 0):.2f}</td>'
                    f'<td class="mg-num">{int(row.get("n") or 0)}</td></tr>')
    comparisons = "".join(f"<li>{esc(c.get('sentence') or c)}</li>" for c in result.get("comparisons") or [])
    split = result.get("split") or {}
    return (f'<div class="mg-tune-result" data-testid="tune-result"><p class="mg-tune-verdict" '
            f'data-testid="tune-verdict">{esc(result.get("verdict") or "")}</p>'
            f'<p>Held out: {len(split.get("test") or [])} test items, never seen while choosing (the race used '
            f'{len(split.get("dev") or [])} dev items); the tune spent {int(result.get("tune_tokens") or 0):,} '
            'tokens.</p><table class="mg-tune-table"><thead><tr><th>finalist</th><th>test accuracy (95% CI)</th>'
            f'<th>tokens/item</th><th>s/item</th><th>items</th></tr></thead><tbody>{"".join(body)}</tbody></table>'
            + _footnote(result.get("held_out") or []) + (f"<ul>{comparisons}</ul>" if comparisons else "") + "</div>")


def _footnote(rows: list[dict[str, Any]]) -> str:
    """Under the held-out table, what a `*` row (samples from the shared pool, `note`) means; nothing without one."""
    notes = sorted({str(r["note"]) for r in rows if r.get("note")})
    if not notes:
        return ""
    return (f'<p class="mg-tune-footnote" data-testid="tune-footnote">* {esc("; ".join(notes))}: '
            f'{esc(REUSED_FOOTNOTE)}</p>')


def _warnings(progress: dict[str, Any], result: dict[str, Any] | None) -> str:
    """The plan's warnings about the candidates, known before the first run (sent with every progress)."""
    found = list(progress.get("warnings") or []) + [w for w in (result or {}).get("warnings") or []
                                                   if w not in (progress.get("warnings") or [])]
    if not found:
        return ""
    items = "".join(f"<li>{esc(w)}</li>" for w in found)
    return f'<div class="mg-tune-warnings" data-testid="tune-warnings"><b>Warnings</b><ul>{items}</ul></div>'


TUNE_CSS = """
.mg-tune-table { border-collapse: collapse; width: 100%; font-size: 13px; }
.mg-tune-table th, .mg-tune-table td { border-bottom: 1px solid #e5e7eb; padding: 3px 6px; text-align: left; }
.mg-tune-table .mg-num { text-align: right; font-variant-numeric: tabular-nums; }
.mg-tune-head { font-size: 13px; margin: 4px 0; color: #374151; }
.mg-tune-dropped, .mg-tune-skipped { color: #9ca3af; }
.mg-tune-dropped .mg-tune-label { text-decoration: line-through; }
.mg-tune-finalist { font-weight: 600; }
.mg-tune-ci { position: relative; display: inline-block; width: 160px; height: 10px; background: #f3f4f6;
  border-radius: 5px; vertical-align: middle; }
.mg-tune-band { position: absolute; top: 0; height: 10px; background: #93c5fd; border-radius: 5px; }
.mg-tune-dropped .mg-tune-band, .mg-tune-skipped .mg-tune-band { background: #e5e7eb; }
.mg-tune-tick { position: absolute; top: -2px; width: 2px; height: 14px; background: #1d4ed8; }
.mg-tune-verdict { font-weight: 600; }
.mg-tune-warnings { font-size: 13px; margin: 4px 0; padding: 4px 8px; background: #fffbeb; border-left: 3px solid
  #f59e0b; color: #78350f; }
.mg-tune-warnings ul { margin: 2px 0 0 1.2em; padding: 0; }
.mg-tune-note { margin-left: 2px; color: #6b7280; cursor: help; }
.mg-tune-footnote { font-size: 12px; color: #6b7280; margin: 4px 0; }
"""
"""The tab's styles (in the page's CSS: Gradio's HTML components keep no <style>)."""
