"""EngineView: the part of the batched engine that jobs may use while the engine thread drives them."""

from __future__ import annotations

import collections
from typing import Any, Protocol

import numpy as np

from backends.llama.worker.grammar_worker import GrammarPool
from backends.llama.worker.llama_model import LlamaModel
from backends.llama.worker.prefix_cache import SequenceTable


class EngineView(Protocol):
    """What a job sees of the engine (engine thread only): the llama.cpp handles and model, the sequence
    table, the shared counters, and the KV/logits operations. backends.llama.worker.engine.Engine implements it."""

    lib: Any
    """The llama_cpp module (low-level API)."""
    ctx: Any
    """The llama_context the batch was decoded in (read by the samplers)."""
    model: LlamaModel
    table: SequenceTable
    stats: collections.Counter[str]
    grammar_pool: GrammarPool
    """Child processes that run grammar-constrained sampling's grammar work (stoppable by cancel and time)."""

    def copy_prefix(self, src: int, dst: int, length: int) -> None:
        """Share the first `length` KV cells of sequence `src` with sequence `dst`."""
        ...

    def remove_seq_cells(self, seq_id: int) -> None:
        """Drop every KV cell of sequence `seq_id`."""
        ...

    def trim_seq(self, seq_id: int, from_pos: int) -> None:
        """Drop the KV cells of sequence `seq_id` at positions >= `from_pos` (rejected speculative drafts)."""
        ...

    def logits_row(self, row: int) -> np.ndarray:
        """The logits of batch row `row` of the last decode (a view, valid until the next decode)."""
        ...

    def reserved_free_ids(self) -> int:
        """Free sequence ids a job may not take opportunistically."""
        ...
