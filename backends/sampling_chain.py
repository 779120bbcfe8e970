"""Per-sequence llama.cpp sampler chains built from SamplingParams (penalties, truncation, temperature, seed,
grammar), and the JSON-schema → GBNF conversion."""

from __future__ import annotations

import ctypes
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from backends.base import BackendError, SamplingParams
from backends.grammar_check import (
    GRAMMAR_HINT,
    MAX_SCHEMA_BYTES,
    SCHEMA_HINT,
    GrammarError,
    check_grammar,
    schema_grammar,
)

PENALTY_LAST_N = 64
"""Tokens the repetition penalty looks back over (llama.cpp's default)."""
_SEED_MASK = 0xFFFFFFFF
_RANDOM_SEED = 0xFFFFFFFF  # llama.cpp reads this seed as "pick one at random": never pass it through
_TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])  # struct llama_token_data


def validate_params(params: SamplingParams) -> None:
    """Reject settings llama.cpp would silently misread, with a hint for each."""
    problems = []
    if params.max_tokens < 0:
        problems.append(f"max_tokens must be >= 0, got {params.max_tokens}")
    if params.temperature < 0:
        problems.append(f"temperature must be >= 0 (0 = greedy), got {params.temperature}")
    if not 0.0 < params.top_p <= 1.0:
        problems.append(f"top_p must be in (0, 1], got {params.top_p}")
    if not 0.0 <= params.min_p < 1.0:
        problems.append(f"min_p must be in [0, 1), got {params.min_p}")
    if not 0.0 < params.typical_p <= 1.0:
        problems.append(f"typical_p must be in (0, 1], got {params.typical_p}")
    if params.repeat_penalty <= 0:
        problems.append(f"repeat_penalty must be > 0 (1 = off), got {params.repeat_penalty}")
    if params.logprobs is not None and not 0 <= params.logprobs <= 20:
        problems.append(f"logprobs must be between 0 and 20 alternatives, got {params.logprobs}")
    if params.grammar and params.json_schema:
        problems.append("give either grammar or json_schema, not both")
    if params.confidence_stop is not None and (
            params.confidence_stop[0] < 1 or not math.isfinite(params.confidence_stop[1])):
        problems.append(f"confidence_stop must be (group >= 1, a finite threshold), got {params.confidence_stop}")
    if problems:
        raise BackendError("Bad sampling settings: " + "; ".join(problems) + ".")


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


def seed32(seed: int) -> int:
    value = seed & _SEED_MASK
    return value - 1 if value == _RANDOM_SEED else value


class SequenceSampler:
    """One llama.cpp sampler chain for one sequence: grammar → penalties → top-k → typical → top-p → min-p →
    temperature → seeded draw (or greedy). Owned by the engine thread; free() releases the C objects."""

    def __init__(
        self,
        lib: Any,
        vocab: Any,
        params: SamplingParams,
        seed: int,
        grammar: str | None = None,
        history: Sequence[int] = (),
    ) -> None:
        self._lib = lib
        if grammar:
            checked_grammar(grammar)  # before any C object exists: nothing to free when it is refused
        self.chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        if grammar:
            grammar_sampler = lib.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), b"root")
            if not grammar_sampler:
                lib.llama_sampler_free(self.chain)
                raise BackendError(
                    "The grammar does not parse (GBNF syntax error, or no 'root' rule). Check it against "
                    "llama.cpp's GBNF guide: rules look like  root ::= \"yes\" | \"no\"."
                )
            lib.llama_sampler_chain_add(self.chain, grammar_sampler)
        if params.repeat_penalty != 1.0:
            penalties = lib.llama_sampler_init_penalties(PENALTY_LAST_N, params.repeat_penalty, 0.0, 0.0)
            for token in history[-PENALTY_LAST_N:]:  # the prompt's tail counts as "already said"
                lib.llama_sampler_accept(penalties, token)
            lib.llama_sampler_chain_add(self.chain, penalties)
        if params.greedy:
            lib.llama_sampler_chain_add(self.chain, lib.llama_sampler_init_greedy())
            return
        if params.top_k > 0:
            lib.llama_sampler_chain_add(self.chain, lib.llama_sampler_init_top_k(params.top_k))
        if params.typical_p < 1.0:
            lib.llama_sampler_chain_add(self.chain, lib.llama_sampler_init_typical(params.typical_p, 1))
        if params.top_p < 1.0:
            lib.llama_sampler_chain_add(self.chain, lib.llama_sampler_init_top_p(params.top_p, 1))
        if params.min_p > 0.0:
            lib.llama_sampler_chain_add(self.chain, lib.llama_sampler_init_min_p(params.min_p, 1))
        lib.llama_sampler_chain_add(self.chain, lib.llama_sampler_init_temp(params.temperature))
        lib.llama_sampler_chain_add(self.chain, lib.llama_sampler_init_dist(seed32(seed)))

    def sample(self, ctx: Any, row: int) -> int:
        """Draw from the logits of batch row `row` and advance the chain's state (grammar, penalties)."""
        return int(self._lib.llama_sampler_sample(self.chain, ctx, row))

    def sample_logits(self, logits: np.ndarray) -> int:
        """Draw from a saved logits row (a cached prompt's last logits) exactly as sample() would."""
        n_vocab = logits.shape[0]
        data = np.empty(n_vocab, dtype=_TOKEN_DATA)
        data["id"] = np.arange(n_vocab, dtype=np.int32)
        data["logit"] = logits
        data["p"] = 0.0
        lib = self._lib
        candidates = lib.llama_token_data_array(
            data=data.ctypes.data_as(lib.llama_token_data_p), size=n_vocab, selected=-1, sorted=False
        )
        lib.llama_sampler_apply(self.chain, ctypes.byref(candidates))
        if not 0 <= candidates.selected < candidates.size:
            raise BackendError("The sampler chain selected no token (a grammar with no way forward?).")
        token = int(candidates.data[candidates.selected].id)
        lib.llama_sampler_accept(self.chain, token)
        return token

    def free(self) -> None:
        if self.chain:
            self._lib.llama_sampler_free(self.chain)
            self.chain = None
