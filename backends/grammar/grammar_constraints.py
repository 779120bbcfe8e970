"""The grammar a request is constrained by: its GBNF or its JSON schema's, checked by the bounded checker before
any engine (llama.cpp or a remote server) sees it."""

from __future__ import annotations

import json

from backends.base import BackendError, SamplingParams
from backends.grammar.grammar_check import (
    GRAMMAR_HINT,
    MAX_SCHEMA_BYTES,
    SCHEMA_HINT,
    GrammarError,
    check_grammar,
    schema_grammar,
)


def schema_to_grammar(json_schema: str) -> str:
    """GBNF text constraining output to a JSON schema (given as JSON text). The schema is bounded (size, depth,
    counts) before the converter runs, and the grammar it produces is checked like any other."""
    if len(json_schema) <= MAX_SCHEMA_BYTES:  # a bigger one is refused by size, unread
        try:
            json.loads(json_schema)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise BackendError(f"json_schema is not valid JSON: {exc}. Give the schema as JSON text.") from exc
    try:
        return schema_grammar(json_schema)
    except GrammarError as exc:
        raise BackendError(f"json_schema refused: {exc} ({SCHEMA_HINT}).") from exc


def checked_grammar(grammar: str) -> str:
    """`grammar` once the bounded checker has passed it; BackendError otherwise. llama.cpp's own parser
    recurses once per nested group (thousands of them overflow the C stack and kill the process) and
    expands repetitions without limit, so no grammar reaches it unchecked."""
    try:
        return check_grammar(grammar)
    except GrammarError as exc:
        raise BackendError(f"The grammar does not parse or breaks a limit, so llama.cpp never sees it: {exc} "
                           f"({GRAMMAR_HINT}).") from exc


def grammar_for(params: SamplingParams) -> str | None:
    """The checked grammar a request is constrained by (its GBNF, or its JSON schema's), or None."""
    if params.grammar:
        return checked_grammar(params.grammar)
    if params.json_schema:
        return schema_to_grammar(params.json_schema)
    return None
