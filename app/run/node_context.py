"""What a node sees of its run: the run's budget and token accounting, and the NodeContext through which every
model call is traced (one LM-call event builder), budgeted, cancellable and served from the sample cache when it can."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import Any, TypeVar

from app.run import events as ev
from app.run.events import Event, EventBus
from app.run.run_pool import ENGINE_BATCH, RunPool
from app.run.sample_cache import SampleCache, choice_key, sample_key, score_key, shared_seed
from app.run.status import budget_stop_reason, is_budget_stop
from backends.base import (
    CancelledError,
    CancelToken,
    ChoiceResult,
    Completion,
    GenerateResult,
    LLMBackend,
    Prompt,
    RankResult,
    SamplingParams,
    ScoreResult,
    StepLogprobsResult,
    TokenCounts,
    Usage,
)
from backends.beam_search import BeamResult, BeamSettings
from backends.llama.worker.speculative import speculation_fields
from nodes.base import NodeError, to_jsonable
from nodes.thinking import THINK_PURPOSE

SubworkflowRunner = Callable[[Sequence[dict[str, Any]], bool, int | None], list[dict[str, Any]]]
"""Runs a workflow node's child once per inputs dict (mapped: numbered child runs); the outputs of each."""


class BudgetExceededError(CancelledError):
    """A run-level budget ran out."""


@dataclass(frozen=True)
class Budget:
    max_lm_calls: int | None = None
    max_tokens: int | None = None
    """Prompt + completion tokens evaluated, over the whole run."""
    max_seconds: float | None = None
    max_child_runs: int | None = None
    """Sub-workflow runs (each mapped candidate's included) over the whole run; None: MAX_CHILD_RUNS."""


MAX_CHILD_RUNS = 10_000
"""Child runs one run may start when its budget sets no lower cap: a mapped fan-out nested deep multiplies."""


