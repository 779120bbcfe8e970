"""A bounded pure-Python GBNF checker and JSON-schema guard: nothing unchecked reaches llama.cpp's grammar parser.

llama.cpp parses GBNF recursively (one C stack frame set per nested group) and expands `{m,n}` repetitions into
copies and rule chains; a grammar with thousands of nested parentheses overflows the stack (the process dies
with SIGSEGV), `{5,2}` loops forever and huge counts exhaust memory. This module parses the same syntax
iteratively, with explicit limits, and says what is wrong and on which line of the grammar. It also builds the
rules as llama.cpp does (groups and repetitions become rules of their own) to refuse what llama.cpp refuses when
it sets a grammar up (left recursion, over 2,000 stacked copies) and what stalls that setup (alternatives that
begin alike, nested, multiply the parse stacks it follows), and, simulating those stacks over a few characters
(grammar_stacks.py), grammars whose stacks multiply with every character of the output. JSON schemas are
bounded (size, depth, counts) before llama-cpp-python's converter runs, and the grammar it produces is checked the
same way.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from backends.grammar.grammar_stacks import MAX_GROWTH_STACKS, Terminal, stack_growth

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
MAX_STACKED_COPIES = 2000
"""llama.cpp's own limit (MAX_REPETITION_THRESHOLD) on the product of repetitions stacked on one item, `x{50}{50}`."""
MAX_PARSE_STACKS = 4096
"""Most ways one rule may begin (the parse stacks llama.cpp builds when it expands it, at start and at every
token). Alternatives that begin alike multiply them: 17 nested rules `r ::= s "y" | s "z" | "x"` keep llama.cpp's
grammar setup busy for minutes, 12 (4,096 ways) for milliseconds; a JSON schema of 300 optional properties
makes about 900."""
MAX_LEFT_WALK = 1_000_000
"""Most rule visits of llama.cpp's left-recursion check, which walks a rule again every time it meets it (a JSON
schema of 300 optional properties makes about 140,000)."""

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
        self.shapes = _RuleShapes()
        """The rules as llama.cpp builds them (for left recursion and ambiguity, checked after the parse)."""

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
        self.shapes.repeat(low, high, op, pos)
        return (last * low + (1 if n_opt > 0 else 0)) or None  # the copies and the rule of the optional ones

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
        self.shapes.check()

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
        self.shapes.begin(name, start)
        pos = self.alternatives(self.space(pos + 3, True))
        self.shapes.end()
        c = self.char(pos)
        if c == "\r":
            pos += 2 if self.char(pos + 1) == "\n" else 1
        elif c == "\n":
            pos += 1
        elif c:
            raise _RefusedError(f"expecting the end of the line, found {c!r}"
                           + (" (a ')' without its '(')" if c == ")" else ""), pos)
        return self.space(pos, True)

    def atom(self, pos: int, nested: bool) -> tuple[int, int | None] | None:
        """(position past it, its size for a repetition) of the literal, class, rule name, token or `.` at pos;
        None when something else starts there."""
        c = self.char(pos)
        if c == '"':
            start = pos
            pos, size = self.literal(pos)
            self.add(size, 0, pos)
            self.shapes.items([self.shapes.terminal((False, ((code, code),)))  # "" adds nothing (and cannot
                               for code in _codes(self.text[start + 1:pos - 1])])  # be repeated)
            return self.space(pos, nested), size or None
        if c == "[":
            start = pos
            pos, size = self.char_class(pos)
            self.add(size, 0, pos)
            self.shapes.items([self.shapes.terminal(_class(self.text[start + 1:pos - 1]))] if size else [])
            return self.space(pos, nested), size or None
        if c and _is_word_char(c):
            end = self.name_end(pos)
            self.refs.setdefault(self.text[pos:end], pos)
            self.add(1, 0, pos)
            self.shapes.item(self.shapes.rule_id(self.text[pos:end], pos))
            return self.space(end, nested), 1
        if c and c in "<!":
            pos = self.token(pos)
            self.add(1, 0, pos)
            self.shapes.items([self.shapes.terminal(None)])
            return self.space(pos, nested), 1
        if c == ".":
            self.add(1, 0, pos)
            self.shapes.items([self.shapes.terminal((True, ()))])
            return self.space(pos + 1, nested), 1
        return None

    def bounded_repeat(self, pos: int, last: int | None, nested: bool) -> tuple[int, int | None]:
        """Past a `{m}`, `{m,}` or `{m,n}` at pos, applied to the item before it."""
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
        return self.space(pos + 1, nested), last

    def alternatives(self, pos: int) -> int:
        """Past the body of one rule: alternatives of sequences, groups nested with an explicit stack."""
        opened: list[int] = []  # positions of the open '('
        last: int | None = None  # size of the item a repetition would apply to
        while True:
            nested = bool(opened)
            c = self.char(pos)
            atom = self.atom(pos, nested)
            if atom is not None:
                pos, last = atom
            elif c == "(":
                if len(opened) >= MAX_NESTING:
                    raise _RefusedError(f"groups are nested more than {MAX_NESTING} deep", pos)
                opened.append(pos)
                self.add(2, 1, pos)
                last = None
                self.shapes.open(pos)
                pos = self.space(pos + 1, True)
            elif c == ")" and opened:
                opened.pop()
                last = 1
                self.shapes.close()
                pos = self.space(pos + 1, bool(opened))
            elif c == "|":
                self.add(1, 0, pos)
                last = None
                self.shapes.alternative()
                pos = self.space(pos + 1, True)
            elif c and c in "*+?":
                low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
                last = self.repeat(last, low, high, c, pos)
                pos = self.space(pos + 1, nested)
            elif c == "{":
                pos, last = self.bounded_repeat(pos, last, nested)
            elif opened:
                if not c:
                    raise _RefusedError("a '(' is never closed", opened[-1])
                raise _RefusedError(f"unexpected {c!r} inside a group", pos)
            else:
                return pos


