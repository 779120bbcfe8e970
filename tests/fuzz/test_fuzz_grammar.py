"""Fuzz: GBNF grammars (a grammar of grammars, deep nesting, edits, random text) and JSON schemas through the
bounded checker, which answers a grammar or a GrammarProblem; and grammars it accepts through llama.cpp's
own parser in a child process, which must parse them without crashing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.targets import TARGETS, run_property


def test_grammars_are_accepted_or_refused_with_a_problem(tmp_path: Path) -> None:
    run_property(TARGETS["grammar"], tmp_path)


def test_json_schemas_become_checked_grammars_or_are_refused(tmp_path: Path) -> None:
    run_property(TARGETS["json_schema"], tmp_path)


def test_grammars_the_checker_accepts_parse_in_llama_cpp(tmp_path: Path) -> None:
    run_property(TARGETS["llama_grammar"], tmp_path, share=0.6)


@pytest.mark.model
def test_ambiguous_grammars_end_at_their_cap_on_the_bundled_model(tmp_path: Path) -> None:
    """Grammars that multiply llama.cpp's parse stacks finish, fail with a clear error or stop at their cap."""
    run_property(TARGETS["grammar_sampling"], tmp_path, share=0.02)
