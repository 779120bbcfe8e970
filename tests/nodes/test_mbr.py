"""MBR utilities and selection with hand-computed values."""

from __future__ import annotations

import pytest

from nodes.algorithms.mbr import chrf, exact_match, lcs_length, mbr_select, rouge_l, token_f1, utility


def test_exact_match_ignores_case_and_spacing() -> None:
    assert exact_match("The  Cat", "the cat") == 1.0
    assert exact_match("cat", "cats") == 0.0


def test_token_f1_by_hand() -> None:
    # tokens a: [the, cat, sat]; b: [the, cat]; overlap 2: P = 2/3, R = 1, F1 = 0.8
    assert token_f1("The cat sat", "the cat") == pytest.approx(0.8)
    assert token_f1("", "") == 1.0
    assert token_f1("a", "") == 0.0


def test_rouge_l_by_hand() -> None:
    # LCS([a, b, c, d], [a, c, d, e]) = 3: P = 3/4, R = 3/4, F = 0.75
    assert lcs_length("abcd", "acde") == 3
    assert rouge_l("a b c d", "a c d e") == pytest.approx(0.75)
    assert rouge_l("x", "y") == 0.0


def test_chrf_identity_disjoint_and_unicode() -> None:
    assert chrf("naïve café", "naïve café") == pytest.approx(1.0)
    assert chrf("abc", "xyz") == 0.0
    assert chrf("", "") == 1.0
    assert 0.0 < chrf("東京都", "東京") < 1.0


def test_chrf_unigram_by_hand() -> None:
    # n = 1 only: hyp "ab", ref "abcd": P = 1, R = 0.5, F2 = 5 * 0.5 / (4 + 0.5) = 0.5556
    assert chrf("ab", "abcd", max_n=1) == pytest.approx(5 * 0.5 / 4.5)


def test_mbr_picks_the_central_candidate() -> None:
    texts = ["the cat sat", "the cat sat down", "a dog ran"]
    result = mbr_select(texts, token_f1)
    # E[0] = (0.857 + 0) / 2, E[1] = (0.857 + 0) / 2, E[2] = 0 -> tie between 0 and 1, lowest index wins
    assert result.winner == 0
    assert result.ties == [0, 1]
    assert result.expected_utility[2] == 0.0


def test_mbr_weights_shift_the_choice() -> None:
    texts = ["a", "b", "b", "a"]
    plain = mbr_select(texts, exact_match)
    assert plain.winner == 0 and plain.ties == [0, 1, 2, 3]
    weighted = mbr_select(texts, exact_match, weights=[0.1, 1.0, 1.0, 0.1])
    # E[0] = 0.1 / 2.1, E[1] = 1.0 / 1.2: the b's win
    assert weighted.winner == 1


def test_mbr_edge_cases() -> None:
    assert mbr_select([], exact_match).winner is None
    assert mbr_select(["only"], exact_match).winner == 0
    with pytest.raises(ValueError):
        utility("bleu")
