"""User-supplied regular expressions on RE2: linear-time matching, so no pattern can backtrack catastrophically.

Python's `re` backtracks: `(a+)+$` against 50,000 `a` and a `b` runs for longer than the universe, holding
the GIL and the run far past its time cap. Every pattern a user writes (a verifier's `regex`, an extraction
`pattern`, a `regex:` metric) is compiled here instead. RE2 refuses what needs backtracking (backreferences,
lookaround, atomic groups, possessive quantifiers) with a clear error at validation; ordinary patterns keep
Python's meaning: `\\d`, `\\w`, `\\s` (and their negations) match Unicode like Python's, `\\Z`, `\\uXXXX`,
`\\UXXXXXXXX`, `\\N{NAME}` and `{,n}` are translated. Known difference: `\\b` is an ASCII word boundary.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import re2

HINT = "use a pattern without backreferences or lookaround"
MAX_PATTERN_CHARS = 10_000
"""Longest pattern accepted (RE2 also caps each compiled pattern's memory)."""

_WORD = r"\p{L}\p{N}_"
_SPACE = r"\t-\r\x{1c}-\x{20}\x{85}\p{Z}"
_OUTSIDE_CLASS = {"d": r"\p{Nd}", "D": r"\P{Nd}", "w": f"[{_WORD}]", "W": f"[^{_WORD}]", "s": f"[{_SPACE}]",
                  "S": f"[^{_SPACE}]", "Z": r"\z"}
"""Python escapes rewritten for RE2 outside a character class (Python's str patterns are Unicode-aware)."""
_INSIDE_CLASS = {"d": r"\p{Nd}", "D": r"\P{Nd}", "w": _WORD, "s": _SPACE}
"""The same inside [...]; \\W and \\S stay RE2's own there (a negated union cannot be written in a class)."""
_UNSUPPORTED = (
    (re.compile(r"invalid escape sequence: \\[1-9]|\(\?P="), "backreferences (\\1, (?P=name)) are not supported"),
    (re.compile(r"\(\?<?[=!]"), "lookahead and lookbehind ((?=, (?!, (?<=, (?<!) are not supported"),
    (re.compile(r"\(\?>|bad repetition operator: [*+?]\+"),
     "atomic groups and possessive quantifiers are not supported"),
    (re.compile(r"invalid repetition size"), "repetition counts above 1000 are not supported"),
    (re.compile(r"\(\?#"), "comments (?#...) are not supported"),
    (re.compile(r"invalid perl operator: \(\?[aLux]"), "only the inline flags i, m, s and U are supported"),
)
"""(what to look for in RE2's error and the pattern, what to tell the user)."""


class PatternError(ValueError):
    """A pattern the safe engine cannot run; the message says why and how to write it instead."""


class Match(Protocol):
    """What a match offers (RE2's match object has the `re.Match` methods used here)."""

    def group(self, *index: int | str) -> Any: ...
    def groups(self, default: Any = None) -> tuple[Any, ...]: ...
    def start(self, group: int | str = 0) -> int: ...
    def end(self, group: int | str = 0) -> int: ...


def _codepoint(body: str, escape: str, pattern: str) -> str:
    """RE2's \\x{...} for Python's \\uXXXX / \\UXXXXXXXX."""
    if len(body) != (4 if escape == "u" else 8) or not set(body) <= set("0123456789abcdefABCDEF"):
        raise PatternError(f"regex {pattern!r}: \\{escape} needs {4 if escape == 'u' else 8} hex digits")
    return f"\\x{{{body}}}"


def _named(body: str, pattern: str) -> str:
    """RE2's \\x{...} for Python's \\N{NAME}."""
    try:
        return f"\\x{{{ord(unicodedata.lookup(body)):x}}}"
    except KeyError:
        raise PatternError(f"regex {pattern!r}: unknown character name \\N{{{body}}}") from None


def _translate(pattern: str) -> str:
    """Python regex syntax -> RE2 syntax with the same meaning (see the module docstring); one linear pass."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            table = _INSIDE_CLASS if in_class else _OUTSIDE_CLASS
            if e in table:
                out.append(table[e])
                i += 2
            elif e in "uU":
                size = 4 if e == "u" else 8
                out.append(_codepoint(pattern[i + 2:i + 2 + size], e, pattern))
                i += 2 + size
            elif e == "N" and pattern.startswith("{", i + 2) and "}" in pattern[i + 3:]:
                end = pattern.index("}", i + 3)
                out.append(_named(pattern[i + 3:end], pattern))
                i = end + 1
            else:
                out.append(pattern[i:i + 2])
                i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            start = i + 1 + (pattern.startswith("^", i + 1))
            if pattern.startswith("]", start):  # a leading ] is a literal, as in Python
                start += 1
            out.append(pattern[i:start])
            i = start
            continue
        if c == "{" and pattern.startswith("{,", i):  # Python's {,n} is {0,n}; RE2 would read it literally
            j = i + 2
            while j < n and pattern[j].isdigit():
                j += 1
            if j > i + 2 and j < n and pattern[j] == "}":
                out.append("{0," + pattern[i + 2:j + 1])
                i = j + 1
                continue
        out.append(c)
        i += 1
    return "".join(out)


def _explain(pattern: str, error: str) -> str:
    for found, why in _UNSUPPORTED:
        if found.search(error) or found.search(pattern):
            return f"regex {pattern!r} is not supported by the safe regex engine: {why}; {HINT}"
    return f"regex {pattern!r} is not a valid pattern for the safe regex engine (RE2): {error}; {HINT}"


def _re2_options() -> Any:
    options = re2.Options()
    options.log_errors = False  # errors come back as exceptions; RE2 need not print them too
    return options


def _has_end_anchor(pattern: str) -> bool:
    """Whether an unescaped `$` outside a class appears (Python's `$` also matches before a final newline)."""
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "$":
            return True
        i += 1
    return False


def _encodable(text: str) -> str:
    """`text`, with lone surrogates (which UTF-8 cannot carry) replaced one for one, so offsets still hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)
    return text


@dataclass(frozen=True)
class SafePattern:
    """A compiled user pattern; `pattern` is the text as the user wrote it."""

    pattern: str
    multiline: bool
    _compiled: Any
    _final_newline: bool
    """Search again without a final newline: Python's `$` (not multiline) also matches just before one."""

    @property
    def groups(self) -> int:
        return int(self._compiled.groups)

    def search(self, text: str) -> Match | None:
        text = _encodable(text)
        found = self._compiled.search(text)
        if found is None and self._final_newline and text.endswith("\n"):
            found = self._compiled.search(text[:-1])
        return found

    def finditer(self, text: str) -> Iterator[Match]:
        return iter(self._compiled.finditer(_encodable(text)))

    def findall(self, text: str) -> list[Any]:
        return list(self._compiled.findall(_encodable(text)))


@functools.lru_cache(maxsize=256)
def compile_pattern(pattern: str, *, multiline: bool = False) -> SafePattern:
    """`pattern` compiled on RE2 (linear time). `multiline`: `^`/`$` match at line breaks, like re.MULTILINE.
    Raises PatternError for patterns RE2 cannot run, with a hint on how to write them instead."""
    if not isinstance(pattern, str):
        raise PatternError(f"a regex must be text, got {type(pattern).__name__}")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(f"regex is {len(pattern):,} characters; the limit is {MAX_PATTERN_CHARS:,}")
    translated = _translate(pattern)
    try:
        compiled = re2.compile(("(?m)" if multiline else "") + translated, _re2_options())
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        error = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
        raise PatternError(_explain(pattern, error)) from None
    except UnicodeEncodeError:
        raise PatternError(f"regex {pattern!r} is not valid Unicode text") from None
    final_newline = not multiline and _has_end_anchor(pattern) and "\\Z" not in pattern and "\\z" not in pattern
    return SafePattern(pattern, multiline, compiled, final_newline)


def pattern_problem(pattern: str, *, multiline: bool = False) -> str | None:
    """Why `pattern` cannot run on the safe engine (with a hint), or None when it can."""
    try:
        compile_pattern(pattern, multiline=multiline)
    except PatternError as exc:
        return str(exc)
    return None


def search(pattern: str, text: str, *, multiline: bool = False) -> Match | None:
    """The first match of a user pattern in `text`, or None (linear time)."""
    return compile_pattern(pattern, multiline=multiline).search(text)


def findall(pattern: str, text: str, *, multiline: bool = False) -> list[Any]:
    """Every match of a user pattern in `text`, like re.findall (linear time per match)."""
    return compile_pattern(pattern, multiline=multiline).findall(text)


def escape(text: str) -> str:
    """A pattern matching `text` literally."""
    return str(re2.escape(_encodable(text)))
