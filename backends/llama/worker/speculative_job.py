"""A generate request that decodes speculatively: each live sample adds its draft (n-gram lookup, or a draft
model's greedy tokens) behind its next token in the engine's shared batch, and the draft is verified in that same
decode by sampling each row with the sample's own sampler chain; rejected positions leave the KV cache.

Why this is lossless: a prompt-lookup draft, like a greedy draft model's, is a point mass, so the accept / resample
rule of speculative sampling (Leviathan et al. 2023, Chen et al. 2023: accept draft token d with probability
min(1, q(d) / p(d)), else draw from the residual) becomes "accept d with probability q(d), else draw from q without
d", which is the same as drawing t from q and accepting exactly when t = d. Drawing t with the sequence's own
llama.cpp chain (grammar, penalties, top-k, top-p, min-p, temperature, its seeded draw) row after row, in order,
consumes the chain's random numbers exactly as decoding without speculation does, so for the same seed the output is
the same text, up to llama.cpp's batched numerics."""

from __future__ import annotations

import time

from backends.base import GenerateResult, SpeculativeSpec
from backends.engine_protocol import EngineView
from backends.llama.worker.batch import BatchBuilder
from backends.llama.worker.draft_model import DraftModel
from backends.llama.worker.engine_jobs import GenerateJob, GenerateRequest, Sample
from backends.llama.worker.speculative import DraftLength, NgramPool


class SpeculativeGenerateJob(GenerateJob):
    """GenerateJob with n-gram or draft-model drafts verified in the engine's shared decode (module docstring)."""

    kind = "generate"

    def __init__(self, request: GenerateRequest, speculative: SpeculativeSpec,
                 drafter: DraftModel | None = None) -> None:
        super().__init__(request)
        self.speculative = speculative
        self.drafter = drafter
        """method "draft": the draft model proposing each sample's tokens (else n-gram lookup in `pool`)."""
        self.pool = NgramPool(self.prompt, speculative.ngram, len(self.seeds))
        self.lengths = [DraftLength(speculative.k, speculative.adaptive) for _ in self.seeds]
        self.drafted = [0] * len(self.seeds)
        self.accepted_flags: list[list[bool]] = [[] for _ in self.seeds]
        self._drafts: dict[int, tuple[list[int], list[int]]] = {}
        """Sample index -> (draft tokens, their batch rows) in the batch being decoded."""
        self.reserve_cells += len(self.seeds) * speculative.k  # a draft's cells live until it is verified

    # -- the engine's batch ---------------------------------------------------------------------------

    def add_draft_tokens(self, batch: BatchBuilder, budget: int) -> int:
        """Each live sample's draft, behind the next token add_decode_tokens already put in the batch."""
        self._drafts = {}
        n_prompt = len(self.prompt)
        wanted: list[tuple[Sample, int]] = []
        planned = 0
        for sample in self._live:
            if sample.pending < 0 or planned >= budget:
                continue
            n_out = len(sample.tokens)
            room = min(self.params.max_tokens - n_out, self.n_ctx_seq - n_prompt - n_out - 1, budget - planned)
            k = min(self.lengths[sample.index].next(), room)
            if k > 0:
                wanted.append((sample, k))
                planned += k
        if self.drafter is not None:
            started = time.perf_counter()
            proposed = self.drafter.propose([((id(self), s.index), [*self.prompt, *s.tokens], k) for s, k in wanted])
            self.usage.decode_s += time.perf_counter() - started  # drafting is part of this request's decode time
        else:
            proposed = [self.pool.draft(s.index, s.tokens, k) for s, k in wanted]
        used = 0
        for (sample, k), draft in zip(wanted, proposed, strict=True):
            draft = self._grammar_prefix(sample, draft[:k])
            if not draft:
                continue
            start = n_prompt + len(sample.tokens)  # the pending token sits at start - 1
            rows = [batch.add(token, start + i, (sample.seq_id,), True) for i, token in enumerate(draft)]
            self._drafts[sample.index] = (draft, rows)
            used += len(draft)
        return used

    def _grammar_prefix(self, sample: Sample, draft: list[int]) -> list[int]:
        """The part of the draft the sample's grammar allows (a rejected token ends the draft)."""
        if not draft or self._grammars is None:
            return draft
        return draft[: self._grammars.allowed_prefix(sample.index, draft, self._is_cancelled)]

    def release(self, core: EngineView, park: bool) -> None:
        if self.drafter is not None:
            for sample in self.samples:
                self.drafter.release((id(self), sample.index))
        super().release(core, park)

    def rollback(self) -> None:
        super().rollback()
        self._drafts = {}

    def commit(self, core: EngineView) -> None:
        if self._chunk:  # a prompt chunk: no sample is live yet
            self._drafts = {}
            super().commit(core)
            return
        started = time.perf_counter()
        for sample in self._live:
            if sample.pending >= 0:
                self._verify(core, sample)
        self._drafts = {}
        self._live = [s for s in self._live if s.pending >= 0]
        self.usage.decode_s += time.perf_counter() - started

    def _verify(self, core: EngineView, sample: Sample) -> None:
        """Sample the pending token's row, then each draft row while the drawn token equals the draft token;
        drop the KV cells of the draft tokens that were not accepted."""
        draft, rows = self._drafts.get(sample.index, ([], []))
        start = len(self.prompt) + len(sample.tokens)
        if sample.index == 0:
            self.kv0.append(sample.pending)
        sample.pending = -1
        flags = self.accepted_flags[sample.index]
        flags.extend([False] * (len(sample.tokens) - len(flags)))  # the first token is drawn from the prompt's logits
        accepted = 0
        for i, row in enumerate([sample.row, *rows]):
            n_before = len(sample.tokens)
            self._sample_next(core, sample, row)
            added = len(sample.tokens) > n_before  # an end-of-generation token finishes without being added
            hit = added and i < len(draft) and sample.tokens[-1] == draft[i]
            if added:
                flags.append(hit)
            if not hit:
                break
            accepted += 1
            sample.pending = -1  # the accepted token is already in the KV cache
            if sample.index == 0:
                self.kv0.append(draft[i])
            if sample.finish is not None:
                break
        if draft:
            self.drafted[sample.index] += len(draft)
            self.usage.draft_tokens += len(draft)
            self.usage.draft_accepted += accepted
            core.stats["draft_tokens"] += len(draft)
            core.stats["draft_accepted"] += accepted
            self.lengths[sample.index].update(len(draft), accepted)
            if accepted < len(draft) and (sample.finish is None or sample.index == 0):
                core.trim_seq(sample.seq_id, start + accepted)

    # -- results --------------------------------------------------------------------------------------

    def result(self) -> GenerateResult:
        result = super().result()
        for completion, drafted, flags in zip(result.completions, self.drafted, self.accepted_flags, strict=True):
            completion.draft_tokens = drafted
            completion.accepted = [*flags, *[False] * (len(completion.tokens) - len(flags))][: len(completion.tokens)]
        return result


def speculative_job(speculative: SpeculativeSpec | None, request: GenerateRequest,
                    drafter: DraftModel | None = None) -> GenerateJob:
    """The generate job for a model: speculative when its entry asks for n-gram speculation, or for a draft model
    and `drafter` is that model loaded."""
    if speculative is not None and speculative.method == "ngram":
        return SpeculativeGenerateJob(request, speculative)
    if speculative is not None and speculative.method == "draft" and drafter is not None:
        return SpeculativeGenerateJob(request, speculative, drafter)
    return GenerateJob(request)
