"""Minimum Bayes risk selection and its utility functions (exact, token F1, ROUGE-L, chrF).

MBR picks the candidate with the highest expected utility against the others, the others standing
in for samples of the model's distribution: argmax_i sum_{j != i} w_j u(y_i, y_j) / sum_{j != i} w_j.
Weights w_j default to 1 (plain MBR); passing verifier scores gives a score-weighted MBR.
Ties go to the lowest index. Tokens are Unicode word characters, case-folded.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Utility = Callable[[str, str], float]
UTILITIES = ("exact", "token_f1", "rouge_l", "chrf")

_WORD = re.compile(r"\w+", re.UNICODE)


def tokens(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def exact_match(a: str, b: str) -> float:
    """1 when the texts are equal after whitespace and case normalisation."""
    norm = lambda s: " ".join(unicodedata.normalize("NFKC", s).casefold().split())  # noqa: E731
    return 1.0 if norm(a) == norm(b) else 0.0


def _f1(overlap: float, n_a: int, n_b: int) -> float:
    if overlap <= 0 or n_a == 0 or n_b == 0:
        return 0.0
    precision, recall = overlap / n_a, overlap / n_b
    return 2 * precision * recall / (precision + recall)


def token_f1(a: str, b: str) -> float:
    """SQuAD-style bag-of-tokens F1; two empty texts agree fully."""
    ta, tb = tokens(a), tokens(b)
    if not ta and not tb:
        return 1.0
    overlap = sum((Counter(ta) & Counter(tb)).values())
    return _f1(overlap, len(ta), len(tb))


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (O(len(a) * len(b)) time, O(len(b)) memory)."""
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(a: str, b: str) -> float:
    """ROUGE-L F1 over tokens (LCS-based; symmetric with beta = 1)."""
    ta, tb = tokens(a), tokens(b)
    if not ta and not tb:
        return 1.0
    return _f1(lcs_length(ta, tb), len(ta), len(tb))


def _char_ngrams(text: str, n: int) -> Counter[str]:
    s = "".join(unicodedata.normalize("NFKC", text).split())  # chrF ignores whitespace
    return Counter(s[i : i + n] for i in range(len(s) - n + 1))


def chrf(hypothesis: str, reference: str, max_n: int = 6, beta: float = 2.0) -> float:
    """chrF (Popović 2015): character n-gram F-beta, precision and recall averaged over n = 1..max_n
    (orders longer than both texts are skipped). Not symmetric: recall weighs beta times more."""
    precisions, recalls = [], []
    for n in range(1, max_n + 1):
        hyp, ref = _char_ngrams(hypothesis, n), _char_ngrams(reference, n)
        if not hyp and not ref:
            continue
        overlap = sum((hyp & ref).values())
        precisions.append(overlap / sum(hyp.values()) if hyp else 0.0)
        recalls.append(overlap / sum(ref.values()) if ref else 0.0)
    if not precisions:
        return 1.0  # both empty
    p, r = sum(precisions) / len(precisions), sum(recalls) / len(recalls)
    if p == 0 and r == 0:
        return 0.0
    b2 = beta * beta
    return (1 + b2) * p * r / (b2 * p + r)


def utility(name: str) -> Utility:
    table: dict[str, Utility] = {"exact": exact_match, "token_f1": token_f1, "rouge_l": rouge_l, "chrf": chrf}
    if name not in table:
        raise ValueError(f"unknown MBR utility {name!r}; use one of {', '.join(UTILITIES)}")
    return table[name]


@dataclass
class MbrResult:
    winner: int | None
    expected_utility: list[float]
    ties: list[int]


def mbr_select(texts: Sequence[str], util: Utility, weights: Sequence[float] | None = None) -> MbrResult:
    """The index with the highest (weighted) mean utility against every other candidate.
    One candidate wins alone (expected utility 1); an empty list has no winner."""
    n = len(texts)
    if n == 0:
        return MbrResult(None, [], [])
    if n == 1:
        return MbrResult(0, [1.0], [])
    w = [1.0] * n if weights is None else [max(0.0, float(x)) for x in weights]
    expected = []
    for i in range(n):
        total_w = sum(w[j] for j in range(n) if j != i)
        if total_w <= 0:
            expected.append(0.0)
            continue
        expected.append(sum(w[j] * util(texts[i], texts[j]) for j in range(n) if j != i) / total_w)
    best = max(expected)
    tied = [i for i, e in enumerate(expected) if abs(e - best) <= 1e-12]
    return MbrResult(tied[0], expected, tied if len(tied) > 1 else [])
