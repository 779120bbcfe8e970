"""The math-equivalence child process: reads JSON requests on stdin, answers with math-verify on stdout.

Run only by `math_equiv.MathChecker` (as `python -I math_worker.py`), which kills it when one request passes
its time limit: sympy can spend unbounded time (and memory) on an expression such as 9^{9^{9^{9^9}}}, and
math-verify's own timeout uses SIGALRM, which works only in a main thread. The address space is capped so a
huge expression fails here instead of swapping the machine.

Protocol: one JSON object per line. {"op": "equal", "answer": TEXT, "reference": TEXT} ->
{"equal": bool, "got": str | null, "want": str | null}; {"op": "classes", "answers": [TEXT | null, ...]} ->
{"classes": [int | null, ...]} (the index of the first answer each one is equivalent to). A first line
{"ready": true} (or {"error": ...}) says whether math-verify imported.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MEMORY_MB = 2048


def _limit_memory() -> None:
    try:
        import resource

        cap = MEMORY_MB * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    except (ImportError, ValueError, OSError):  # no resource module (Windows) or the limit refused
        pass


def _has_delimiters(text: str) -> bool:
    return any(mark in text for mark in ("$", "\\boxed", "\\(", "\\["))


def parse_reference(parse: Any, text: str) -> list[Any]:
    """A reference as LaTeX (wrapped in $...$ when it has no delimiters), else as plain text."""
    if not _has_delimiters(text):
        found = parse(f"${text}$", parsing_timeout=None)
        if found:
            return list(found)
    return list(parse(text, parsing_timeout=None))


def parse_answer(parse: Any, text: str) -> list[Any]:
    """A model's answer: the last \\boxed{} first (math-verify would join every boxed answer into a set), else
    the last LaTeX or plain expression."""
    last_boxed = text.rfind("\\boxed")
    found = parse(text[last_boxed:] if last_boxed >= 0 else text, parsing_timeout=None)
    if not found and not _has_delimiters(text):
        found = parse(f"${text}$", parsing_timeout=None)
    return list(found)


def _shown(parsed: list[Any]) -> str | None:
    return str(parsed[-1]) if parsed else None


def handle(request: dict[str, Any], parse: Any, verify: Any) -> dict[str, Any]:
    if request.get("op") == "classes":
        parsed = [parse_answer(parse, a) if isinstance(a, str) and a.strip() else [] for a in request["answers"]]
        classes: list[int | None] = []
        heads: list[int] = []
        for i, p in enumerate(parsed):
            if not p:
                classes.append(None)
                continue
            head = next((h for h in heads if verify(parsed[h], p, timeout_seconds=None)), None)
            if head is None:
                heads.append(i)
                head = i
            classes.append(head)
        return {"classes": classes}
    got = parse_answer(parse, str(request.get("answer") or ""))
    want = parse_reference(parse, str(request.get("reference") or ""))
    equal = bool(got and want and verify(want, got, timeout_seconds=None))
    return {"equal": equal, "got": _shown(got), "want": _shown(want)}


def main() -> None:
    _limit_memory()
    out = sys.stdout
    try:
        from math_verify import parse, verify
    except ImportError as exc:
        out.write(json.dumps({"error": f"math-verify is not installed ({exc}); pip install math-verify"}) + "\n")
        out.flush()
        return
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            reply = handle(json.loads(line), parse, verify)
        except (MemoryError, RecursionError) as exc:
            reply = {"failed": f"{type(exc).__name__}: the expression is too large"}
        except Exception as exc:  # a reply per request, whatever sympy raised: the parent grades it wrong
            reply = {"failed": f"{type(exc).__name__}: {str(exc)[:200]}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
