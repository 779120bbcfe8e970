"""Token-level (diverse) beam search as an engine job: every live beam is a sequence of the shared batch, a
forked beam copies its parent's KV cells, a finished or pruned beam's sequence is emptied for the next fork."""

from __future__ import annotations

import codecs
import time

import numpy as np

from backends.base import BackendError, CancelToken
from backends.beam_search import Beam, BeamResult, BeamSearch, BeamSettings
from backends.engine_protocol import EngineView
from backends.llama.worker.batch import BatchBuilder
from backends.llama.worker.engine_jobs import Job, PrefillMixin, acquire_with_source
from backends.llama.worker.grammar_worker import GrammarWorker


def top_allowed(logits: np.ndarray, k: int, allowed: np.ndarray | None) -> list[tuple[int, float]]:
    """The k most likely tokens (only allowed ones, when a mask is given) with their untempered log-probabilities."""
    x = logits.astype(np.float64)
    peak = float(x.max())
    lse = peak + float(np.log(np.exp(x - peak).sum()))
    if allowed is not None:
        x = np.where(allowed, x, -np.inf)
    k = min(k, int(np.isfinite(x).sum()))
    if k <= 0:
        return []
    top = np.argpartition(-x, k - 1)[:k]
    top = top[np.lexsort((top, -x[top]))]  # best first, ties by token id: deterministic
    return [(int(t), float(x[t]) - lse) for t in top]


