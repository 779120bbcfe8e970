"""Checks for datasets/instructions.csv: metric(output, row) says whether an output follows its row's rule."""

from __future__ import annotations

import re
from collections.abc import Callable

# Runs inside the python-metric sandbox: standard library only, never raises on odd input.


def _count(arg: str) -> int | None:
    try:
        return int(arg.strip())
    except ValueError:
        return None


def _max_words(text: str, arg: str) -> bool:
    limit = _count(arg)
    return limit is not None and 0 < len(text.split()) <= limit


def _starts_with(text: str, arg: str) -> bool:
    head = text.lstrip().lstrip("\"'*#>` ").casefold()
    return bool(arg.strip()) and head.startswith(arg.strip().casefold())


def _contains(text: str, arg: str) -> bool:
    word = arg.strip()
    return bool(word) and re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.IGNORECASE) is not None


def _all_lowercase(text: str, arg: str) -> bool:
    return any(c.isalpha() for c in text) and text == text.lower()


def _ends_with_period(text: str, arg: str) -> bool:
    return text.rstrip().endswith(".")


def _number_of_lines(text: str, arg: str) -> bool:
    wanted = _count(arg)
    return wanted is not None and len([line for line in text.splitlines() if line.strip()]) == wanted


def _no_commas(text: str, arg: str) -> bool:
    return bool(text.strip()) and "," not in text and "，" not in text


RULES: dict[str, Callable[[str, str], bool]] = {
    "max_words": _max_words,
    "starts_with": _starts_with,
    "contains": _contains,
    "all_lowercase": _all_lowercase,
    "ends_with_period": _ends_with_period,
    "number_of_lines": _number_of_lines,
    "no_commas": _no_commas,
}


def metric(output: object, row: object) -> bool:
    """True when `output` follows the rule named in row["check"] with argument row["arg"]."""
    if not isinstance(row, dict):
        return False
    text = output if isinstance(output, str) else ("" if output is None else str(output))
    rule = RULES.get(str(row.get("check") or "").strip().lower())
    arg = row.get("arg")
    if rule is None:
        return False
    try:
        return bool(rule(text, "" if arg is None else str(arg)))
    except (ValueError, TypeError, re.error):
        return False
