"""How many parses llama.cpp's grammar engine follows at once as text comes in: its parse stacks, simulated over
the checker's rules, to refuse grammars whose stacks multiply at every character.

llama.cpp keeps one stack per way the text so far can be parsed, and checks every token of the vocabulary against
every stack. Where alternatives begin alike and rules can be empty, nested (`e ::= "a" e f g | ""` with f and g
alike), each character multiplies the stacks, so a few tokens in, one token takes minutes. The simulation follows
llama.cpp's advance step exactly (a stack's top is always a character element; a rule reference expands into
each alternative, an empty one into what follows), over a few representative characters, keeping the texts that
make the most stacks (a beam search), within a bounded amount of work.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass

Terminal = tuple[bool, tuple[tuple[int, int], ...]] | None
"""What one grammar element matches: (negated, code point ranges); None for a <token> (no character)."""
Position = tuple[int, int, int]
"""(rule, alternative, element index): where a parse stands in the rules."""
Stack = tuple[Position, ...]

MAX_GROWTH_STACKS = 4096
"""Most parses llama.cpp may have to follow at once after some text, as many as the checker lets a rule begin with
(grammar_check.MAX_PARSE_STACKS; each costs a pass over the vocabulary at every token). A JSON schema of 300
optional properties makes about 900 after its `{`, and fewer after that; the ambiguous grammars this refuses pass
4,096 within a few characters and go on multiplying."""
GROWTH_CHARS = 12
"""Length of the texts tried."""
BEAM = 4
"""Texts kept at each length (those with the most stacks)."""
MAX_WORK = 200_000
"""Stack expansions the simulation may spend; past it the grammar is given the benefit of the doubt (the engine's
per-token time limit still holds)."""
MAX_SAMPLE_CHARS = 48
"""Representative characters tried at each step."""
GROWTH_RATIO = 1.25
GROWTH_RUN = 6
GROWTH_FLOOR = 64
"""Stacks that multiply by GROWTH_RATIO or more at each of the last GROWTH_RUN characters, to GROWTH_FLOOR or more,
keep multiplying (`e ::= "a" e f | ""`, `f ::= "a" f e | ""` grows by the golden ratio: 985 after 12
characters, a million after 27): refused too. Growth by a constant per character (a long repetition) is not."""


class _OutOfWorkError(Exception):
    pass


@dataclass(frozen=True)
class Growth:
    """A text after which llama.cpp would follow more than MAX_GROWTH_STACKS parses."""

    chars: int
    stacks: int
    rule: int
    """The rule that holds the most pending parses (where to look)."""


def _matches(terminal: Terminal, code: int) -> bool:
    if terminal is None:
        return False
    negated, ranges = terminal
    return any(lo <= code <= hi for lo, hi in ranges) != negated


class _Simulation:
    def __init__(self, bodies: list[list[list[int]]], terminals: list[Terminal]) -> None:
        self.bodies = bodies
        self.terminals = terminals
        self.work = 0

    def terminal(self, element: int) -> Terminal:
        return self.terminals[-element - 1]

    def advance(self, stack: Stack, out: set[Stack]) -> None:
        """llama_grammar_advance_stack: the stacks whose top is a character element (or that are empty)."""
        work = [stack]
        while work:
            self.work += 1
            if self.work > MAX_WORK:
                raise _OutOfWorkError
            current = work.pop()
            if not current:
                out.add(current)
                continue
            rule, alt, index = current[-1]
            sequence = self.bodies[rule][alt]
            element = sequence[index]
            if element < 0:
                out.add(current)
                continue
            base = current[:-1] + (((rule, alt, index + 1),) if index + 1 < len(sequence) else ())
            for number, body in enumerate(self.bodies[element]):
                work.append((*base, (element, number, 0)) if body else base)

    def start(self, root: int) -> set[Stack]:
        stacks: set[Stack] = set()
        for number, body in enumerate(self.bodies[root]):
            self.advance(((root, number, 0),) if body else (), stacks)
        return stacks

    def step(self, stacks: set[Stack], code: int) -> set[Stack]:
        """llama_grammar_accept for one character."""
        after: set[Stack] = set()
        for stack in stacks:
            if not stack:
                continue
            rule, alt, index = stack[-1]
            if not _matches(self.terminal(self.bodies[rule][alt][index]), code):
                continue
            rest = stack[:-1] + (((rule, alt, index + 1),) if index + 1 < len(self.bodies[rule][alt]) else ())
            self.advance(rest, after)
        return after


def _sample_characters(terminals: list[Terminal]) -> list[int]:
    """A character from each range and from each gap between ranges (what a negated class or `.` matches)."""
    points = {0x61}
    for terminal in terminals:
        if terminal is not None:
            for lo, hi in terminal[1]:
                points.update((lo, hi + 1))
    chars = sorted(p for p in points if p < 0x110000 and not 0xD800 <= p <= 0xDFFF)
    if len(chars) > MAX_SAMPLE_CHARS:
        step = len(chars) / MAX_SAMPLE_CHARS
        chars = [chars[int(i * step)] for i in range(MAX_SAMPLE_CHARS)]
    return chars


def stack_growth(bodies: list[list[list[int]]], terminals: list[Terminal], root: int) -> Growth | None:
    """A text of at most GROWTH_CHARS characters after which llama.cpp would follow more than MAX_GROWTH_STACKS
    parses of this grammar at once, or None (none found within the work bound). Rules: alternatives of element
    lists, rule ids >= 0 and character elements < 0 (element e is terminals[-e - 1]); no left recursion."""
    sim = _Simulation(bodies, terminals)
    chars = _sample_characters(terminals)
    widest: list[int] = []
    try:
        frontier = [sim.start(root)]
        seen: set[frozenset[Stack]] = set()
        for length in range(1, GROWTH_CHARS + 1):
            grown: list[set[Stack]] = []
            for stacks in frontier:
                for code in chars:
                    after = sim.step(stacks, code)
                    if len(after) > MAX_GROWTH_STACKS:
                        held = Counter(rule for stack in after for rule, _, _ in stack[:-1] if rule != root)
                        return Growth(length, len(after), held.most_common(1)[0][0] if held else root)
                    key = frozenset(after)
                    if after and key not in seen:
                        seen.add(key)
                        grown.append(after)
            frontier = sorted(grown, key=len, reverse=True)[:BEAM]
            if not frontier:
                return None
            widest.append(len(frontier[0]))
            if _multiplying(widest):
                held = Counter(rule for stack in frontier[0] for rule, _, _ in stack[:-1] if rule != root)
                return Growth(length, len(frontier[0]), held.most_common(1)[0][0] if held else root)
    except _OutOfWorkError:
        return None
    return None


def _multiplying(widest: list[int]) -> bool:
    run = widest[-GROWTH_RUN - 1:]
    return len(run) == GROWTH_RUN + 1 and run[-1] >= GROWTH_FLOOR and all(
        after >= GROWTH_RATIO * before for before, after in itertools.pairwise(run))
