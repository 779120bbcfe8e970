"""Refinement history: draft → feedback → revision per iteration, with a word-level diff of each revision; RSA's
lineage (app/viz/rsa.py)."""

from __future__ import annotations

import difflib
import re
from typing import Any

from app.viz.common import esc, events_of, fmt_num, wrap_section
from app.viz.rsa import rsa_body

_WORDS = re.compile(r"\s+|[^\s]+")


def word_diff_html(before: str, after: str) -> str:
    """`after` with words removed since `before` in <del> and added ones in <ins> (whitespace kept)."""
    a = _WORDS.findall(before or "")
    b = _WORDS.findall(after or "")
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(esc("".join(a[i1:i2])))
            continue
        if op in ("delete", "replace"):
            out.append(f"<del>{esc(''.join(a[i1:i2]))}</del>")
        if op in ("insert", "replace"):
            out.append(f"<ins>{esc(''.join(b[j1:j2]))}</ins>")
    return "".join(out)


def refine_iterations(record: dict[str, Any], node_id: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(refiner node id, its last "refine" event payload) for each refiner (or the given node)."""
    latest: dict[str, dict[str, Any]] = {}
    for event in events_of(record, "refine", node_id):
        latest[str(event.get("node_id"))] = event["data"]
    return list(latest.items())


def _iteration_html(item: dict[str, Any], chosen: bool) -> str:
    k = item.get("iteration")
    draft = item.get("draft") or ""
    revision = item.get("revision")
    parts = [f'<div class="mg-box{" mg-winner" if chosen else ""}" data-iteration="{esc(k)}">',
             f"<h3>Iteration {esc(k)}{' · chosen' if chosen else ''}</h3>",
             f"<div><b>draft</b><div class=mg-text>{esc(draft)}</div></div>"]
    if item.get("score") is not None or item.get("reason"):
        parts.append(f"<div><b>check</b> score {fmt_num(item.get('score'), 3)}"
                     f"{' — ' + esc(item.get('reason')) if item.get('reason') else ''}</div>")
    if item.get("feedback") is not None:
        parts.append(f"<div><b>feedback</b><div class=mg-text>{esc(item.get('feedback'))}</div></div>")
    if revision is not None:
        parts.append(f"<div><b>revision</b> (changes against the draft)<div class=\"mg-text mg-diff\">"
                     f"{word_diff_html(draft, str(revision))}</div></div>")
    parts.append("</div>")
    return "".join(parts)


def refinement_body(record: dict[str, Any], node_id: str | None = None) -> str:
    sections = []
    for owner, data in refine_iterations(record, node_id):
        iterations = data.get("iterations") or []
        chosen = data.get("chosen")
        head = (f"<h3>Refinement of {esc(owner)} · {len(iterations)} iteration(s) · stopped: "
                f"{esc(data.get('stopped') or '?')}{' · check: ' + esc(data['check']) if data.get('check') else ''}"
                "</h3>")
        cards = "".join(_iteration_html(item, chosen is not None and item.get("iteration") == chosen)
                        for item in iterations)
        sections.append(f'<div class="mg-refine" data-node="{esc(owner)}">{head}{cards}</div>')
    return "".join(sections) + rsa_body(record, node_id)


def refinement_html(record: dict[str, Any], node_id: str | None = None) -> str:
    """The history of every refiner (or of one node), RSA lineages included; '' when the run has no refinement."""
    body = refinement_body(record, node_id)
    return wrap_section(body) if body else ""
