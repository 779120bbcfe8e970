"""A bounded pure-Python GBNF checker and JSON-schema guard: nothing unchecked reaches llama.cpp's grammar parser.

llama.cpp parses GBNF recursively (one C stack frame set per nested group) and expands `{m,n}` repetitions into
copies and rule chains; a grammar with thousands of nested parentheses overflows the stack (the process dies
with SIGSEGV), `{5,2}` loops forever and huge counts exhaust memory. This module parses the same syntax
iteratively, with explicit limits, and says what is wrong and on which line of the grammar. JSON schemas are
bounded (size, depth, counts) before llama-cpp-python's converter runs, and the grammar it produces is checked
the same way.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

MAX_GRAMMAR_BYTES = 64 * 1024
"""Largest grammar text (UTF-8 bytes)."""
MAX_NESTING = 256
"""Deepest `( ... )` nesting. llama.cpp needs a few hundred bytes of C stack per level: 1,000 levels already
crash a 256 KiB thread stack, 20,000 crash the default 8 MiB one; 256 levels stay far inside both and leave
room for JSON schemas whose maxLength/maxItems the converter writes as nested optional groups."""
MAX_RULES = 1000
"""Most rules (`name ::= ...` lines)."""
MAX_REPETITION = 1000
"""Largest count in `{m}`, `{m,}`, `{m,n}`."""
MAX_EXPANDED_SYMBOLS = 200_000
"""Most grammar elements after llama.cpp expands the repetitions (each copy of a repeated item counts)."""
MAX_EXPANDED_RULES = 20_000
"""Most rules after expansion (groups and the rule chain of each optional repetition count)."""
MAX_TOKEN_CHARS = 256
"""Longest `<token>` reference."""

MAX_SCHEMA_BYTES = 64 * 1024
"""Largest JSON schema text (UTF-8 bytes)."""
MAX_SCHEMA_DEPTH = 32
"""Deepest nesting of objects/arrays in a JSON schema."""
MAX_SCHEMA_COUNT = 1000
"""Largest minLength/maxLength/minItems/maxItems/... (the converter writes each item out)."""
_SCHEMA_COUNT_KEYS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
                      "minContains", "maxContains")

GRAMMAR_HINT = ('GBNF rules look like  root ::= "yes" | "no"  (one rule per line; generation starts at `root`); '
                f"limits: {MAX_GRAMMAR_BYTES // 1024} KB, {MAX_NESTING} nested groups, {MAX_RULES} rules, "
                f"repetition counts up to {MAX_REPETITION}")
SCHEMA_HINT = (f"keep JSON schemas under {MAX_SCHEMA_BYTES // 1024} KB and {MAX_SCHEMA_DEPTH} levels deep, with "
               f"counts (maxLength, maxItems, ...) up to {MAX_SCHEMA_COUNT}; lower maxLength/maxItems if the "
               "grammar it produces is too deep")

_ESCAPES = frozenset('tnr\\"[]-')
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_MAX_COUNT_DIGITS = 7


@dataclass(frozen=True)
class GrammarProblem:
    """Why a grammar (or schema) is refused, and the line of the grammar text where it was found (1-based)."""

    message: str
    line: int | None = None

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


class GrammarError(ValueError):
    """A grammar or JSON schema refused before llama.cpp sees it."""

    def __init__(self, problem: GrammarProblem) -> None:
        self.problem = problem
        super().__init__(str(problem))


def _is_word_char(c: str) -> bool:
    return ("a" <= c <= "z") or ("A" <= c <= "Z") or ("0" <= c <= "9") or c == "-"


class _RefusedError(Exception):
    """Internal: stops the parse with a message at a position."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


