"""Per-sequence llama.cpp sampler chains built from SamplingParams (penalties, truncation, temperature, seed,
grammar)."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from backends.base import BackendError, SamplingParams
from backends.grammar.grammar_constraints import checked_grammar

PENALTY_LAST_N = 64
"""Tokens the repetition penalty looks back over (llama.cpp's default)."""
_SEED_MASK = 0xFFFFFFFF
_RANDOM_SEED = 0xFFFFFFFF  # llama.cpp reads this seed as "pick one at random": never pass it through
_TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])  # struct llama_token_data


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