_TERMINAL = -1
"""Elements of a rule's shape below 0 match text (a character of a literal, a class, a token or `.`: element e is
_RuleShapes.terminals[-e - 1]); rule references are ids >= 0."""
_ESCAPED = {"t": 9, "n": 10, "r": 13, "\\": 92, '"': 34, "[": 91, "]": 93, "-": 45}


def _code(text: str, i: int) -> tuple[int, int]:
    """(code point, index after it) of one character of a checked literal or class, escapes decoded."""
    if text[i] != "\\":
        return ord(text[i]), i + 1
    e = text[i + 1]
    if e in _HEX_ESCAPES:
        size = _HEX_ESCAPES[e]
        return int(text[i + 2:i + 2 + size], 16), i + 2 + size
    return _ESCAPED[e], i + 2


def _codes(text: str) -> list[int]:
    out, i = [], 0
    while i < len(text):
        code, i = _code(text, i)
        out.append(code)
    return out


def _class(text: str) -> Terminal:
    """What a checked character class `[...]` (its text between the brackets) matches."""
    negated = text.startswith("^")
    i = 1 if negated else 0
    ranges = []
    while i < len(text):
        lo, i = _code(text, i)
        hi = lo
        if i + 1 < len(text) and text[i] == "-":
            hi, i = _code(text, i + 1)
        ranges.append((lo, hi))
    return negated, tuple(ranges)


@dataclass
class _Sequence:
    """The alternatives of one rule (or group) being read, and the item a repetition would apply to."""

    rule: int
    alternatives: list[list[int]]
    items: list[int]
    start: int | None = None
    """Where the last item begins in `items` (llama.cpp's last_sym_start); None: nothing to repeat."""
    copies: int = 1
    """Product of the repetitions stacked on the last item (llama.cpp's n_prev_rules)."""
    first_rule: int = 0
    """A group's: the number of rules before it (a group counts as copies of each rule made inside it)."""