class BeamJob(PrefillMixin, Job):
    """One beam request. Sequence ids: the first holds the prompt only (parked on release, the prefix cache's
    entry), the other n are slots for live beams; each beam decodes its newest token on its slot each step."""

    kind = "beam"

    def __init__(self, prompt_text: str, prompt: list[int], settings: BeamSettings, stop: tuple[str, ...],
                 grammar: str | None, n_ctx_seq: int, cancel: CancelToken | None) -> None:
        super().__init__(cancel)
        self.prompt_text = prompt_text
        self.prompt = prompt
        self.settings = settings
        self.stop = tuple(s for s in stop if s)
        self.grammar = grammar
        self.fed = 0
        self.prompt_row = -1
        self.prompt_logits: np.ndarray | None = None
        self.kv0: list[int] = []
        self._chunk = 0
        self.search: BeamSearch | None = None
        self._slot_of: dict[int, int] = {}  # live beam id -> its sequence id
        self._free_slots: list[int] = []
        self._rows: dict[int, int] = {}  # beam id -> batch row of its newest token
        self._grammars: GrammarWorker | None = None
        self._core: EngineView | None = None
        self.usage.prompt_tokens = len(prompt)
        room = max(0, min(settings.max_tokens, n_ctx_seq - len(prompt)))
        self.max_len = room
        self.reserve_cells = len(prompt) + settings.n * room

    def needed_ids(self) -> int:
        return self.settings.n + 1

    def needs_grammar(self) -> bool:
        return bool(self.grammar)

    def prefix_tokens(self) -> list[int]:
        return self.prompt

    def start(self, core: EngineView) -> None:
        self._core = core
        source, self.seq_ids = acquire_with_source(core, self.prompt, self.needed_ids())
        self._free_slots = list(reversed(self.seq_ids[1:]))
        settings = self.settings if self.max_len >= self.settings.max_tokens else \
            BeamSettings(self.settings.n, self.settings.length_penalty, self.settings.groups,
                         self.settings.diversity_penalty, max(1, self.max_len))
        self.search = BeamSearch(settings, core.model.is_eog)
        if self.grammar:
            self._grammars = core.grammar_pool.lease(self._is_cancelled)
        cached_whole = self._start_prefill(core, self.seq_ids[:1], source)
        self.reserve_cells -= self.fed
        if cached_whole:
            self._expand(core, {b.id: self.prompt_logits for b in self.search.live})  # type: ignore[misc]

    def _is_cancelled(self) -> str | None:
        if not self.cancelled:
            return None
        return (self.cancel.reason if self.cancel is not None else "") or "cancelled"

    def add_prompt_tokens(self, batch: BatchBuilder, budget: int) -> int:
        if self.fed >= len(self.prompt) or budget <= 0:
            return 0
        return self._add_prefill(batch, budget, self.seq_ids[:1])

    def add_decode_tokens(self, batch: BatchBuilder) -> None:
        if self.search is None or self.fed < len(self.prompt):
            return
        self._rows = {}
        n_prompt = len(self.prompt)
        for beam in self.search.live:
            self._rows[beam.id] = batch.add(beam.tokens[-1], n_prompt + len(beam.tokens) - 1,
                                            (self._slot_of[beam.id],), True)

    def rollback(self) -> None:
        self._chunk = 0
        self._rows = {}

    def commit(self, core: EngineView) -> None:
        started = time.perf_counter()
        assert self.search is not None
        if self._commit_prefill(core):
            assert self.prompt_logits is not None
            self._expand(core, {b.id: self.prompt_logits for b in self.search.live})
        elif self._rows:
            rows, self._rows = self._rows, {}
            self._expand(core, {beam_id: core.logits_row(row) for beam_id, row in rows.items()})
        self.usage.decode_s += time.perf_counter() - started

    def _expand(self, core: EngineView, logits: dict[int, np.ndarray]) -> None:
        """One search step: candidates of every live beam, the new beams on their slots, finished ones freed."""
        assert self.search is not None
        k = self.search.s.candidates_per_beam()
        expansions = {beam_id: top_allowed(row, k, self._allowed(beam_id, row.shape[0]))
                      for beam_id, row in logits.items()}
        children = self.search.expand(expansions)
        self.usage.completion_tokens += len(children)
        core.stats["completion_tokens"] += len(children)
        self._place(core, children)
        if self.stop:
            for beam in list(children):
                self._check_stop(core, beam)
        if self.search.done():
            self.done = True

    def _allowed(self, beam_id: int, n_vocab: int) -> np.ndarray | None:
        if self._grammars is None:
            return None
        slot = self._slot_of.get(beam_id, self.seq_ids[0])
        if slot == self.seq_ids[0]:  # a root: a fresh grammar on the prompt's key
            self._grammars.free(slot)
            self._grammars.new(slot, self.grammar or "", self._is_cancelled)
        allowed = self._grammars.allowed(slot, n_vocab, self._is_cancelled)
        if not allowed.any():
            raise BackendError("The grammar allows no token here (no way forward, and it cannot end yet).")
        return allowed

    def _place(self, core: EngineView, children: list[Beam]) -> None:
        """Give each new beam a slot: a parent's first child takes over the parent's slot (its KV cells already
        hold the prefix), every other child gets an emptied slot with its parent's cells copied in (a root's
        children copy the prompt's sequence). Parents left without children free their slots first."""
        old, self._slot_of = self._slot_of, {}
        heirs: dict[int, Beam] = {}
        for child in children:
            if child.parent in old and child.parent not in heirs:
                heirs[child.parent] = child
        for parent, slot in old.items():
            if parent not in heirs:
                self._free_slot(core, slot)
        for parent, child in heirs.items():
            self._slot_of[child.id] = old[parent]
            if self._grammars is not None:
                self._grammars.accept(old[parent], child.tokens[-1])
        n_prompt = len(self.prompt)
        for child in children:
            if child.id in self._slot_of:
                continue
            slot = self._free_slots.pop()
            core.copy_prefix(old.get(child.parent, self.seq_ids[0]), slot, n_prompt + len(child.tokens) - 1)
            self._slot_of[child.id] = slot
            if self._grammars is not None:
                self._grammars.free(slot)
                self._grammars.new(slot, self.grammar or "", self._is_cancelled)
                for token in child.tokens:
                    self._grammars.accept(slot, token)

    def _free_slot(self, core: EngineView, slot: int) -> None:
        core.remove_seq_cells(slot)
        self._free_slots.append(slot)

    def _text(self, core: EngineView, tokens: list[int]) -> str:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pieces = [decoder.decode(core.model.piece(t)) for t in tokens if not core.model.is_eog(t)]
        return "".join(pieces) + decoder.decode(b"", final=True)

    def _check_stop(self, core: EngineView, beam: Beam) -> None:
        """A beam whose text holds a stop string ends there (its text cut before it)."""
        assert self.search is not None
        text = self._text(core, beam.tokens)
        cuts = [at for at in (text.find(s) for s in self.stop) if at >= 0]
        if cuts:
            self.search.finish_beam(beam, "stop", text[: min(cuts)])
            self._free_slot(core, self._slot_of.pop(beam.id))

    def result(self) -> BeamResult:
        assert self.search is not None and self._core is not None
        core = self._core
        hypotheses = self.search.best(lambda b: self._text(core, b.tokens))
        return BeamResult(prompt_text=self.prompt_text, hypotheses=hypotheses,
                          tree=self.search.tree(core.model.piece_text), usage=self.usage)

    def release(self, core: EngineView, park: bool) -> None:
        if self._grammars is not None:
            core.grammar_pool.give_back(self._grammars)
            self._grammars = None
        self._slot_of = {}
        for seq_id in self.seq_ids:
            if park and seq_id == self.seq_ids[0] and self.prompt_logits is not None:
                core.table.park(seq_id, self.kv0, self._park_entry())
            else:
                core.table.release(seq_id)
        self.seq_ids = []
