"""Candidates' code runs in the samples view: each candidate's tests (passed / failed, the error, output tails) and
the behaviour vote's note on generated inputs it could not use and clusters of errors alone."""

from __future__ import annotations

from typing import Any

from app.viz.common import esc, events_of, shorten

PASS_MARK = "✓"
FAIL_MARK = "✗"
SHOWN_TESTS = 50
"""Tests listed per candidate (the rest are counted)."""


def test_runs(candidate: dict[str, Any], node_id: str) -> tuple[str, dict[str, Any]] | None:
    """(node id, detail) of a candidate's test run: the node's own (a `tests` verifier, a `behaviour` voter), else
    the latest one an upstream node left on it; None when its code never ran."""
    runs = (candidate.get("meta") or {}).get("tests") or {}
    if not isinstance(runs, dict) or not runs:
        return None
    if node_id in runs and isinstance(runs[node_id], dict):
        return node_id, runs[node_id]
    key = list(runs)[-1]
    return (key, runs[key]) if isinstance(runs[key], dict) else None


def has_test_runs(candidates: list[dict[str, Any]], node_id: str) -> bool:
    return any(test_runs(c, node_id) is not None for c in candidates)


def tests_summary(candidate: dict[str, Any], node_id: str) -> str:
    """`2/3 passed` for a figure's table cell ('—' when the candidate's code never ran)."""
    found = test_runs(candidate, node_id)
    if found is None:
        return "—"
    detail = found[1]
    tests = [t for t in detail.get("tests") or [] if isinstance(t, dict)]
    return f"{detail.get('passed', sum(1 for t in tests if t.get('passed')))}/{detail.get('total', len(tests))} passed"


def tests_cell(candidate: dict[str, Any], node_id: str) -> str:
    """A table cell's HTML: `2/3 passed` (with who ran them when another node did), opening onto every test with
    its source, the failing assert's error or the value it returned, and the stdout / stderr tails."""
    found = test_runs(candidate, node_id)
    if found is None:
        return '<span class="mg-muted">—</span>'
    owner, detail = found
    tests = [t for t in detail.get("tests") or [] if isinstance(t, dict)]
    passed, total = detail.get("passed"), detail.get("total")
    reason = ((candidate.get("meta") or {}).get("reasons") or {}).get(owner, "")
    head = esc(tests_summary(candidate, node_id)) + (f' <span class="mg-muted">({esc(owner)})</span>'
                                                   if owner != node_id else "")
    rows = []
    for t in tests[:SHOWN_TESTS]:
        ok = bool(t.get("passed"))
        what = t.get("output") if ok else (t.get("error") or t.get("output"))
        source = t.get("source") or f"stdin/stdout test {t.get('index')}"
        rows.append(f"<tr><td>{PASS_MARK if ok else FAIL_MARK}</td><td class=mg-text>{esc(source)}</td>"
                    f"<td class=mg-text>{esc(shorten(str(what) if what is not None else '', 300))}</td></tr>")
    more = (f'<p class="mg-muted">{len(tests) - SHOWN_TESTS} more tests</p>' if len(tests) > SHOWN_TESTS else "")
    parts = [f"<table class=mg-tests><thead><tr><th></th><th>test</th><th>error / value</th></tr></thead>"
             f"<tbody>{''.join(rows)}</tbody></table>{more}" if rows else ""]
    if reason and (not tests or passed != total):
        parts.append(f"<p>{esc(shorten(str(reason), 500))}</p>")
    for key, label in (("stdout_tail", "stdout"), ("stderr_tail", "stderr")):
        tail = str(detail.get(key) or "").strip()
        if tail:
            parts.append(f"<p class=mg-muted>{label} (tail)</p><pre>{esc(tail)}</pre>")
    return f"<details><summary>{head}</summary>{''.join(parts)}</details>"


def behaviour_note_body(record: dict[str, Any], node_id: str) -> str:
    """The behaviour vote's note (generated inputs left out, what it clustered on) and its clusters of errors
    alone, as paragraphs ('' for other nodes)."""
    votes = [e for e in events_of(record, "vote", node_id) if (e.get("data") or {}).get("method") == "behaviour"]
    if not votes:
        return ""
    data = votes[-1]["data"]
    detail = data.get("detail") or {}
    parts = []
    if detail.get("note"):
        parts.append(f'<p class="mg-box">{esc(detail["note"])}</p>')
    clusters = data.get("clusters") or []
    marked = [k for k in detail.get("error_clusters") or [] if isinstance(k, int) and 0 <= k < len(clusters)]
    if marked:
        names = ", ".join(f"#{k} ({clusters[k].get('count', len(clusters[k].get('members') or []))} programs)"
                          for k in marked)
        parts.append(f'<p class="mg-box">Clusters whose outputs are all errors: {esc(names)}'
                     + (" — the winning cluster is one of them" if 0 in marked else "") + ".</p>")
    return "".join(parts)