class _RuleShapes:
    """The rules as llama.cpp builds them from the text (groups and repetitions become rules of their own), kept
    as the rule ids each alternative begins with; `check()` then refuses what llama.cpp refuses (left recursion)
    or chokes on (rules that can begin in very many ways)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.bodies: list[list[list[int]]] = []
        self.names: list[str] = []
        self.where: list[int] = []
        self.open_: list[_Sequence] = []
        self.terminals: list[Terminal] = []
        self._terminal_ids: dict[Terminal, int] = {}

    def terminal(self, matches: Terminal) -> int:
        """The element (< 0) of a character element that matches `matches`."""
        if matches not in self._terminal_ids:
            self.terminals.append(matches)
            self._terminal_ids[matches] = -len(self.terminals)
        return self._terminal_ids[matches]

    def _new(self, name: str, pos: int) -> int:
        self.bodies.append([[]])
        self.names.append(name)
        self.where.append(pos)
        return len(self.bodies) - 1

    def rule_id(self, name: str, pos: int) -> int:
        if name not in self.ids:
            self.ids[name] = self._new(name, pos)
        return self.ids[name]

    def begin(self, name: str, pos: int) -> None:
        rule = self.rule_id(name, pos)
        self.where[rule] = pos
        self.open_ = [_Sequence(rule, [], [])]

    def open(self, pos: int) -> None:
        before = len(self.bodies)
        self.open_.append(_Sequence(self._new(self.names[self.open_[0].rule], pos), [], [], first_rule=before))

    def alternative(self) -> None:
        seq = self.open_[-1]
        seq.alternatives.append(seq.items)
        seq.items, seq.start = [], None

    def close(self) -> None:
        self.alternative()
        done = self.open_.pop()
        self.bodies[done.rule] = done.alternatives  # a rule defined twice keeps its last body, as in llama.cpp
        self.item(done.rule)
        if self.open_:
            self.open_[-1].copies = max(1, len(self.bodies) - done.first_rule)

    def end(self) -> None:
        self.close()

    def item(self, element: int | None) -> None:
        self.items([] if element is None else [element])

    def items(self, elements: list[int]) -> None:
        """One item (what a repetition after it repeats): a rule, a group, a class, or a literal's characters."""
        if not self.open_:
            return
        seq = self.open_[-1]
        seq.start, seq.copies = len(seq.items), 1
        seq.items.extend(elements)

    def repeat(self, low: int, high: int | None, op: str, pos: int) -> None:
        """llama.cpp's handle_repetitions: S{m,n} -> S..S (m times) and n-m nested optional rules of S."""
        seq = self.open_[-1]
        assert seq.start is not None
        seq.copies *= high if high else (low or 1)
        if seq.copies > MAX_STACKED_COPIES:
            raise _RefusedError(f"the repetition {op} makes {seq.copies:,} copies of what it repeats (repetitions "
                                "stacked on one item, or a group holding repetitions, multiply), over llama.cpp's "
                                f"limit of {MAX_STACKED_COPIES:,}: move the inner repetition into a rule of its own",
                                pos)
        prev = seq.items[seq.start:]
        if low == 0:
            del seq.items[seq.start:]
        else:
            seq.items.extend(prev * (low - 1))
        optional = 1 if high is None else high - low
        last = -1
        for i in range(optional):
            rule = self._new(self.names[self.open_[0].rule], pos)
            tail = [rule if high is None else last] if (i > 0 or high is None) else []
            self.bodies[rule] = [prev + tail, []]
            last = rule
        if optional:
            seq.items.append(last)

    # ---------------------------------------------------------------- what llama.cpp makes of the rules

    def check(self) -> None:
        self.open_ = []
        count = len(self.bodies)
        direct_empty = [any(not alt for alt in body) for body in self.bodies]
        # llama.cpp's left-recursion check walks into each leading rule, and on past it while that rule has an
        # empty alternative; it walks a rule again each time it meets it (so count the visits)
        leading = [[e for alt in body for e in _lead(alt, lambda r: direct_empty[r])] for body in self.bodies]
        visits = _post_order_sum(leading, count, on_cycle=self._left_recursion)
        worst = max(range(count), key=visits.__getitem__)
        if sum(visits) > MAX_LEFT_WALK:
            raise _RefusedError(f"rule {self.names[worst]!r} begins with rules that begin with rules... in too many "
                                f"ways: llama.cpp's left-recursion check would walk more than {MAX_LEFT_WALK:,} rules",
                                self.where[worst])
        ways = _begin_ways(self.bodies, _nullable(self.bodies))
        over = [rule for rule in range(count) if ways[rule] > MAX_PARSE_STACKS]
        if over:
            worst = min(over, key=ways.__getitem__)  # where the ways multiply past the limit, not the root above
            raise _RefusedError(f"rule {self.names[worst]!r} can begin in more than {MAX_PARSE_STACKS:,} ways (its "
                                "alternatives begin with the same rules, nested), and llama.cpp follows every way at "
                                "every token (thousands make it crawl, a few more levels stall it for minutes): make "
                                "the alternatives begin with different text", self.where[worst])
        grown = stack_growth(self.bodies, self.terminals, self.ids["root"]) if "root" in self.ids else None
        if grown is not None:
            raise _RefusedError(f"rule {self.names[grown.rule]!r} is too ambiguous for llama.cpp: after {grown.chars} "
                                f"characters it would follow {grown.stacks:,} parses at once (one per way the text "
                                "can be parsed, each checked against the whole vocabulary at every token; the limit "
                                f"is {MAX_GROWTH_STACKS:,}), and they multiply with every character: make the "
                                "alternatives of a rule begin with different text, and avoid chains of rules that "
                                "can all be empty", self.where[grown.rule])

    def _left_recursion(self, rule: int) -> None:
        raise _RefusedError(f"rule {self.names[rule]!r} can begin with itself (left recursion), which llama.cpp "
                            "refuses: begin each alternative with text, e.g. `list ::= item (\",\" item)*`, and do "
                            "not repeat something that can be empty (`x?*`)", self.where[rule])