class _GbnfParser:
    """One pass over a GBNF text, mirroring llama.cpp's parser (llama-grammar.cpp) without recursion."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.defined: set[str] = set()
        self.refs: dict[str, int] = {}
        """Each referenced rule name -> position of its first use."""
        self.symbols = 0
        self.rules = 0

    # ---------------------------------------------------------------- lexing

    def char(self, pos: int) -> str:
        return self.text[pos] if pos < self.n else ""

    def space(self, pos: int, newline_ok: bool) -> int:
        text, n = self.text, self.n
        while pos < n:
            c = text[pos]
            if c == "#":
                while pos < n and text[pos] not in "\r\n":
                    pos += 1
            elif c in " \t" or (newline_ok and c in "\r\n"):
                pos += 1
            else:
                break
        return pos

    def name_end(self, pos: int) -> int:
        end = pos
        while end < self.n and _is_word_char(self.text[end]):
            end += 1
        if end == pos:
            raise _RefusedError("expecting a rule name", pos)
        return end

    def parse_char(self, pos: int) -> int:
        """Past one (possibly escaped) character of a literal or class."""
        c = self.char(pos)
        if not c:
            raise _RefusedError("unexpected end of the grammar", pos)
        if c != "\\":
            return pos + 1
        e = self.char(pos + 1)
        if e in _HEX_ESCAPES:
            size = _HEX_ESCAPES[e]
            digits = self.text[pos + 2:pos + 2 + size]
            if len(digits) != size or not set(digits) <= _HEX_DIGITS:
                raise _RefusedError(f"\\{e} needs {size} hex digits", pos)
            return pos + 2 + size
        if e and e in _ESCAPES:
            return pos + 2
        if not e:
            raise _RefusedError("a backslash at the end of the grammar", pos)
        raise _RefusedError(f"unknown escape \\{e} (use \\t \\n \\r \\\\ \\\" \\[ \\] \\- \\xHH \\uHHHH \\UHHHHHHHH)",
                       pos)

    def literal(self, pos: int) -> tuple[int, int]:
        """(position after the closing quote, number of characters)."""
        start, pos, count = pos, pos + 1, 0
        while self.char(pos) != '"':
            if pos >= self.n:
                raise _RefusedError("unterminated string literal", start)
            pos = self.parse_char(pos)
            count += 1
        return pos + 1, count

    def char_class(self, pos: int) -> tuple[int, int]:
        """(position after the closing ], number of elements)."""
        start, pos, count = pos, pos + 1, 0
        if self.char(pos) == "^":
            pos += 1
        while self.char(pos) != "]":
            if pos >= self.n:
                raise _RefusedError("unterminated character class [...]", start)
            pos = self.parse_char(pos)
            count += 1
            if self.char(pos) == "-" and self.char(pos + 1) != "]":
                if pos + 1 >= self.n:
                    raise _RefusedError("unterminated character class [...]", start)
                pos = self.parse_char(pos + 1)
                count += 1
        return pos + 1, count

    def token(self, pos: int) -> int:
        """Past a `<[id]>` or `<token>` reference (optionally negated with `!`)."""
        start = pos
        if self.char(pos) == "!":
            pos += 1
            if self.char(pos) != "<":
                raise _RefusedError("expecting '<' after '!'", pos)
        end = self.text.find(">", pos, pos + MAX_TOKEN_CHARS + 2)
        body = self.text[pos + 1:end] if end > pos else ""
        if end < 0 or not body or "\n" in body or "\r" in body:
            raise _RefusedError(f"expecting a token reference like <[123]> or <|name|> (at most {MAX_TOKEN_CHARS} "
                           "characters, closed by '>')", start)
        if body.startswith("["):
            digits = body[1:-1] if body.endswith("]") else ""
            if not digits.isdigit() or not digits.isascii() or len(digits) > 9:
                raise _RefusedError("a token id is written <[123]>", start)
        return end + 1

    def count(self, pos: int) -> tuple[int, int]:
        """(position after the digits, their value) of a repetition count."""
        end = pos
        while end < self.n and "0" <= self.text[end] <= "9":
            end += 1
        if end == pos:
            raise _RefusedError("expecting a number in {m,n}", pos)
        if end - pos > _MAX_COUNT_DIGITS or int(self.text[pos:end]) > MAX_REPETITION:
            raise _RefusedError(f"repetition count {self.text[pos:end][:12]} is over the limit of {MAX_REPETITION}",
                                pos)
        return end, int(self.text[pos:end])

    # ---------------------------------------------------------------- accounting

    def add(self, symbols: int, rules: int, pos: int) -> None:
        self.symbols += symbols
        self.rules += rules
        if self.symbols > MAX_EXPANDED_SYMBOLS:
            raise _RefusedError(f"the grammar expands to more than {MAX_EXPANDED_SYMBOLS:,} elements (repetitions "
                           "are written out by llama.cpp); use smaller repetition counts", pos)
        if self.rules > MAX_EXPANDED_RULES:
            raise _RefusedError(f"the grammar expands to more than {MAX_EXPANDED_RULES:,} rules (each optional "
                           "repetition adds one); use smaller repetition counts", pos)

    def repeat(self, last: int | None, low: int, high: int | None, op: str, pos: int) -> int | None:
        """Account for `op` applied to the previous item of `last` elements; the new previous item's size
        (None: nothing left to repeat), as llama.cpp's handle_repetitions rewrites it."""
        if last is None:
            raise _RefusedError(f"nothing before {op} to repeat", pos)
        if high is not None and high < low:
            raise _RefusedError(f"{op}: the maximum {high} is below the minimum {low}", pos)
        n_opt = 1 if high is None else high - low
        copies = last * (low - 1) if low > 0 else -last
        self.add(copies + n_opt * (last + 3) + (1 if n_opt > 0 else 0), n_opt, pos)
        if n_opt > 0:
            return 1
        return last * low if low > 0 else None

    # ---------------------------------------------------------------- grammar

    def parse(self) -> None:
        if not self.text.strip():
            raise _RefusedError("the grammar is empty; it needs at least `root ::= ...`", 0)
        pos = self.space(0, True)
        while pos < self.n:
            pos = self.rule(pos)
        for name, at in self.refs.items():
            if name not in self.defined:
                raise _RefusedError(f"rule {name!r} is used but never defined", at)
        if "root" not in self.defined:
            raise _RefusedError("there is no `root` rule (generation starts at `root ::= ...`)", 0)

    def rule(self, pos: int) -> int:
        start = pos
        if self.char(pos) == "|":
            raise _RefusedError("a line cannot start with '|': end the previous line with '|', or wrap the "
                           "alternatives in ( ... ) to spread them over lines", pos)
        end = self.name_end(pos)
        name = self.text[pos:end]
        pos = self.space(end, False)
        if self.text[pos:pos + 3] != "::=":
            raise _RefusedError(f"expecting ::= after the rule name {name!r}", pos)
        if name not in self.defined:
            self.defined.add(name)
            if len(self.defined) > MAX_RULES:
                raise _RefusedError(f"more than {MAX_RULES} rules", start)
        self.add(1, 1, start)
        pos = self.alternatives(self.space(pos + 3, True))
        c = self.char(pos)
        if c == "\r":
            pos += 2 if self.char(pos + 1) == "\n" else 1
        elif c == "\n":
            pos += 1
        elif c:
            raise _RefusedError(f"expecting the end of the line, found {c!r}"
                           + (" (a ')' without its '(')" if c == ")" else ""), pos)
        return self.space(pos, True)

    def alternatives(self, pos: int) -> int:
        """Past the body of one rule: alternatives of sequences, groups nested with an explicit stack."""
        opened: list[int] = []  # positions of the open '('
        last: int | None = None  # size of the item a repetition would apply to
        while True:
            nested = bool(opened)
            c = self.char(pos)
            if c == '"':
                pos, size = self.literal(pos)
                self.add(size, 0, pos)
                last = size or None
                pos = self.space(pos, nested)
            elif c == "[":
                pos, size = self.char_class(pos)
                self.add(size, 0, pos)
                last = size or None
                pos = self.space(pos, nested)
            elif c and _is_word_char(c):
                end = self.name_end(pos)
                self.refs.setdefault(self.text[pos:end], pos)
                self.add(1, 0, pos)
                last = 1
                pos = self.space(end, nested)
            elif c and c in "<!":
                pos = self.token(pos)
                self.add(1, 0, pos)
                last = 1
                pos = self.space(pos, nested)
            elif c == ".":
                self.add(1, 0, pos)
                last = 1
                pos = self.space(pos + 1, nested)
            elif c == "(":
                if len(opened) >= MAX_NESTING:
                    raise _RefusedError(f"groups are nested more than {MAX_NESTING} deep", pos)
                opened.append(pos)
                self.add(2, 1, pos)
                last = None
                pos = self.space(pos + 1, True)
            elif c == ")" and opened:
                opened.pop()
                last = 1
                pos = self.space(pos + 1, bool(opened))
            elif c == "|":
                self.add(1, 0, pos)
                last = None
                pos = self.space(pos + 1, True)
            elif c and c in "*+?":
                low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
                last = self.repeat(last, low, high, c, pos)
                pos = self.space(pos + 1, nested)
            elif c == "{":
                at = pos
                pos, low = self.count(self.space(pos + 1, nested))
                pos = self.space(pos, nested)
                high: int | None = low
                if self.char(pos) == ",":
                    pos = self.space(pos + 1, nested)
                    high = None
                    if "0" <= self.char(pos) <= "9":
                        pos, high = self.count(pos)
                        pos = self.space(pos, nested)
                elif self.char(pos) != "}":
                    raise _RefusedError("expecting ',' or '}' in {m,n}", pos)
                if self.char(pos) != "}":
                    raise _RefusedError("expecting '}' to close {m,n}", pos)
                last = self.repeat(last, low, high, self.text[at:pos + 1], at)
                pos = self.space(pos + 1, nested)
            elif opened:
                if not c:
                    raise _RefusedError("a '(' is never closed", opened[-1])
                raise _RefusedError(f"unexpected {c!r} inside a group", pos)
            else:
                return pos


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, min(pos, len(text))) + 1


