"""AlphaCode's clustering: programs with identical outputs on the same inputs form a cluster; the largest wins.

Plain functions over lists: `parse_inputs` turns an LLM's text (a JSON list, else one input per line) into
test inputs, `usable_inputs` keeps those a call can be made of (the rest are reported, not run),
`failing_everywhere` finds the inputs every program raised the same error on (the input's fault, not the
programs'), `errors_only` tells a behaviour made of errors alone, and `behaviour_vote` groups candidates by
their behaviour signature and picks one.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from typing import Any

from nodes.algorithms.voting import Cluster, VoteResult

FENCE_LINE = re.compile(r"^\s*```")
LIST_MARK = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
"""A list item's marker (`- `, `1. `, `2) `) before a one-per-line argument list (dropped)."""


def parse_inputs(value: Any, entry_point: str) -> list[str]:
    """Test inputs from a param or an LLM's text: a JSON list, else one non-empty line each (fences dropped).
    With an entry point an input is the call's argument list (`1, [2, 3]`); without, a program's stdin."""
    if value is None:
        return []
    items: Any = value
    if isinstance(value, str):
        text = "\n".join(line for line in value.splitlines() if not FENCE_LINE.match(line)).strip()
        try:
            items = json.loads(text) if text.startswith("[") else None
        except ValueError:
            items = None
        if not isinstance(items, list):
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            return [LIST_MARK.sub("", line) for line in lines] if entry_point else lines
    if not isinstance(items, list):
        items = [items]
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(item.replace("\\n", "\n") if not entry_point else item)
        elif entry_point and isinstance(item, list):
            out.append(", ".join(repr(v) for v in item))
        else:
            out.append(repr(item) if entry_point else str(item))
    return out


ERROR_MARK = "!"
"""A probe's output that is an error starts with this (the harness writes `!ValueError`)."""
SHOWN_UNUSABLE = 3
"""Unusable inputs quoted in the note (the rest are counted)."""


def usable_inputs(probes: Sequence[str], entry_point: str) -> tuple[list[str], list[dict[str, str]]]:
    """(argument lists that make a call `entry_point(ARGS)`, [{"input", "error"}] for the inputs that do not).
    An input written as the whole call (`f(2, 3)`, as small models do) gives its arguments. Without an entry
    point every input is a program's stdin, so all are usable."""
    if not entry_point:
        return list(probes), []
    usable: list[str] = []
    unusable: list[dict[str, str]] = []
    for probe in probes:
        probe = _call_arguments(probe, entry_point)
        try:
            tree = ast.parse(f"{entry_point}({probe})", mode="eval")
        except SyntaxError as exc:
            unusable.append({"input": probe, "error": f"SyntaxError: {exc.msg}"})
            continue
        except ValueError as exc:  # e.g. a null byte
            unusable.append({"input": probe, "error": f"ValueError: {exc}"})
            continue
        call = tree.body
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == entry_point):
            unusable.append({"input": probe, "error": f"not an argument list of {entry_point}()"})
            continue
        usable.append(probe)
    return usable, unusable


def _call_arguments(probe: str, entry_point: str) -> str:
    """`f(2, k=3)` -> `2, k=3` when the input is a call of the entry point itself; else the input unchanged."""
    text = probe.strip()
    if not text.startswith(entry_point + "("):
        return probe
    try:
        call = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError):
        return probe
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == entry_point):
        return probe
    parts = [ast.get_source_segment(text, a) for a in call.args]
    for k in call.keywords:
        value = ast.get_source_segment(text, k.value)
        parts.append(None if value is None else f"{k.arg}={value}" if k.arg else f"**{value}")
    return probe if any(p is None for p in parts) else ", ".join(str(p) for p in parts)


def is_error(output: Any) -> bool:
    """Whether a probe's output is an error (`!Name`) rather than a value."""
    return isinstance(output, str) and output.startswith(ERROR_MARK)


def failing_everywhere(outputs: Sequence[Sequence[Any]], n_probes: int) -> dict[int, str]:
    """{probe index: error} for the probes on which every program that ran raised the same error: such an input
    tells no program apart (e.g. it names an undefined variable). `outputs` holds each program's probe outputs."""
    out: dict[int, str] = {}
    for k in range(n_probes):
        seen = {row[k] for row in outputs if k < len(row)}
        if len(seen) == 1:
            (only,) = seen
            if is_error(only):
                out[k] = str(only)[len(ERROR_MARK):]
    return out


def errors_only(tests: Sequence[dict[str, Any]], probe_outputs: Sequence[Any]) -> bool:
    """Whether a behaviour holds errors alone: every probe raised and every test failed without returning a value
    (the harness keeps the error as the test's output then). False when there is nothing to look at."""
    values = 0
    for t in tests:
        values += 1
        if t.get("passed") or (t.get("output") is not None and t.get("output") != t.get("error")):
            return False
    for o in probe_outputs:
        values += 1
        if not is_error(o):
            return False
    return values > 0


def inputs_note(unusable: Sequence[dict[str, str]], used: int, has_tests: bool) -> str:
    """The sentence the trace and the Traces tab show when generated inputs were left out ('' when none were)."""
    if not unusable:
        return ""
    quoted = "; ".join(f"{_short(u['input'])!r} ({u['error']})" for u in unusable[:SHOWN_UNUSABLE])
    more = f"; and {len(unusable) - SHOWN_UNUSABLE} more" if len(unusable) > SHOWN_UNUSABLE else ""
    word = "input" if len(unusable) == 1 else "inputs"
    if used:
        on = f"clustered on {'the example tests and ' if has_tests else ''}the {used} that ran"
    else:
        on = "clustered on the example tests only" if has_tests else "nothing left to cluster on"
    return f"{len(unusable)} generated {word} could not be used: {quoted}{more}; {on}"


def _short(text: str, n: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n - 1] + "…"


def behaviour_vote(signatures: Sequence[str | None], scores: Sequence[float | None],
                   labels: Sequence[str] | None = None) -> VoteResult:
    """Group candidates by signature (None: it did not run, left out); the largest cluster wins, ties to the
    cluster with the best score; inside it the best-scoring candidate (then the first) is the winner."""
    values = [float("-inf") if s is None else float(s) for s in scores]
    groups: dict[str, list[int]] = {}
    for i, sig in enumerate(signatures):
        if sig is not None:
            groups.setdefault(sig, []).append(i)
    clusters = [Cluster(labels[members[0]] if labels else sig, members, max(values[i] for i in members))
                for sig, members in groups.items()]
    clusters.sort(key=lambda c: (-c.count, -c.weight, c.members[0]))
    no_answer = [i for i, sig in enumerate(signatures) if sig is None]
    if not clusters:
        return VoteResult("behaviour", None, None, [], no_answer, [], "largest cluster, then best score")
    top = clusters[0]
    ties = [c.answer for c in clusters[1:] if c.count == top.count]
    winner = max(top.members, key=lambda i: (values[i], -i))
    return VoteResult("behaviour", top.answer, winner, clusters, no_answer, ties, "largest cluster, then best score",
                      detail={"clusters": len(clusters), "largest": top.count})
