"""The pure parts of LLM selection among candidates: GenSelect's pick parsing, majority over draws and groups,
and the pairwise tournament's brackets (knockout, league), judgement orders, match and standings rules.

Conventions: candidates are referred to by their index in the candidate set; a prompt numbers a group's
candidates from 1. Ties are broken by `support` (how many candidates share the candidate's answer: a pick the
sampled majority agrees with), then by the lower index.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

FORMATS = ("knockout", "league")
THINK_CLOSE = "</think>"

_NUM = r"(?:candidate|solution|response|answer|option)?\s*(?:number|no\.|#)?\s*\[?\(?(\d{1,4})\b"
_PICK_MARKERS = (
    re.compile(r"\b(?:best|judg(?:e)?ment|final\s+choice|choice|pick|selected|select)\b\s*"
               r"(?:candidate|solution|response|answer|option)?\s*(?:is|:|=|-|\*\*)?[\s*]*" + _NUM, re.I),
    re.compile(r"\\boxed\{\s*(?:candidate|solution)?\s*(\d{1,4})\s*\}", re.I),
    re.compile(r"\b(?:candidate|solution|response)\s*(?:number|no\.|#)?\s*\[?(\d{1,4})\]?\s+is\s+(?:the\s+)?"
               r"(?:best|most\s+correct|correct)\b", re.I),
)
_WINNER_MARKERS = (  # the letter itself is matched in capitals only: "the winner is a response that..." is no verdict
    re.compile(r"\bwinner\b\s*(?:is\s*:?|:|=|-|\*\*)?[\s*]*(?:response|answer|candidate)?\s*\[?\(?((?-i:[AB]))\b",
               re.I),
    re.compile(r"\b(?:better|best)\s+(?:response|answer)\s*(?:is\s*:?|:)\s*(?:response|answer)?\s*\[?\(?((?-i:[AB]))\b",
               re.I),
    re.compile(r"\b(?:response|answer)\s+((?-i:[AB]))\s+is\s+(?:the\s+)?(?:better|best|more\s+correct|correct)\b",
               re.I),
)


def answer_part(text: str) -> str:
    """The part of a judgement after its thinking block (a thinking model names its pick after `</think>`)."""
    return text.rpartition(THINK_CLOSE)[2] if THINK_CLOSE in text else text


def parse_pick(text: str, count: int) -> int | None:
    """The candidate a GenSelect judgement names, as a 0-based position among its `count` numbered candidates
    (numbered from 1 in the prompt); None when it names none (or a number outside 1..count). The last
    statement wins: "Best: 2" after a discussion of candidate 1 picks 2."""
    body = answer_part(text)
    for marker in _PICK_MARKERS:
        found = [int(m.group(1)) for m in marker.finditer(body)]
        valid = [k for k in found if 1 <= k <= count]
        if valid:
            return valid[-1] - 1
    return None


def parse_pair_winner(text: str) -> str | None:
    """"A" or "B": the response a pairwise judgement names as better (its last statement); None when it names
    neither."""
    body = answer_part(text)
    for marker in _WINNER_MARKERS:
        found = [m.group(1) for m in marker.finditer(body)]
        if found:
            return found[-1]
    return None


def tie_key(index: int, support: Sequence[int] | None) -> tuple[int, int]:
    """Sort key of the tie rule: more support first, then the lower index."""
    return (-(support[index] if support is not None else 0), index)


def majority_pick(picks: Sequence[int | None], support: Sequence[int] | None = None) -> tuple[int | None, list[int]]:
    """The candidate most draws picked (None picks do not vote) and, when several tie, the tied ones; ties go
    to more support, then the lower index. (None, []) when no draw picked anything."""
    counts = Counter(p for p in picks if p is not None)
    if not counts:
        return None, []
    top = max(counts.values())
    tied = sorted((k for k, v in counts.items() if v == top), key=lambda k: tie_key(k, support))
    return tied[0], tied if len(tied) > 1 else []


def split_groups(items: Sequence[int], max_size: int) -> list[list[int]]:
    """`items` in order, cut into the fewest groups of at most `max_size`, their sizes differing by at most one
    (10 by 4: 4, 3, 3)."""
    if max_size < 1:
        raise ValueError(f"max_size must be at least 1, got {max_size}")
    n = len(items)
    if n == 0:
        return []
    groups = math.ceil(n / max_size)
    base, extra = divmod(n, groups)
    out, start = [], 0
    for g in range(groups):
        size = base + (1 if g < extra else 0)
        out.append(list(items[start:start + size]))
        start += size
    return out


def knockout_pairs(entrants: Sequence[int]) -> tuple[list[tuple[int, int]], int | None]:
    """One knockout round: neighbours meet ((0, 1), (2, 3), ...); an odd one out gets a bye."""
    pairs = [(entrants[i], entrants[i + 1]) for i in range(0, len(entrants) - 1, 2)]
    bye = entrants[-1] if len(entrants) % 2 else None
    return pairs, bye


def league_pairs(entrants: Sequence[int]) -> list[tuple[int, int]]:
    """Every pair once (a round robin), in order."""
    return [(a, b) for i, a in enumerate(entrants) for b in entrants[i + 1:]]


def judgement_orders(judgements: int) -> list[bool]:
    """Whether each of a pair's judgements shows the pair swapped (B's text first): alternating, so an even
    count shows both orders equally and position bias cancels."""
    if judgements < 1:
        raise ValueError(f"judgements must be at least 1, got {judgements}")
    return [j % 2 == 1 for j in range(judgements)]


@dataclass
class Match:
    """One pair's judgements: `picks` holds the candidate each judgement chose (None: it named neither)."""

    a: int
    b: int
    picks: list[int | None] = field(default_factory=list)

    @property
    def wins(self) -> tuple[int, int]:
        return sum(p == self.a for p in self.picks), sum(p == self.b for p in self.picks)

    def winner(self, support: Sequence[int] | None = None) -> int:
        """More judgements won; a tie (position bias both ways, or no verdicts) by the tie rule."""
        wa, wb = self.wins
        if wa != wb:
            return self.a if wa > wb else self.b
        return min((self.a, self.b), key=lambda k: tie_key(k, support))

    def tied(self) -> bool:
        wa, wb = self.wins
        return wa == wb


def pick_from_order(verdict: str | None, a: int, b: int, swapped: bool) -> int | None:
    """The candidate a verdict ("A" / "B" / None) names when the prompt showed (a, b), or (b, a) if swapped."""
    if verdict is None:
        return None
    first, second = (b, a) if swapped else (a, b)
    return first if verdict == "A" else second


def league_standings(entrants: Sequence[int], matches: Sequence[Match],
                     support: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """League table, best first: each entrant's judgements won ("wins", what ranks), matches won and played;
    equal wins by matches won, then the tie rule."""
    table = {e: {"index": e, "wins": 0, "matches_won": 0, "played": 0} for e in entrants}
    for m in matches:
        wa, wb = m.wins
        table[m.a]["wins"] += wa
        table[m.b]["wins"] += wb
        table[m.a]["played"] += 1
        table[m.b]["played"] += 1
        if wa != wb:
            table[m.a if wa > wb else m.b]["matches_won"] += 1
    return sorted(table.values(), key=lambda r: (-r["wins"], -r["matches_won"], *tie_key(r["index"], support)))


def answer_support(answers: Sequence[str | None]) -> list[int]:
    """For each candidate, how many candidates share its answer (0 for no answer)."""
    counts = Counter(a for a in answers if a is not None)
    return [counts[a] if a is not None else 0 for a in answers]