def _size_problem(text: str, limit: int, what: str) -> GrammarProblem | None:
    if "\x00" in text:
        return GrammarProblem(f"the {what} contains a NUL character", _line_of(text, text.index("\x00")))
    size = len(text) if len(text) > limit else len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        return GrammarProblem(f"the {what} is {size:,} bytes; the limit is {limit:,} bytes")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return GrammarProblem(f"the {what} is not valid Unicode text", _line_of(text, exc.start))
    return None


@functools.lru_cache(maxsize=128)
def _cached_grammar_problem(text: str) -> GrammarProblem | None:
    parser = _GbnfParser(text)
    try:
        parser.parse()
    except _RefusedError as refused:
        return GrammarProblem(refused.message, _line_of(text, refused.pos))
    return None


def grammar_problem(text: str) -> GrammarProblem | None:
    """Why llama.cpp must not see this GBNF grammar (syntax, undefined rules, no `root`, or a limit), or None.
    Linear time, no recursion: safe on any input."""
    if not isinstance(text, str):
        return GrammarProblem(f"a grammar must be text, got {type(text).__name__}")
    problem = _size_problem(text, MAX_GRAMMAR_BYTES, "grammar")
    return problem or _cached_grammar_problem(text)


def check_grammar(text: str) -> str:
    """`text` when it is a grammar llama.cpp may parse; raises GrammarError otherwise."""
    problem = grammar_problem(text)
    if problem is not None:
        raise GrammarError(problem)
    return text


