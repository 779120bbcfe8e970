"""A code problem's own docstring examples (`>>> f(x)` then the expected value) as assert lines: the public tests
that code candidates may be selected with (CodeT, AlphaCode-style filtering), apart from the graded hidden tests."""

from __future__ import annotations

import ast
import io
import re
import tokenize

_PROMPT_LINE = re.compile(r"^\s*>>>\s?(.*)$")
_CONTINUATION = re.compile(r"^\s*\.\.\.\s?(.*)$")
_DOCSTRING_END = re.compile(r"(\"\"\"|\'\'\')\s*$")
_INLINE_SEPARATOR = re.compile(r"^(?:==>|=>|->|➞|==|#\s*returns|should return|returns|return)\s*")
"""`f(x) ==> y`, `f(x) -> y`, `f(x) ➞ y`, `f(x) == y`, `f(x) returns y`: the other ways HumanEval shows examples."""
_LOWERCASE_LITERALS = {"true": "True", "false": "False", "none": "None"}


def _without_comment(text: str) -> str:
    """The text up to its first `#` comment (a `#` inside a string is no comment)."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                lines = text.splitlines()
                row, col = token.start
                return "\n".join([*lines[:row - 1], lines[row - 1][:col]]).strip()
    except (tokenize.TokenError, SyntaxError):
        pass
    return text


def _is_expression(text: str) -> bool:
    try:
        ast.parse(text, mode="eval")
    except SyntaxError:
        return False
    return True


def _assert_line(call: str, expected: str) -> str | None:
    """`assert CALL == EXPECTED` (floats compared to 1e-6), or None when either side is not a Python expression
    (an exception's traceback, printed output without quotes)."""
    call, expected = _without_comment(call), _without_comment(expected)
    if not (call and expected and _is_expression(call) and _is_expression(expected)):
        return None
    value = ast.parse(expected, mode="eval").body
    if isinstance(value, ast.Constant) and isinstance(value.value, float):
        return f"assert abs(({call}) - ({expected})) < 1e-6"
    return f"assert ({call}) == ({expected})"


def _examples(docstring_text: str) -> list[tuple[str, str]]:
    """(call, expected) pairs of a doctest-style text: a `>>>` line (with `...` continuations) and the lines after
    it up to a blank line or the next `>>>`."""
    lines = docstring_text.splitlines()
    pairs: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        prompt = _PROMPT_LINE.match(lines[i])
        i += 1
        if not prompt:
            continue
        call = [prompt.group(1).strip()]
        while i < len(lines) and (more := _CONTINUATION.match(lines[i])):
            call.append(more.group(1))
            i += 1
        expected: list[str] = []
        while i < len(lines) and lines[i].strip() and not _PROMPT_LINE.match(lines[i]):
            line = lines[i].strip()
            end = _DOCSTRING_END.search(line)
            i += 1
            if end:  # the docstring closes on this line
                expected.append(line[:end.start()].strip())
                break
            expected.append(line)
        if expected:
            pairs.append(("\n".join(call).strip(), " ".join(expected).strip()))
    return pairs


def _closing_paren(line: str, start: int) -> int:
    """The index of the parenthesis that closes the one at `start` (quotes respected), or -1."""
    depth, quote = 0, ""
    for i in range(start, len(line)):
        ch = line[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _literal(text: str) -> bool:
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def _inline_examples(text: str, entry_point: str) -> list[tuple[str, str]]:
    """`entry_point(literals) SEP literal` lines; both sides must be literals (`is_happy(a) => False` is prose)."""
    pairs = []
    for line in text.splitlines():
        start = line.find(f"{entry_point}(")
        if start < 0 or line.lstrip().startswith(("def ", ">>>")):
            continue
        end = _closing_paren(line, start + len(entry_point))
        separator = _INLINE_SEPARATOR.match(line[end + 1:].strip()) if end > 0 else None
        if separator is None:
            continue
        expected = line[end + 1:].strip()[separator.end():].strip().rstrip(".,;")
        expected = _LOWERCASE_LITERALS.get(expected, expected)
        call = line[start:end + 1]
        try:
            args = ast.parse(call, mode="eval").body
        except SyntaxError:
            continue
        if isinstance(args, ast.Call) and _literal(expected) and all(
                _literal(ast.unparse(a)) for a in [*args.args, *(k.value for k in args.keywords)]):
            pairs.append((call, expected))
    return pairs


def docstring_asserts(source: str, entry_point: str = "") -> list[str]:
    """The assert lines of a problem's docstring examples (only those that call `entry_point`, when given): what a
    candidate may be checked against before the hidden tests grade it."""
    asserts = []
    inline = _inline_examples(source, entry_point) if entry_point else []
    for call, expected in [*_examples(source), *inline]:
        if entry_point and not re.search(rf"\b{re.escape(entry_point)}\s*\(", call):
            continue
        line = _assert_line(call, expected)
        if line is not None and line not in asserts:
            asserts.append(line)
    return asserts
