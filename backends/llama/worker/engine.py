"""The batched multi-sequence llama.cpp engine: one thread owns the context and runs a continuous-batching
decode loop (one llama_decode per step over every live sequence of every request); request threads submit
jobs and wait on their events."""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any

import numpy as np

from backends.base import BackendError, CancelledError
from backends.llama.worker.batch import BatchBuilder
from backends.llama.worker.engine_jobs import Job
from backends.llama.worker.grammar_worker import GrammarPool
from backends.llama.worker.llama_model import LlamaModel, capture_native_log
from backends.llama.worker.prefix_cache import SequenceTable, common_prefix_len

log = logging.getLogger(__name__)

STAT_KEYS = (
    "requests", "max_active_requests", "cancelled", "decode_calls", "decode_s_total", "tokens_decoded",
    "max_batch_tokens", "prompt_tokens_evaluated", "prompt_tokens_cached", "completion_tokens",
    "kv_full_retries", "decode_failures", "draft_tokens", "draft_accepted",
)
"""Engine counters, all created up front so other threads can copy the Counter while it is updated."""

PARK_COST_SHARE = 32
"""Without flash attention a kept prompt that is never reused costs at most 1/PARK_COST_SHARE of its own
evaluation before it expires; reuse in workflows mostly comes at once (the next node, the next refinement
round), and the expiry clock counts decoded tokens, so idle time between runs costs nothing."""

DECODE_ERRORS = {
    -1: "invalid input batch",
    2: "aborted",
}