# ------------------------------------------------------------------ JSON schemas


def _schema_bounds_problem(schema: Any) -> str | None:
    """Depth and counts of a parsed schema, walked with an explicit stack."""
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            return f"the JSON schema is nested more than {MAX_SCHEMA_DEPTH} levels deep"
        if isinstance(value, dict):
            for key, item in value.items():
                if key in _SCHEMA_COUNT_KEYS and isinstance(item, int | float) and not isinstance(item, bool) \
                        and not -MAX_SCHEMA_COUNT <= item <= MAX_SCHEMA_COUNT:
                    return f"{key}: {item} is over the limit of {MAX_SCHEMA_COUNT}"
                if key == "pattern" and isinstance(item, str):
                    problem = _pattern_count_problem(item)
                    if problem:
                        return problem
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
    return None


def _pattern_count_problem(pattern: str) -> str | None:
    """A `{m,n}` count over the limit in a schema's `pattern` (the converter writes each repetition out)."""
    i, n = 0, len(pattern)
    while i < n:
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "{":
            j = i + 1
            while j < n and (pattern[j].isdigit() or pattern[j] == ","):
                j += 1
            counts = [part for part in pattern[i + 1:j].split(",") if part]
            if j < n and pattern[j] == "}" and any(len(c) > _MAX_COUNT_DIGITS or int(c) > MAX_SCHEMA_COUNT
                                                     for c in counts):
                return f"pattern {pattern[:40]!r}: a repetition count is over the limit of {MAX_SCHEMA_COUNT}"
        i += 1
    return None


def _convert_schema(schema_text: str) -> str:
    """GBNF from llama-cpp-python's converter (imported here: it loads libllama)."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return str(json_schema_to_gbnf(schema_text))


@functools.lru_cache(maxsize=64)
def _cached_schema_grammar(schema_text: str) -> str | GrammarProblem:
    try:
        schema = json.loads(schema_text)
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        return GrammarProblem(f"the JSON schema is not valid JSON: {exc}")
    if not isinstance(schema, dict | bool):
        return GrammarProblem("a JSON schema must be an object such as {\"type\": \"string\"}")
    problem = _schema_bounds_problem(schema)
    if problem:
        return GrammarProblem(problem)
    try:
        grammar = _convert_schema(schema_text)
    except Exception as exc:  # the converter raises bare Exceptions/ValueErrors on unsupported schemas
        return GrammarProblem(f"the JSON schema cannot be turned into a grammar: {exc}")
    produced = grammar_problem(grammar)
    if produced is not None:
        return GrammarProblem(f"the grammar made from the JSON schema is refused: {produced}")
    return grammar


def schema_grammar(schema_text: str) -> str:
    """The checked GBNF grammar for a JSON schema (JSON text); raises GrammarError when the schema is too
    big or deep, cannot be converted, or converts to a grammar the checker refuses."""
    if not isinstance(schema_text, str):
        raise GrammarError(GrammarProblem(f"a JSON schema must be JSON text, got {type(schema_text).__name__}"))
    problem = _size_problem(schema_text, MAX_SCHEMA_BYTES, "JSON schema")
    result = problem or _cached_schema_grammar(schema_text)
    if isinstance(result, GrammarProblem):
        raise GrammarError(result)
    return result


def schema_problem(schema_text: str) -> GrammarProblem | None:
    """Why this JSON schema must not become a llama.cpp grammar, or None."""
    try:
        schema_grammar(schema_text)
    except GrammarError as exc:
        return exc.problem
    return None