def _lead(alt: list[int], passes: Any) -> list[int]:
    """The rules an alternative may begin with: up to its first text, or first rule that cannot be skipped."""
    out = []
    for element in alt:
        if element < 0:
            break
        out.append(element)
        if not passes(element):
            break
    return out


_CAP = 1 << 40


def _post_order(edges: list[list[int]], finish: Callable[[int], None],
                on_cycle: Callable[[int], None] | None = None) -> None:
    """Visit every rule depth-first without recursion, calling `finish(r)` once all of r's edges are done;
    `on_cycle(r)` when an edge leads back to a rule still open (a cycle)."""
    state = [0] * len(edges)  # 0 new, 1 open, 2 done
    for root in range(len(edges)):
        if state[root]:
            continue
        stack = [(root, 0)]
        state[root] = 1
        while stack:
            rule, i = stack[-1]
            if i < len(edges[rule]):
                stack[-1] = (rule, i + 1)
                nxt = edges[rule][i]
                if state[nxt] == 1 and on_cycle is not None:
                    on_cycle(nxt)
                elif state[nxt] == 0:
                    state[nxt] = 1
                    stack.append((nxt, 0))
                continue
            stack.pop()
            state[rule] = 2
            finish(rule)


def _post_order_sum(edges: list[list[int]], count: int, on_cycle: Any) -> list[int]:
    """value(r) = 1 + sum of value(s) over r's edges (with repeats), iteratively; `on_cycle(r)` on a cycle."""
    value = [0] * count

    def finish(rule: int) -> None:
        value[rule] = min(_CAP, 1 + sum(value[s] for s in edges[rule]))

    _post_order(edges, finish, on_cycle)
    return value


def _nullable(bodies: list[list[list[int]]]) -> list[bool]:
    """Which rules can match the empty text (a worklist over the alternatives: linear time)."""
    nullable = [False] * len(bodies)
    waiting: list[list[int]] = []  # per alternative: how many of its elements are not yet known to be skippable
    owner: list[int] = []
    uses: dict[int, list[int]] = {}
    queue = []
    for rule, body in enumerate(bodies):
        for alt in body:
            index = len(waiting)
            owner.append(rule)
            blocked = any(element < 0 for element in alt)
            waiting.append([len(alt) if not blocked else -1])
            if not blocked:
                for element in alt:
                    uses.setdefault(element, []).append(index)
            if not alt:
                queue.append(rule)
    while queue:
        rule = queue.pop()
        if nullable[rule]:
            continue
        nullable[rule] = True
        for index in uses.get(rule, ()):
            waiting[index][0] -= 1
            if waiting[index][0] == 0:
                queue.append(owner[index])
    return nullable


def _begin_ways(bodies: list[list[list[int]]], nullable: list[bool]) -> list[int]:
    """For each rule, how many parse stacks llama.cpp builds when it expands it: each alternative gives one per
    way its first element can begin, plus those of the next one while the elements before can be skipped.
    An open rule (a cycle through empty matches) counts as it stands: llama.cpp dedups it."""
    leading = [[e for alt in body for e in _lead(alt, nullable.__getitem__)] for body in bodies]
    ways = [0] * len(bodies)

    def finish(rule: int) -> None:
        total = 0
        for alt in bodies[rule]:
            way = 1
            for element in reversed(_lead(alt, nullable.__getitem__) or [_TERMINAL]):
                way = 1 if element < 0 else max(ways[element], 1) + (way if nullable[element] else 0)
            total += way
        ways[rule] = min(_CAP, total)

    _post_order(leading, finish)
    return ways


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
            while j < n and ("0" <= pattern[j] <= "9" or pattern[j] == ","):  # ASCII only: int("²") fails
                j += 1
            counts = [part for part in pattern[i + 1:j].split(",") if part]
            if j < n and pattern[j] == "}" and any(len(c) > _MAX_COUNT_DIGITS or int(c) > MAX_SCHEMA_COUNT
                                                     for c in counts):
                return f"pattern {pattern[:40]!r}: a repetition count is over the limit of {MAX_SCHEMA_COUNT}"
        i += 1
    return None


def _convert_schema(schema_text: str) -> str:
    """GBNF from llama-cpp-python's converter, its strings made strict (json_strings.py)."""
    from backends.grammar.json_strings import json_schema_to_gbnf

    return json_schema_to_gbnf(json.loads(schema_text))


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