class Engine:
    """Owns one llama_context with a unified KV cache shared by up to `n_seq_max` sequences."""

    def __init__(
        self,
        model: LlamaModel,
        kv_size: int,
        n_ctx_seq: int,
        threads: int,
        flash_attn: str,
        n_batch: int = 512,
        n_seq_max: int = 64,
        prefix_cache_tokens: int = 2048,
        park_expiry_tokens: int | None = None,
    ) -> None:
        self.model = model
        self.lib = model._lib
        self.n_ctx_seq = n_ctx_seq
        self.n_batch = max(n_batch, n_seq_max)
        self.n_seq_max = n_seq_max
        params = self.lib.llama_context_default_params()
        params.n_ctx = kv_size
        params.n_batch = self.n_batch
        params.n_ubatch = self.n_batch
        params.n_seq_max = n_seq_max
        params.kv_unified = True  # one cell may belong to many sequences: the shared-prompt KV
        params.n_threads = threads
        params.n_threads_batch = threads
        params.flash_attn_type = {"on": 1, "off": 0}.get(flash_attn, -1)  # else llama.cpp decides (auto)
        params.no_perf = True
        with capture_native_log() as lines:
            self.ctx = self.lib.llama_init_from_model(model.ptr, params)
        self.flash_attn = flash_attn == "on" or (
            flash_attn == "auto" and any("Flash Attention enabled" in line for line in lines)
        )
        if not self.ctx:
            raise BackendError(
                f"llama.cpp could not create a context of {kv_size} KV cells for {model.path.name} "
                "(out of memory?). Lower n_ctx or the kv_size option."
            )
        self.kv_size = int(self.lib.llama_n_ctx(self.ctx))
        self.mem = self.lib.llama_get_memory(self.ctx)
        self.batch = BatchBuilder(self.lib, self.n_batch, n_seq_max, max_outputs=max(n_seq_max, 256))
        if park_expiry_tokens is None:  # idle cached prompts cost attention only without flash attention
            park_expiry_tokens = 0 if self.flash_attn else model.attention_break_even_tokens() // PARK_COST_SHARE
        self.table = SequenceTable(n_seq_max, prefix_cache_tokens, self.remove_seq_cells, park_expiry_tokens or None)
        self.stats: collections.Counter[str] = collections.Counter({key: 0 for key in STAT_KEYS})
        self.grammar_pool = GrammarPool(model.path)
        self._logits_views: dict[int, np.ndarray] = {}
        self._cond = threading.Condition()
        self._incoming: collections.deque[Job] = collections.deque()
        self._waiting: collections.deque[Job] = collections.deque()
        self._active: list[Job] = []
        self._closing = False
        self._prefill_cap = self.n_batch
        self._thread = threading.Thread(target=self._run, name=f"llama-engine[{model.path.name}]", daemon=True)
        self._thread.start()

    # -- API for request threads -----------------------------------------------------------------------

    def submit(self, job: Job) -> None:
        with self._cond:
            if self._closing:
                raise BackendError("This model was unloaded; get it again from the model pool.")
            self._incoming.append(job)
            self._cond.notify()

    @property
    def busy(self) -> bool:
        with self._cond:
            return bool(self._incoming or self._waiting or self._active)

    def snapshot(self) -> dict[str, Any]:
        """Engine counters for info(): work done, prefix-cache use, current load."""
        with self._cond:
            waiting, active = len(self._incoming) + len(self._waiting), len(self._active)
        return {
            **dict(self.stats),
            "kv_size": self.kv_size,
            "n_ctx_seq": self.n_ctx_seq,
            "n_seq_max": self.n_seq_max,
            "n_batch": self.n_batch,
            "flash_attn": self.flash_attn,
            "active_requests": active,
            "waiting_requests": waiting,
            "parked_prompts": self.table.n_parked,
            "parked_tokens": self.table.parked_tokens,
            "prefix_evictions": self.table.evictions,
            "prefix_expired": self.table.expired,
            "prefix_expiry_tokens": self.table.expire_after,
        }

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()
        self.grammar_pool.close()
        self.batch.free()
        if self.ctx:
            self.lib.llama_free(self.ctx)
            self.ctx = None

    # -- API for jobs (engine thread only) ---------------------------------------------------------------

    def copy_prefix(self, src: int, dst: int, length: int) -> None:
        self.lib.llama_memory_seq_cp(self.mem, src, dst, 0, length)

    def remove_seq_cells(self, seq_id: int) -> None:
        self.lib.llama_memory_seq_rm(self.mem, seq_id, -1, -1)

    def trim_seq(self, seq_id: int, from_pos: int) -> None:
        self.lib.llama_memory_seq_rm(self.mem, seq_id, from_pos, -1)

    def logits_row(self, row: int) -> np.ndarray:
        ptr = self.lib.llama_get_logits_ith(self.ctx, row)
        if not ptr:
            raise BackendError(f"llama.cpp returned no logits for batch row {row}")
        return np.ctypeslib.as_array(ptr, shape=(self.model.n_vocab,))

    def reserved_free_ids(self) -> int:
        """Free ids a job may not take opportunistically: those the next waiting request needs."""
        return self._waiting[0].needed_ids() if self._waiting else 0

    # -- the loop ------------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not (self._incoming or self._waiting or self._active or self._closing):
                        self._cond.wait()
                    if self._closing:
                        break
                    self._waiting.extend(self._incoming)
                    self._incoming.clear()
                self._step()
        except BaseException as exc:  # a bug in the loop must not leave request threads waiting forever
            log.exception("llama engine loop crashed")
            self._fail_everything(BackendError(f"The llama.cpp engine stopped after an internal error: {exc}"))
            with self._cond:
                self._closing = True
        self._fail_everything(BackendError("This model was unloaded while the request was running; retry it."))

    def _fail_everything(self, error: BaseException) -> None:
        with self._cond:
            pending = list(self._incoming) + list(self._waiting)
            self._incoming.clear()
            self._waiting.clear()
        for job in pending:
            job.reject(error)
        for job in list(self._active):
            self._drop(job, error, park=False)

    def _step(self) -> None:
        """One turn of the loop: fill one batch from every active job, decode it, hand each job its rows.
        The phases share two per-step containers rather than returning new ones: this runs once per token."""
        self._drop_cancelled()
        self._admit()
        if not self._active:
            return
        batch = self.batch
        batch.clear()
        in_batch: list[Job] = []
        prefill_jobs: set[int] = set()
        self._add_next_tokens(batch, in_batch)
        self._add_drafts(batch, in_batch)
        self._add_prompt_chunks(batch, in_batch, prefill_jobs)
        if batch.n == 0:  # every active job is waiting for sequence ids; let others finish first
            with self._cond:
                self._cond.wait(timeout=0.005)
            return
        elapsed = self._decode(batch, in_batch)
        if elapsed is not None:
            self._commit_results(in_batch, prefill_jobs, elapsed)

    def _add_next_tokens(self, batch: BatchBuilder, in_batch: list[Job]) -> None:
        """Each decoding job's next token(s); a job that finishes or fails while drawing them leaves here."""
        for job in list(self._active):
            before = batch.n
            try:
                job.add_decode_tokens(batch)  # may first draw samples whose grammar answer came
            except (BackendError, CancelledError) as exc:  # an answer too late (or none: the grammar process died)
                self._drop(job, exc, park=False)
                continue
            if job.done:  # its last samples were drawn just now
                self._complete(job)
                continue
            if batch.n > before:
                in_batch.append(job)

    def _add_drafts(self, batch: BatchBuilder, in_batch: list[Job]) -> None:
        """Speculative drafts ride behind the next tokens, leaving room for prompts."""
        for job in list(in_batch):
            job.add_draft_tokens(batch, min(batch.room() // 2, batch.outputs_left()))

    def _add_prompt_chunks(self, batch: BatchBuilder, in_batch: list[Job], prefill_jobs: set[int]) -> None:
        """Fill what room is left (at most the prefill cap) with prompt tokens, in arrival order."""
        prompt_budget = min(batch.room(), self._prefill_cap)
        for job in self._active:
            if prompt_budget <= 0 or batch.outputs_left() <= 0:
                break
            added = job.add_prompt_tokens(batch, prompt_budget)
            if added:
                prompt_budget -= added
                prefill_jobs.add(id(job))
                if job not in in_batch:
                    in_batch.append(job)

    def _decode(self, batch: BatchBuilder, in_batch: list[Job]) -> float | None:
        """One llama_decode over the batch; its seconds, or None when it failed (the failure is dealt with)."""
        batch.batch.n_tokens = batch.n
        started = time.perf_counter()
        rc = self.lib.llama_decode(self.ctx, batch.batch)
        elapsed = time.perf_counter() - started
        self.stats["decode_calls"] += 1
        self.stats["decode_s_total"] += elapsed  # type: ignore[assignment]
        if rc != 0:
            self._decode_failed(rc, in_batch)
            return None
        self.stats["tokens_decoded"] += batch.n
        self.table.advance(batch.n)
        self.stats["max_batch_tokens"] = max(self.stats["max_batch_tokens"], batch.n)
        return elapsed

    def _commit_results(self, in_batch: list[Job], prefill_jobs: set[int], elapsed: float) -> None:
        """Each job reads its rows of the decoded batch; a finished job completes, a failing one is dropped."""
        for job in in_batch:
            if id(job) in prefill_jobs:
                job.usage.prefill_s += elapsed
            else:
                job.usage.decode_s += elapsed
            try:
                job.commit(self)
            except (BackendError, CancelledError) as exc:  # e.g. a grammar stopped by cancel or its time limit
                if isinstance(exc, CancelledError):
                    self.stats["cancelled"] += 1
                self._drop(job, exc, park=False)
                continue
            except Exception as exc:
                log.exception("request failed while reading its results")
                self._drop(job, BackendError(f"The request failed: {exc}"), park=False)
                continue
            if job.done:
                self._complete(job)

    def _admit(self) -> None:
        """Start waiting jobs, in arrival order, while sequence ids and KV cells allow."""
        while self._waiting:
            job = self._waiting[0]
            if job.cancelled:
                self._waiting.popleft()
                job.reject(CancelledError(job.cancel.reason if job.cancel else "cancelled"))
                continue
            if self._should_wait_for_shared_prefix(job):
                return
            if job.needs_grammar() and not self.grammar_pool.available():
                return  # every grammar process is taken: wait for one (the job keeps its place in line)
            reserved = sum(j.reserve_cells for j in self._active)
            fits_cells = reserved + job.reserve_cells <= self.kv_size
            if self._active and (not fits_cells or not self.table.can_acquire(job.needed_ids())):
                return
            if not self.table.can_acquire(job.needed_ids()):
                self._waiting.popleft()
                job.reject(BackendError(
                    f"The request needs {job.needed_ids()} parallel sequences but the engine has "
                    f"{self.n_seq_max}; lower n or raise the n_seq_max option."
                ))
                continue
            self._waiting.popleft()
            try:
                self._make_room(reserved + job.reserve_cells, job)
                job.start(self)
            except (BackendError, CancelledError) as exc:
                self._drop(job, exc, park=False)
                continue
            except Exception as exc:  # a bug in one request must not stop the engine
                log.exception("request failed to start")
                self._drop(job, BackendError(f"The request could not start: {exc}"), park=False)
                continue
            self._active.append(job)
            self.stats["requests"] += 1
            self.stats["max_active_requests"] = max(self.stats["max_active_requests"], len(self._active))
            if job.done:  # answered from the prefix cache alone
                self._complete(job)

    def _should_wait_for_shared_prefix(self, job: Job) -> bool:
        """A request whose prompt shares a longer prefix with a prompt still being evaluated waits for it,
        so the shared part is evaluated once (e.g. N verifier prompts behind one question)."""
        tokens = job.prefix_tokens()
        cached = self.table.longest_prefix(tokens)
        have = cached.length if cached else 0
        for other in self._active:
            other_prompt = other.prefix_tokens()
            fed = getattr(other, "fed", len(other_prompt))
            if fed < len(other_prompt) and common_prefix_len(other_prompt, tokens) > have + 8:
                return True
        return False

    def _make_room(self, cells_needed: int, job: Job) -> None:
        """Evict parked prompts (least recently used first, never the new job's prefix source) until the
        reservation fits beside them."""
        source = self.table.longest_prefix(job.prefix_tokens())
        keep = source.seq_id if source else None
        while cells_needed + self.table.parked_tokens > self.kv_size and self.table.evict_lru(keep):
            pass

    def _decode_failed(self, rc: int, in_batch: list[Job]) -> None:
        for job in in_batch:
            job.rollback()
        if rc == 1:  # no KV slot: free parked prompts, then smaller prompt chunks, then drop the newest job
            self.stats["kv_full_retries"] += 1
            if self.table.evict_all_parked():
                return
            if self._prefill_cap > 1 and any(getattr(j, "fed", 0) < len(j.prefix_tokens()) for j in in_batch):
                self._prefill_cap = max(1, self._prefill_cap // 2)
                return
            victim = in_batch[-1]
            self._drop(victim, BackendError(
                f"The KV cache is full ({self.kv_size} cells shared by all running requests). Lower n or "
                "max_tokens, run fewer requests at once, or raise n_ctx / the kv_size option."
            ), park=False)
            return
        reason = DECODE_ERRORS.get(rc, "compute error")
        self.stats["decode_failures"] += 1
        for job in in_batch:
            self._drop(job, BackendError(f"llama.cpp failed to decode this request's batch ({reason}, code {rc})."),
                       park=False)

    def _drop_cancelled(self) -> None:
        for job in list(self._active):
            if job.cancelled:
                self.stats["cancelled"] += 1
                self._drop(job, CancelledError(job.cancel.reason if job.cancel else "cancelled"), park=True)

    def _drop(self, job: Job, error: BaseException, park: bool) -> None:
        if job in self._active:
            self._active.remove(job)
        try:
            job.release(self, park=park)
        except Exception:  # releasing must never take the engine down
            log.exception("releasing a failed request's sequences")
        self._after_job()
        job.reject(error)

    def _complete(self, job: Job) -> None:
        self._active.remove(job)
        job.release(self, park=True)
        self._after_job()
        job.resolve(job.result())  # type: ignore[attr-defined]

    def _after_job(self) -> None:
        if not self._active:
            self._prefill_cap = self.n_batch
