"""Multiple-choice answers: find the option letter a completion chose (`Answer: B`, `(B)`, `**B**`, `\\boxed{B}`).

The most explicit marker wins: the last "answer is / Answer:" letter, else the last `\\boxed{}` letter, else
the last bold letter, else the last parenthesised letter, else a completion that is only a letter ("B.").
Letters are A-J, upper case; a lower-case one counts only alone (elsewhere 'a' is an article).
"""

from __future__ import annotations

import re

_LETTERS = "A-J"
_MARKED = re.compile(
    r"(?i:final\s+answer|answer)\s*(?i:is|:|=)?\s*[:\s]*(?:\*\*|\\boxed\{|\\text\{|\$)*\s*"
    rf"\(?([{_LETTERS}])\)?(?!\w)")
_BOXED = re.compile(rf"\\boxed\{{\s*(?:\\text\{{)?\s*\(?([{_LETTERS}])\)?\s*\}}")
_BOLD = re.compile(rf"\*\*\s*\(?([{_LETTERS}])\)?[.:)]?\s*\*\*")
_PAREN = re.compile(rf"\(([{_LETTERS}])\)")
_ALONE = re.compile(rf"^\s*\(?([{_LETTERS}a-j])\)?[.:)]?\s*$")


def _last(pattern: re.Pattern[str], text: str) -> str | None:
    found = pattern.findall(text)
    return found[-1].upper() if found else None


def choice_letter(text: str) -> str | None:
    """The option letter a completion chose, upper case, or None."""
    for pattern in (_MARKED, _BOXED, _BOLD, _PAREN, _ALONE):
        letter = _last(pattern, text)
        if letter is not None:
            return letter
    return None


def reference_letter(text: str) -> str | None:
    """A reference given as `B`, `(B)`, `b` or `B.`; None when it is not one letter A-J."""
    found = _ALONE.match(text or "")
    return found.group(1).upper() if found else None
