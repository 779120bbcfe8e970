"""Answer extraction and canonicalisation: methods, numeric normalisation, unicode, no-answer cases."""

from __future__ import annotations

import pytest

from nodes.algorithms.extract import (
    AnswerSpec,
    boxed,
    canonical_number,
    extract_answer,
    normalize_answer,
    parse_number,
)


@pytest.mark.parametrize("written", ["1,000", "1000", "1000.0", "1e3", "1E+3", "$1,000", "1000.", "１０００"])
def test_numbers_written_differently_share_one_canonical_form(written: str) -> None:
    assert normalize_answer(written, "auto") == "1000"


@pytest.mark.parametrize(("written", "canonical"), [
    ("0.50", "0.5"), ("-0", "0"), ("−5", "-5"), ("3/4", "0.75"), ("-.5", "-0.5"), ("12%", "12"),
    ("1,234.50", "1234.5"),
])
def test_canonical_numbers(written: str, canonical: str) -> None:
    assert normalize_answer(written, "number") == canonical


def test_parse_number_refuses_non_numbers_and_bad_groupings() -> None:
    assert parse_number("forty-two") is None
    assert parse_number("1,00") is None  # not a thousands grouping
    assert parse_number("") is None
    assert parse_number("1/0") is None
    assert canonical_number(1e21) == "1e+21"


def test_text_answers_are_case_folded_and_unicode_normalised() -> None:
    assert normalize_answer("  Paris. ", "auto") == "paris"
    assert normalize_answer("ＰＡＲＩＳ", "text") == "paris"
    assert normalize_answer("Straße", "text") == normalize_answer("STRASSE", "text") == "strasse"
    assert normalize_answer("**Café**", "auto") == "café"
    assert normalize_answer("   ", "auto") is None
    assert normalize_answer(None, "auto") is None


def test_number_mode_turns_non_numbers_into_no_answer() -> None:
    assert normalize_answer("Paris", "number") is None
    assert normalize_answer("42 apples", "number") == "42"
    assert normalize_answer("between 3 and 4", "number") is None  # two numbers: ambiguous


def test_each_extraction_method() -> None:
    text = "Let me think. 3 + 4 = 7.\nThe answer is 7 apples.\n\\boxed{7}"
    assert extract_answer(text, AnswerSpec("last_number")) == "7"
    assert extract_answer(text, AnswerSpec("boxed")) == "7"
    assert extract_answer(text, AnswerSpec("answer_line", normalize="text")) == "7 apples"
    assert extract_answer(text, AnswerSpec("first_line", normalize="text")) == "let me think. 3 + 4 = 7"
    assert extract_answer("Answer: 12\nAnswer: 13", AnswerSpec("regex", r"Answer:\s*(\d+)")) == "13"
    assert extract_answer("x = 5", AnswerSpec("regex", r"x = \d")) == "x = 5"  # no group: whole match
    assert extract_answer(" Hello  World ", AnswerSpec("full_text", normalize="none")) == "Hello  World"


def test_auto_prefers_boxed_then_answer_line_then_last_number() -> None:
    assert extract_answer("try 3, then \\boxed{1,000} and 9", AnswerSpec()) == "1000"
    assert extract_answer("3 + 4 = 7. Answer: 42 apples", AnswerSpec()) == "42"
    assert extract_answer("so 3 and then 8", AnswerSpec()) == "8"
    assert extract_answer("no digits at all", AnswerSpec()) == "no digits at all"
    assert extract_answer("no digits at all", AnswerSpec(normalize="number")) is None


def test_missing_answers_are_none() -> None:
    assert extract_answer("nothing here", AnswerSpec("last_number")) is None
    assert extract_answer("nothing here", AnswerSpec("boxed")) is None
    assert extract_answer("", AnswerSpec("first_line")) is None
    assert extract_answer("no match", AnswerSpec("regex", r"Answer: (\d+)")) is None
    assert extract_answer("x", AnswerSpec("keep"), upstream="41") == "41"
    assert extract_answer("x", AnswerSpec("keep"), upstream=None) is None


def test_boxed_handles_nested_braces_and_unclosed_boxes() -> None:
    assert boxed(r"\boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    assert boxed(r"\boxed{1} then \boxed{2}") == "2"
    assert boxed(r"\boxed{unclosed") is None


def test_spec_problems_name_the_param() -> None:
    assert AnswerSpec("regex", "").problems()[0][0] == "pattern"
    assert AnswerSpec("regex", "(unclosed").problems()[0][0] == "pattern"
    assert AnswerSpec("guess").problems()[0][0] == "extract"
    assert AnswerSpec().problems() == []