@dataclass
class RunStats(TokenCounts):
    """The totals of one run: its token counters, LM calls, nodes run and from cache, and wall time."""

    lm_calls: int = 0
    completion_tokens_reused: int = 0
    """Completion tokens of samples served from the sample cache: what they cost when they were drawn, so a
    point of a sweep can be costed as if it had run alone."""
    prompt_tokens_reused: int = 0
    """Prompt tokens of requests whose samples all came from the sample cache: the prompt each would have evaluated
    had it drawn them itself (a request drawing any sample evaluates its prompt and counts it in prompt_tokens)."""
    nodes_run: int = 0
    nodes_cached: int = 0
    wall_s: float = 0.0
    draft_tokens: int = 0
    """Speculative decoding, over the run's LM calls: draft tokens proposed and verified (not in any token count)."""
    draft_accepted: int = 0
    """Speculative decoding: draft tokens accepted (each is also one of completion_tokens)."""

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted / drafted tokens over the run, or None when nothing was drafted."""
        return self.draft_accepted / self.draft_tokens if self.draft_tokens else None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_Counts = TypeVar("_Counts", bound=TokenCounts)
T = TypeVar("T")
R = TypeVar("R")


def without_cache_hits(usage: _Counts) -> _Counts:
    """`usage` as if the prefix cache had saved nothing: cached prompt tokens count as evaluated."""
    return replace(usage, prompt_tokens_evaluated=usage.prompt_tokens_evaluated + usage.prompt_tokens_cached,
                   prompt_tokens_cached=0)


class RunState:
    """Mutable accounting of one run, shared by its node contexts (guarded by a lock)."""

    def __init__(self, run_id: str, budget: Budget, cancel: CancelToken, bus: EventBus,
                 samples: SampleCache | None = None, hide_cache_hits: bool = False,
                 fanout_width: int = ENGINE_BATCH) -> None:
        self.run_id = run_id
        self.hide_cache_hits = hide_cache_hits
        """Count and report prompt tokens the prefix cache saved as evaluated (share mode: the cache is shared by
        every visitor, so a hit would tell one visitor what another's prompt began with)."""
        self.samples = samples
        self.shared_seed: int | None = None
        """--share-samples: the run seed from which generate() derives samples' seeds with their prompt instead of
        the node's seed, so workflows drawing the same prompt and params share one draw through the sample cache."""
        self.budget = budget
        self.cancel = cancel
        self.bus = bus
        self.stats = RunStats()
        self.streaming = 0
        """Completion tokens streamed by requests still in flight: counted against max_tokens as they come, until
        their request's own usage takes their place (RunState.add_tokens)."""
        self.lock = threading.Lock()
        self.started = time.perf_counter()
        self.call_counter = 0
        self.child_runs = 0
        self.pool = RunPool(name=f"run-{run_id}")
        """The run's bounded helper threads, shared by all its sub-workflow runs."""
        self.fanout = RunPool(fanout_width - 1, name=f"run-{run_id}-fanout")
        """The helper threads of its nodes' `NodeContext.map` (with each asking thread: as many requests at once as
        its engines batch; the scheduler sizes it from the run's models, `run_pool.fanout_width`)."""

    def reserve_child_runs(self, n: int) -> None:
        """Count `n` sub-workflow runs about to start; a BudgetExceededError when they would pass the cap."""
        with self.lock:
            cap = self.budget.max_child_runs if self.budget.max_child_runs is not None else MAX_CHILD_RUNS
            if self.child_runs + n > cap:
                self.exceed(f"max_child_runs={cap} would be passed ({self.child_runs} started, {n} more asked)")
            self.child_runs += n
        self.check_time()

    def check_time(self) -> None:
        b = self.budget
        if b.max_seconds is not None and time.perf_counter() - self.started > b.max_seconds:
            self.exceed(f"max_seconds={b.max_seconds:g} reached")

    def exceed(self, why: str) -> None:
        if not self.cancel.cancelled:
            self.cancel.cancel(budget_stop_reason(why))
        raise BudgetExceededError(budget_stop_reason(why))

    def reserve_calls(self, n: int) -> None:
        with self.lock:
            b = self.budget
            if b.max_lm_calls is not None and self.stats.lm_calls + n > b.max_lm_calls:
                self.exceed(f"max_lm_calls={b.max_lm_calls} would be passed "
                            f"({self.stats.lm_calls} made, {n} more requested)")
            self.stats.lm_calls += n
        self.check_time()

    def add_tokens(self, usage: TokenCounts, streamed: int = 0) -> None:
        """Count a request's usage, in place of the `streamed` tokens it was counted for while it ran."""
        with self.lock:
            self.streaming -= streamed
            self.stats.add_tokens(usage)
            if isinstance(usage, Usage):  # a request's usage: its speculative counters too
                self.stats.draft_tokens += usage.draft_tokens
                self.stats.draft_accepted += usage.draft_accepted

    def stream_token(self) -> bool:
        """Count one token a request in flight just streamed; whether the run is now past its token cap."""
        with self.lock:
            self.streaming += 1
            return self.budget.max_tokens is not None and self.tokens_used() > self.budget.max_tokens

    def tokens_used(self) -> int:
        """Tokens the budget counts: those of finished (and cut) requests, and those streamed by requests in flight."""
        return self.stats.tokens_used + self.streaming

    def next_call_id(self) -> int:
        with self.lock:
            self.call_counter += 1
            return self.call_counter


class RunNodeContext:
    """The NodeContext given to one node run: traced, budgeted, cancellable access to the models."""

    def __init__(self, state: RunState, node_id: str, kind: str, model: str | None, seed: int,
                 run_inputs: dict[str, Any], backend_for: Callable[[str], LLMBackend],
                 default_model: str, python_allowed: bool, subworkflows: SubworkflowRunner | None = None,
                 code_allowed: bool = True, code_caps: tuple[float, int] | None = None) -> None:
        self._state = state
        self.node_id = node_id
        self.kind = kind
        self.seed = seed
        self.cancel = state.cancel
        self.run_inputs = run_inputs
        self._backend_for = backend_for
        self._model = model or default_model
        self._python_allowed = python_allowed
        self._code_allowed = code_allowed
        self._code_caps = code_caps
        self._subworkflows = subworkflows

    # -- helpers
    def backend(self, model: str | None = None) -> LLMBackend:
        backend = self._backend_for(model or self._model)
        bind = getattr(backend, "for_node", None)  # a recording or replaying backend: this node's view of it
        return bind(self.node_id) if callable(bind) else backend

    def allow_python(self) -> bool:
        return self._python_allowed

    def allow_code_execution(self) -> bool:
        return self._code_allowed

    def code_limit_caps(self) -> tuple[float, int] | None:
        return self._code_caps

    def run_workflow(self, runs: Sequence[dict[str, Any]], mapped: bool,
                     branch: int | None = None) -> list[dict[str, Any]]:
        """This workflow node's child, once per inputs dict, several at once (the run's helper threads), inside this
        run (the scheduler's)."""
        if self._subworkflows is None:
            raise NodeError(f"node {self.node_id!r} has no sub-workflow to run")
        return self._subworkflows(runs, mapped, branch)

    def map(self, fn: Callable[[T], R], items: Sequence[T], *, limit: int | None = None) -> list[R]:
        """`fn` over `items` as concurrent requests on the run's fan-out pool (at most what its engines batch at
        once, and `limit`), so the engine decodes a round as one batch; the results in the items' order. Once the
        run is cancelled or at its cap no further item starts and that stop is raised; else the first exception
        in the items' order is raised after the items already running ended (none starts after a failure)."""
        if not items:
            return []
        futures = self._state.fanout.map(lambda _i, item: fn(item), items, self.cancel, limit=limit, fail_fast=True)
        if self.cancel.cancelled:
            reason = self.cancel.reason or "cancelled"
            raise (BudgetExceededError if is_budget_stop(reason) else CancelledError)(reason)
        for future in futures:
            error = future.exception()
            if error is not None:
                raise error
        return [future.result() for future in futures]

    def _emit(self, type_: str, data: dict[str, Any]) -> None:
        self._state.bus.emit(Event(type_, self._state.run_id, self.node_id, data))

    def event(self, kind: str, data: dict[str, Any]) -> None:
        self._emit(ev.NODE_EVENT, {"kind": kind, **to_jsonable(data)})

    def progress(self, done: float, total: float, message: str = "") -> None:
        self._emit(ev.PROGRESS, {"done": done, "total": total, "message": message})

    def _token_watch(self, indices: Sequence[int]) -> _CallMeter:
        """A meter for one streaming request drawing samples `indices`: each token counts against the run's cap as
        it comes, and the run is cancelled (the request cut within a decode step) the moment it passes max_tokens
        or max_seconds."""
        return _CallMeter(self._state, self._emit, indices)

    def _after_call(self, usage: TokenCounts, streamed: int = 0) -> None:
        st = self._state
        st.add_tokens(without_cache_hits(usage) if st.hide_cache_hits else usage, streamed)
        if st.budget.max_tokens is not None and st.tokens_used() > st.budget.max_tokens:
            st.exceed(f"max_tokens={st.budget.max_tokens} reached ({st.tokens_used()} used)")
        st.check_time()
        if st.cancel.cancelled:
            raise (BudgetExceededError if is_budget_stop(st.cancel.reason) else CancelledError)(
                st.cancel.reason)

    @contextmanager
    def _kept_if_cut(self) -> Iterator[None]:
        """A request that a cancel or a cap cut mid-way still counts what it had spent (its error's usage)."""
        try:
            yield
        except CancelledError as exc:
            if exc.usage is not None:
                st = self._state
                st.add_tokens(without_cache_hits(exc.usage) if st.hide_cache_hits else exc.usage)
            raise

    def _cut_call(self, backend: LLMBackend, exc: BaseException, meter: _CallMeter, *, purpose: str, prompt: Prompt,
                  n: int, lead: int, start: float, **extra: Any) -> None:
        """A generate request that did not finish (cut by a cancel or a cap, or failed): what it spent counts and is
        traced, one LM-call event per sample that streamed, with the text it had streamed."""
        spent = getattr(exc, "usage", None)
        usage = replace(spent) if isinstance(spent, Usage) else Usage(completion_tokens=meter.streamed)
        if purpose == THINK_PURPOSE:
            usage.thinking_tokens = usage.completion_tokens
        self._state.add_tokens(without_cache_hits(usage) if self._state.hide_cache_hits else usage, meter.streamed)
        if not usage.tokens_used and not usage.prompt_tokens_cached:
            return  # stopped before it began: nothing to trace
        counts = meter.per_sample(usage.completion_tokens, lead)
        reason = "cancelled" if isinstance(exc, CancelledError) else "error"
        for index, tokens in sorted(counts.items()):
            self._lm_call(backend, purpose=purpose, index=index, n=n, prompt=_plain_prompt(prompt),
                          completion="".join(meter.texts.get(index, ())), usage=usage, share=True, start=start,
                          end=time.time(), lead=lead, completion_tokens=tokens, finish_reason=reason,
                          **({"thinking_tokens": tokens} if purpose == THINK_PURPOSE else {}), **extra)

    def _lm_call(self, backend: LLMBackend, *, purpose: str, index: int, n: int, prompt: str, completion: str,
                 usage: Usage, share: bool, start: float, end: float, lead: int = 0, **extra: Any) -> None:
        """The one place an LM_CALL event is built. A request's prompt is evaluated once for all its items, so
        with `share` its evaluated and cached prompt tokens go to its first item drawn (index `lead`: not 0 when
        the first samples came from the sample cache) and 0 to the others."""
        first = index == lead or not share
        if self._state.hide_cache_hits:
            usage = without_cache_hits(usage)
        self._emit(ev.LM_CALL, {
            "call_id": f"{self.node_id}#{self._state.next_call_id()}", "purpose": purpose,
            "model": backend.model_id, "sample_index": index, "n": n, "parent": None, "tag": {},
            "prompt": prompt, "completion": completion, "prompt_tokens": usage.prompt_tokens,
            "prompt_tokens_evaluated": usage.prompt_tokens_evaluated if first else 0,
            "prompt_tokens_cached": usage.prompt_tokens_cached if first else 0,
            "completion_tokens": 0, "logprobs": None, "seed": None, "start": start, "end": end,
            "prefill_s": usage.prefill_s, "decode_s": usage.decode_s, **extra,
        })

    # -- LM access
    def generate(self, prompt: Prompt, params: SamplingParams, n: int = 1, seeds: Sequence[int] | None = None,
                 model: str | None = None, purpose: str = "generate", parent: str | None = None,
                 tag: dict[str, Any] | None = None) -> GenerateResult:
        """N completions of one prompt. Seeded samples already drawn with the same model, prompt and params
        come from the sample cache; only the others are drawn (in one batched request)."""
        self.cancel.raise_if_cancelled()
        if seeds is not None and self._state.shared_seed is not None:  # sample i keeps its offset from node seed
            root = shared_seed(self._state.shared_seed, prompt)
            seeds = [(root + s - self.seed) & 0x7FFFFFFF for s in seeds]
        backend = self.backend(model)
        cache = self._state.samples
        keys = [sample_key(backend.model_id, prompt, params, s) for s in seeds] \
            if cache is not None and seeds is not None and len(seeds) == n else None
        cached: list[Completion | None] = [cache.samples.get(k) for k in keys] if keys and cache else [None] * n
        missing = [i for i, c in enumerate(cached) if c is None]
        if len(missing) < n and seeds is not None:
            _note_cached(backend, prompt, params, seeds, cached)
        reused = sum(c.completion_tokens for c in cached if c is not None)
        if reused:
            with self._state.lock:
                self._state.stats.completion_tokens_reused += reused
        if not missing:
            self._count_pooled_prompt(cached)  # type: ignore[arg-type]
            self.event("note", {"message": f"{n} sample(s) from the sample cache", "cached_samples": n})
            return GenerateResult(completions=list(cached), usage=Usage(),  # type: ignore[arg-type]
                                  prompt_text=backend.render_prompt(prompt))
        self._state.reserve_calls(len(missing))
        start = time.time()
        draw_seeds = [seeds[i] for i in missing] if seeds is not None else None
        meter = self._token_watch(missing)
        try:
            result = backend.generate(prompt, params, n=len(missing), seeds=draw_seeds, on_token=meter.on_token,
                                      cancel=self.cancel)
        except BaseException as exc:  # cut by a cancel or a cap, or failed: what it spent still counts
            self._cut_call(backend, exc, meter, purpose=purpose, prompt=prompt, n=n,
                           lead=missing[0], start=start, parent=parent, tag=tag or {})
            raise
        u = result.usage
        if purpose == THINK_PURPOSE:  # a thinking phase (nodes/thinking.py): every token it wrote is thinking
            u.thinking_tokens = u.completion_tokens
        self._trace_samples(backend, result, missing, n=n, purpose=purpose, start=start, parent=parent, tag=tag)
        if keys and cache is not None:
            for j, c in enumerate(result.completions[:len(missing)]):
                cache.samples.put(keys[missing[j]], c)
        self._after_call(u, meter.streamed)
        if len(missing) == n:
            return result
        self.event("note", {"message": f"{n - len(missing)} of {n} samples from the sample cache",
                            "cached_samples": n - len(missing)})
        for j, i in enumerate(missing):
            cached[i] = result.completions[j]
        return GenerateResult(completions=list(cached), usage=u, prompt_text=result.prompt_text)  # type: ignore[arg-type]

    def _count_pooled_prompt(self, cached: Sequence[Completion]) -> None:
        """The prompt a request served wholly from the sample cache would have evaluated alone: its samples' own
        prompt count (the request's prompt, counted once, as a request that draws them counts it)."""
        tokens = max((c.prompt_tokens for c in cached), default=0)
        with self._state.lock:
            self._state.stats.prompt_tokens_reused += tokens

    def _trace_samples(self, backend: LLMBackend, result: GenerateResult, missing: Sequence[int], *, n: int,
                       purpose: str, start: float, parent: str | None, tag: dict[str, Any] | None) -> None:
        """One LM-call event per drawn sample; `missing[j]` is the node's index of the request's sample j."""
        end, u = time.time(), result.usage
        for j, c in enumerate(result.completions):
            index = missing[j] if j < len(missing) else j
            thinking_tokens = c.completion_tokens if purpose == THINK_PURPOSE else c.thinking_tokens
            thought = {**({"thinking_tokens": thinking_tokens} if thinking_tokens else {}),  # only calls that thought
                       **({"thinking": c.thinking} if c.thinking else {})}
            self._lm_call(backend, purpose=purpose, index=index, n=n, prompt=result.prompt_text, completion=c.text,
                          usage=u, share=True, start=start, end=start + c.time_s if c.time_s else end,
                          lead=missing[0], parent=parent, tag=tag or {},
                          prompt_tokens=c.prompt_tokens or u.prompt_tokens,
                          completion_tokens=c.completion_tokens, seed=c.seed, finish_reason=c.finish_reason,
                          logprobs=[asdict(lp) for lp in c.logprobs] if c.logprobs is not None else None,
                          **thought, **speculation_fields(c.draft_tokens, c.accepted))

    def score(self, prefix: Prompt, continuations: Sequence[str], model: str | None = None,
              purpose: str = "score") -> ScoreResult:
        """Log-likelihood of each continuation after the prefix; scores already computed come from the cache."""
        self.cancel.raise_if_cancelled()
        backend = self.backend(model)
        cache = self._state.samples
        keys = [score_key(backend.model_id, prefix, c) for c in continuations] if cache is not None else None
        known = [cache.scores.get(k) for k in keys] if keys and cache is not None else [None] * len(continuations)
        missing = [i for i, s in enumerate(known) if s is None]
        if len(missing) < len(continuations):
            hits = [(c, s) for c, s in zip(continuations, known, strict=False) if s is not None]
            _note_cached_call(backend, "score", (prefix, [c for c, _ in hits]),
                              ScoreResult(scores=[s for _, s in hits]))
        if not missing:
            return ScoreResult(scores=list(known), usage=Usage())  # type: ignore[arg-type]
        todo = [continuations[i] for i in missing]
        self._state.reserve_calls(len(todo))
        start = time.time()
        with self._kept_if_cut():
            result = backend.score(prefix, todo, cancel=self.cancel)
        end = time.time()
        u = result.usage
        rendered = backend.render_prompt(prefix)
        for j, (cont, sc) in enumerate(zip(todo, result.scores, strict=False)):
            self._lm_call(backend, purpose=purpose, index=j, n=len(todo), prompt=rendered, completion=cont,
                          usage=u, share=True, start=start, end=end, scored_tokens=sc.n_tokens,
                          logprob=sc.logprob, finish_reason="score")
            known[missing[j]] = sc
            if keys and cache is not None:
                cache.scores.put(keys[missing[j]], sc)
        self._after_call(Usage(prompt_tokens=u.prompt_tokens, prompt_tokens_evaluated=u.prompt_tokens_evaluated,
                               prompt_tokens_cached=u.prompt_tokens_cached))
        return ScoreResult(scores=list(known), usage=u)  # type: ignore[arg-type]

    def choice_logprobs(self, prompt: Prompt, choices: Sequence[str], model: str | None = None,
                        purpose: str = "judge") -> ChoiceResult:
        """Log-probabilities of the choices as the next token (judges); a repeated question comes from the cache."""
        self.cancel.raise_if_cancelled()
        backend = self.backend(model)
        cache = self._state.samples
        key = choice_key(backend.model_id, prompt, list(choices)) if cache is not None else None
        hit = cache.choices.get(key) if key and cache is not None else None
        if hit is not None:
            _note_cached_call(backend, "choice_logprobs", (prompt, list(choices)), ChoiceResult(logprobs=hit.logprobs))
            return ChoiceResult(logprobs=dict(hit.logprobs), usage=Usage())
        self._state.reserve_calls(1)
        start = time.time()
        with self._kept_if_cut():
            result = backend.choice_logprobs(prompt, choices, cancel=self.cancel)
        self._lm_call(backend, purpose=purpose, index=0, n=1, prompt=backend.render_prompt(prompt),
                      completion=json.dumps(result.logprobs), usage=result.usage, share=False, start=start,
                      end=time.time(), finish_reason="choice")
        if key and cache is not None:
            cache.choices.put(key, result)
        self._after_call(Usage(prompt_tokens=result.usage.prompt_tokens,
                               prompt_tokens_evaluated=result.usage.prompt_tokens_evaluated,
                               prompt_tokens_cached=result.usage.prompt_tokens_cached))
        return result

    def _capable(self, backend: LLMBackend, method: str, what: str) -> Callable[..., Any]:
        """The backend's optional method `method`, or a NodeError naming the model and what to use instead."""
        call = getattr(backend, method, None)
        if call is None:
            kind = str(backend.info().get("backend", "this backend"))
            raise NodeError(f"model {backend.model_id} ({kind}) cannot {what}; use a local GGUF model for it")
        return call  # type: ignore[no-any-return]

    def _counted(self, usage: Usage) -> None:
        self._after_call(Usage(prompt_tokens=usage.prompt_tokens, prompt_tokens_evaluated=usage.prompt_tokens_evaluated,
                               prompt_tokens_cached=usage.prompt_tokens_cached))

    def step_logprobs(self, sequences: Sequence[Sequence[str]], tokens: Sequence[str], model: str | None = None,
                      purpose: str = "prm") -> StepLogprobsResult:
        """Log-probabilities of `tokens` after every segment of every sequence, one batched request; one LM-call
        event per sequence (the request's prompt tokens counted once)."""
        self.cancel.raise_if_cancelled()
        backend = self.backend(model)
        call = self._capable(backend, "step_logprobs", "read token probabilities at many positions (method prm)")
        self._state.reserve_calls(len(sequences))
        start = time.time()
        with self._kept_if_cut():
            result: StepLogprobsResult = call(sequences, tokens, cancel=self.cancel)
        end = time.time()
        for i, (segments, rows) in enumerate(zip(sequences, result.logprobs, strict=True)):
            self._lm_call(backend, purpose=purpose, index=i, n=len(sequences), prompt="".join(segments[:1]),
                          completion="".join(segments[1:]), usage=result.usage, share=True, start=start, end=end,
                          finish_reason="score", scored_tokens=len(rows), step_logprobs=rows)
        self._counted(result.usage)
        return result

    def beam_search(self, prompt: Prompt, params: SamplingParams, settings: BeamSettings, model: str | None = None,
                    purpose: str = "beam") -> BeamResult:
        """Token-level (diverse) beam search, one request; one LM-call event per returned hypothesis and a
        "beam_tree" event with the tree (parents, tokens, scores per step; pruned beams marked)."""
        self.cancel.raise_if_cancelled()
        backend = self.backend(model)
        call = self._capable(backend, "beam_search", "decode with a token-level beam (method beam)")
        self._state.reserve_calls(settings.n)
        start = time.time()
        with self._kept_if_cut():
            result: BeamResult = call(prompt, params, settings, cancel=self.cancel)
        end = time.time()
        u = result.usage
        if len(result.hypotheses) < settings.n:  # a grammar left fewer sequences than beams: count those made
            self._state.reserve_calls(len(result.hypotheses) - settings.n)
        for i, h in enumerate(result.hypotheses):
            self._lm_call(backend, purpose=purpose, index=i, n=len(result.hypotheses), prompt=result.prompt_text,
                          completion=h.text, usage=u, share=True, start=start, end=end,
                          completion_tokens=len(h.tokens), finish_reason=h.finish_reason, logprob=h.logprob,
                          beam_score=h.score, tag={"beam_group": h.group})
        self.event("beam_tree", result.tree)
        self._after_call(u)
        return result

    def rank(self, query: str, documents: Sequence[str], model: str | None = None,
             purpose: str = "reward") -> RankResult:
        """One score per document from a reranker / reward model (one batched request)."""
        self.cancel.raise_if_cancelled()
        backend = self.backend(model)
        call = self._capable(backend, "rank", "score with a reward model (method reward_model)")
        self._state.reserve_calls(len(documents))
        start = time.time()
        with self._kept_if_cut():
            result: RankResult = call(query, list(documents), cancel=self.cancel)
        end = time.time()
        for i, (doc, score) in enumerate(zip(documents, result.scores, strict=True)):
            self._lm_call(backend, purpose=purpose, index=i, n=len(documents), prompt=query, completion=doc,
                          usage=result.usage, share=True, start=start, end=end, finish_reason="score",
                          reward=score)
        self._counted(result.usage)
        return result


class _CallMeter:
    """One streaming request's tokens as they come: each counts against the run's token cap at once (the run is
    cancelled the moment it passes the cap or its time), and what each sample streamed is kept for the trace of
    a request that is cut."""

    def __init__(self, state: RunState, emit: Callable[[str, dict[str, Any]], None], indices: Sequence[int]) -> None:
        self._state = state
        self._emit = emit
        self._indices = list(indices)
        """The node's sample index of each of the request's samples (some came from the sample cache)."""
        self.streamed = 0
        self.texts: dict[int, list[str]] = {}
        self.counts: dict[int, int] = {}

    def on_token(self, sample: int, text: str) -> None:
        self._emit(ev.TOKEN, {"sample": sample, "text": text})
        index = self._indices[sample] if 0 <= sample < len(self._indices) else sample
        self.texts.setdefault(index, []).append(text)
        self.counts[index] = self.counts.get(index, 0) + 1
        self.streamed += 1
        state, cancel = self._state, self._state.cancel
        if state.stream_token() and not cancel.cancelled:
            cancel.cancel(budget_stop_reason(f"max_tokens={state.budget.max_tokens} reached"))
        limit = state.budget.max_seconds
        if limit is not None and time.perf_counter() - state.started > limit and not cancel.cancelled:
            cancel.cancel(budget_stop_reason(f"max_seconds={limit:g} reached"))

    def per_sample(self, completion_tokens: int, lead: int) -> dict[int, int]:
        """Each sample's completion tokens: those it streamed, and to `lead` what the request's count says beyond
        them (pieces that never streamed, e.g. held back by a stop string's prefix)."""
        counts = dict(self.counts)
        rest = completion_tokens - sum(counts.values())
        if rest > 0 or not counts:
            counts[lead] = counts.get(lead, 0) + max(0, rest)
        return counts


def _note_cached(backend: LLMBackend, prompt: Prompt, params: SamplingParams, seeds: Sequence[int],
                 cached: Sequence[Completion | None]) -> None:
    """Tell a recording backend (backends.replay.calls) which samples came from the sample cache: a replay, whose
    cache starts empty, must find them in the recording."""
    note = getattr(backend, "note_cached", None)
    if not callable(note):
        return
    hits = [(s, c) for s, c in zip(seeds, cached, strict=False) if c is not None]
    note(prompt, params, [s for s, _ in hits], [c for _, c in hits], "")


def _note_cached_call(backend: LLMBackend, method: str, args: tuple[Any, ...], result: Any) -> None:
    """Tell a recording backend about scores or a judge answer that came from the sample cache (as samples)."""
    note = getattr(backend, "note_cached_call", None)
    if callable(note):
        note(method, args, result)


def _plain_prompt(prompt: Prompt) -> str:
    """A prompt as text for the trace of a cut request (whose rendered prompt never came back)."""
    if isinstance(prompt, str):
        return prompt
    return "\n".join(f"{m.get('role', '')}: {m.get('content', '')}" for m in prompt)
