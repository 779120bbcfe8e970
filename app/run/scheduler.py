"""Runs a validated workflow DAG: concurrent ready nodes, derived seeds, signature cache, cancel, budgets."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from typing import Any

from app.run import events as ev
from app.run.events import Event, EventBus, Observer
from app.workflow.model_specs import DEFAULT_MODEL_ALIAS, model_specs
from app.workflow.problems import Issue, WorkflowError, errors
from app.workflow.spec import Workflow
from app.workflow.validation import build_graph, check_input_value, split_ref, validate
from backends.base import (
    BackendError,
    CancelledError,
    CancelToken,
    ChoiceResult,
    GenerateResult,
    LLMBackend,
    ModelSpec,
    Prompt,
    SamplingParams,
    ScoreResult,
)
from nodes.base import NodeError, NodeKind, to_jsonable
from nodes.registry import NodeRegistry

log = logging.getLogger(__name__)

BackendProvider = Callable[[ModelSpec], LLMBackend]
"""Returns the (shared, loaded) backend for a model spec."""

SUCCEEDED, FAILED, CANCELLED, BUDGET_EXCEEDED = "succeeded", "failed", "cancelled", "budget_exceeded"


class BudgetExceededError(CancelledError):
    """A run-level budget ran out."""


@dataclass(frozen=True)
class Budget:
    max_lm_calls: int | None = None
    max_tokens: int | None = None
    """Prompt + completion tokens evaluated, over the whole run."""
    max_seconds: float | None = None


@dataclass
class RunStats:
    lm_calls: int = 0
    prompt_tokens: int = 0
    prompt_tokens_evaluated: int = 0
    prompt_tokens_cached: int = 0
    completion_tokens: int = 0
    nodes_run: int = 0
    nodes_cached: int = 0
    wall_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class NodeFailure:
    node_id: str
    kind: str
    cause: str
    message: str
    inputs_preview: str

    def __str__(self) -> str:
        return f"node {self.node_id!r} ({self.kind}) failed: {self.cause}: {self.message}"


@dataclass
class RunResult:
    run_id: str
    status: str
    outputs: dict[str, Any] = field(default_factory=dict)
    node_outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    stats: RunStats = field(default_factory=RunStats)
    error: str | None = None
    failure: NodeFailure | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "outputs": to_jsonable(self.outputs),
            "stats": self.stats.to_json(),
            "error": self.error,
        }


def derive_seed(run_seed: int, *parts: object) -> int:
    """A 31-bit seed that depends only on the run seed and the given parts (e.g. node id)."""
    digest = hashlib.sha256("\x1f".join(map(str, (run_seed, *parts))).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def _truncate(value: Any, limit: int = 300) -> str:
    text = json.dumps(to_jsonable(value), ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


class NodeCache:
    """In-memory LRU of node outputs by input signature, shared across runs of one scheduler."""

    def __init__(self, max_entries: int = 512) -> None:
        self._data: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._max = max_entries
        self._lock = threading.Lock()

    def get(self, signature: str) -> dict[str, Any] | None:
        with self._lock:
            if signature in self._data:
                self._data.move_to_end(signature)
                return self._data[signature]
            return None

    def put(self, signature: str, outputs: dict[str, Any]) -> None:
        with self._lock:
            self._data[signature] = outputs
            self._data.move_to_end(signature)
            while len(self._data) > self._max:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


def resolve_inputs(wf: Workflow, given: dict[str, Any]) -> dict[str, Any]:
    """Workflow input values: given ones (strings from the CLI are coerced), else defaults."""
    issues: list[Issue] = []
    values: dict[str, Any] = {}
    for name in given:
        if name not in wf.inputs:
            issues.append(Issue("unknown_input", f"the workflow has no input {name!r}",
                                f"inputs are: {', '.join(wf.inputs) or 'none'}"))
    for name, spec in wf.inputs.items():
        value = given.get(name, spec.default)
        if value is None:
            issues.append(Issue("missing_value", f"input {name!r} has no value and no default",
                                f"pass it with -i {name}=..."))
            continue
        if spec.type == "number" and isinstance(value, str):
            try:
                value = float(value) if any(c in value for c in ".eE") else int(value)
            except ValueError:
                issues.append(Issue("bad_input", f"input {name!r} must be a number, got {value!r}",
                                    "pass a number"))
                continue
        if spec.type == "json" and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                issues.append(Issue("bad_input", f"input {name!r} is not valid JSON: {exc}", "pass JSON text"))
                continue
        if spec.type == "text" and isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)
        problem = check_input_value(spec.type, value)
        if problem:
            issues.append(Issue("bad_input", f"input {name!r} {problem}", f"pass a {spec.type}"))
            continue
        values[name] = value
    if issues:
        raise WorkflowError(issues)
    return values


class _RunState:
    """Mutable accounting of one run, shared by its node contexts (guarded by a lock)."""

    def __init__(self, run_id: str, budget: Budget, cancel: CancelToken, bus: EventBus) -> None:
        self.run_id = run_id
        self.budget = budget
        self.cancel = cancel
        self.bus = bus
        self.stats = RunStats()
        self.lock = threading.Lock()
        self.started = time.perf_counter()
        self.call_counter = 0

    def check_time(self) -> None:
        b = self.budget
        if b.max_seconds is not None and time.perf_counter() - self.started > b.max_seconds:
            self.exceed(f"max_seconds={b.max_seconds:g} reached")

    def exceed(self, why: str) -> None:
        if not self.cancel.cancelled:
            self.cancel.cancel(f"budget exceeded: {why}")
        raise BudgetExceededError(f"budget exceeded: {why}")

    def reserve_calls(self, n: int) -> None:
        with self.lock:
            b = self.budget
            if b.max_lm_calls is not None and self.stats.lm_calls + n > b.max_lm_calls:
                self.exceed(f"max_lm_calls={b.max_lm_calls} would be passed "
                            f"({self.stats.lm_calls} made, {n} more requested)")
            self.stats.lm_calls += n
        self.check_time()

    def add_tokens(self, prompt: int, evaluated: int, cached: int, completion: int) -> None:
        with self.lock:
            s = self.stats
            s.prompt_tokens += prompt
            s.prompt_tokens_evaluated += evaluated
            s.prompt_tokens_cached += cached
            s.completion_tokens += completion

    def tokens_used(self) -> int:
        return self.stats.prompt_tokens_evaluated + self.stats.completion_tokens

    def next_call_id(self) -> int:
        with self.lock:
            self.call_counter += 1
            return self.call_counter


class RunNodeContext:
    """The NodeContext given to one node run: traced, budgeted, cancellable access to the models."""

    def __init__(self, state: _RunState, node_id: str, kind: str, model: str | None, seed: int,
                 run_inputs: dict[str, Any], backend_for: Callable[[str], LLMBackend],
                 default_model: str, python_allowed: bool) -> None:
        self._state = state
        self.node_id = node_id
        self.kind = kind
        self.seed = seed
        self.cancel = state.cancel
        self.run_inputs = run_inputs
        self._backend_for = backend_for
        self._model = model or default_model
        self._python_allowed = python_allowed

    # -- helpers
    def backend(self, model: str | None = None) -> LLMBackend:
        return self._backend_for(model or self._model)

    def allow_python(self) -> bool:
        return self._python_allowed

    def _emit(self, type_: str, data: dict[str, Any]) -> None:
        self._state.bus.emit(Event(type_, self._state.run_id, self.node_id, data))

    def event(self, kind: str, data: dict[str, Any]) -> None:
        self._emit(ev.NODE_EVENT, {"kind": kind, **to_jsonable(data)})

    def progress(self, done: float, total: float, message: str = "") -> None:
        self._emit(ev.PROGRESS, {"done": done, "total": total, "message": message})

    def _token_watch(self, n: int) -> Callable[[int, str], None]:
        state = self._state
        max_tokens = state.budget.max_tokens

        def on_token(sample: int, text: str) -> None:
            self._emit(ev.TOKEN, {"sample": sample, "text": text})
            if max_tokens is not None:
                with state.lock:
                    state.stats.completion_tokens += 1
                    over = state.tokens_used() > max_tokens
                    state.stats.completion_tokens -= 1  # counted for real once the request returns
                if over:
                    state.cancel.cancel(f"budget exceeded: max_tokens={max_tokens} reached")
            if state.budget.max_seconds is not None and \
                    time.perf_counter() - state.started > state.budget.max_seconds:
                state.cancel.cancel(f"budget exceeded: max_seconds={state.budget.max_seconds:g} reached")

        return on_token

    def _after_call(self, usage_prompt: int, evaluated: int, cached: int, completion: int) -> None:
        st = self._state
        st.add_tokens(usage_prompt, evaluated, cached, completion)
        if st.budget.max_tokens is not None and st.tokens_used() > st.budget.max_tokens:
            st.exceed(f"max_tokens={st.budget.max_tokens} reached ({st.tokens_used()} used)")
        st.check_time()
        if st.cancel.cancelled:
            raise (BudgetExceededError if st.cancel.reason.startswith("budget") else CancelledError)(
                st.cancel.reason)

    # -- LM access
    def generate(self, prompt: Prompt, params: SamplingParams, n: int = 1, seeds: Sequence[int] | None = None,
                 model: str | None = None, purpose: str = "generate", parent: str | None = None,
                 tag: dict[str, Any] | None = None) -> GenerateResult:
        self.cancel.raise_if_cancelled()
        self._state.reserve_calls(n)
        backend = self.backend(model)
        start = time.time()
        result = backend.generate(prompt, params, n=n, seeds=seeds, on_token=self._token_watch(n),
                                  cancel=self.cancel)
        end = time.time()
        u = result.usage
        for i, c in enumerate(result.completions):
            self._emit(ev.LM_CALL, {
                "call_id": f"{self.node_id}#{self._state.next_call_id()}",
                "purpose": purpose, "model": backend.model_id, "sample_index": i, "n": n,
                "parent": parent, "tag": tag or {},
                "prompt": result.prompt_text, "completion": c.text,
                "prompt_tokens": c.prompt_tokens or u.prompt_tokens,
                # a shared prompt is evaluated once: attribute its evaluation to the first sample
                "prompt_tokens_evaluated": u.prompt_tokens_evaluated if i == 0 else 0,
                "prompt_tokens_cached": u.prompt_tokens_cached if i == 0 else 0,
                "completion_tokens": c.completion_tokens,
                "logprobs": [asdict(lp) for lp in c.logprobs] if c.logprobs is not None else None,
                "seed": c.seed, "finish_reason": c.finish_reason,
                "start": start, "end": start + c.time_s if c.time_s else end,
                "prefill_s": u.prefill_s, "decode_s": u.decode_s,
            })
        self._after_call(u.prompt_tokens, u.prompt_tokens_evaluated, u.prompt_tokens_cached, u.completion_tokens)
        return result

    def score(self, prefix: Prompt, continuations: Sequence[str], model: str | None = None,
              purpose: str = "score") -> ScoreResult:
        self.cancel.raise_if_cancelled()
        self._state.reserve_calls(len(continuations))
        backend = self.backend(model)
        start = time.time()
        result = backend.score(prefix, continuations, cancel=self.cancel)
        end = time.time()
        u = result.usage
        rendered = backend.render_prompt(prefix)
        for i, (cont, sc) in enumerate(zip(continuations, result.scores, strict=False)):
            self._emit(ev.LM_CALL, {
                "call_id": f"{self.node_id}#{self._state.next_call_id()}", "purpose": purpose,
                "model": backend.model_id, "sample_index": i, "n": len(continuations), "parent": None, "tag": {},
                "prompt": rendered, "completion": cont, "prompt_tokens": u.prompt_tokens,
                "prompt_tokens_evaluated": u.prompt_tokens_evaluated if i == 0 else 0,
                "prompt_tokens_cached": u.prompt_tokens_cached if i == 0 else 0,
                "completion_tokens": 0, "scored_tokens": sc.n_tokens, "logprob": sc.logprob,
                "logprobs": None, "seed": None, "finish_reason": "score", "start": start, "end": end,
                "prefill_s": u.prefill_s, "decode_s": u.decode_s,
            })
        self._after_call(u.prompt_tokens, u.prompt_tokens_evaluated, u.prompt_tokens_cached, 0)
        return result

    def choice_logprobs(self, prompt: Prompt, choices: Sequence[str], model: str | None = None,
                        purpose: str = "judge") -> ChoiceResult:
        self.cancel.raise_if_cancelled()
        self._state.reserve_calls(1)
        backend = self.backend(model)
        start = time.time()
        result = backend.choice_logprobs(prompt, choices, cancel=self.cancel)
        u = result.usage
        self._emit(ev.LM_CALL, {
            "call_id": f"{self.node_id}#{self._state.next_call_id()}", "purpose": purpose,
            "model": backend.model_id, "sample_index": 0, "n": 1, "parent": None, "tag": {},
            "prompt": backend.render_prompt(prompt), "completion": json.dumps(result.logprobs),
            "prompt_tokens": u.prompt_tokens, "prompt_tokens_evaluated": u.prompt_tokens_evaluated,
            "prompt_tokens_cached": u.prompt_tokens_cached, "completion_tokens": 0, "logprobs": None,
            "seed": None, "finish_reason": "choice", "start": start, "end": time.time(),
            "prefill_s": u.prefill_s, "decode_s": u.decode_s,
        })
        self._after_call(u.prompt_tokens, u.prompt_tokens_evaluated, u.prompt_tokens_cached, 0)
        return result


class Scheduler:
    """Compiles workflows to networkx graphs and runs them; one instance serves many runs and keeps
    the node cache between them."""

    def __init__(self, registry: NodeRegistry, provider: BackendProvider, cache: NodeCache | None = None,
                 max_workers: int = 8, allow_python: bool = True) -> None:
        self.registry = registry
        self.provider = provider
        self.cache = cache if cache is not None else NodeCache()
        self.max_workers = max_workers
        self.allow_python = allow_python

    def check(self, wf: Workflow) -> list[Issue]:
        return validate(wf, self.registry)

    def run(self, wf: Workflow, inputs: dict[str, Any] | None = None, *, seed: int = 0,
            budget: Budget | None = None, cancel: CancelToken | None = None,
            observers: Sequence[Observer] = (), run_id: str | None = None, use_cache: bool = True) -> RunResult:
        """Run the workflow. Raises WorkflowError (before touching any model) when it or its inputs are
        invalid; otherwise returns a RunResult whose status says how it ended."""
        problems = errors(self.check(wf))
        if problems:
            raise WorkflowError(problems)
        values = resolve_inputs(wf, inputs or {})
        budget = budget or Budget()
        cancel = cancel or CancelToken()
        run_id = run_id or uuid.uuid4().hex[:12]
        bus = EventBus(list(observers))
        state = _RunState(run_id, budget, cancel, bus)
        specs = model_specs(wf)
        bus.emit(Event(ev.RUN_START, run_id, None, {
            "workflow": wf.name, "workflow_yaml": wf.to_yaml(), "workflow_hash": wf.semantic_hash(),
            "inputs": to_jsonable(values), "seed": seed, "budget": asdict(budget),
            "models": {alias: asdict(spec) for alias, spec in specs.items()},
        }))
        timer = None
        if budget.max_seconds is not None:
            timer = threading.Timer(budget.max_seconds, lambda: cancel.cancel(
                f"budget exceeded: max_seconds={budget.max_seconds:g} reached"))
            timer.daemon = True
            timer.start()
        try:
            result = self._execute(wf, values, seed, state, specs, use_cache)
        finally:
            if timer is not None:
                timer.cancel()
        result.stats.wall_s = time.perf_counter() - state.started
        bus.emit(Event(ev.RUN_END, run_id, None, {
            "status": result.status, "outputs": to_jsonable(result.outputs), "stats": result.stats.to_json(),
            "error": result.error,
        }))
        return result

    # ------------------------------------------------------------------ internals

    def _backend_resolver(self, specs: dict[str, ModelSpec]) -> Callable[[str], LLMBackend]:
        lock = threading.Lock()
        resolved: dict[str, LLMBackend] = {}

        def backend_for(alias: str) -> LLMBackend:
            with lock:
                if alias not in resolved:
                    if alias not in specs:
                        raise NodeError(f"model {alias!r} is not declared in the workflow's models")
                    resolved[alias] = self.provider(specs[alias])
                return resolved[alias]

        return backend_for

    def _signature(self, node_kind: type[NodeKind], params: dict[str, Any], model: ModelSpec | None,
                   seed: int, input_sigs: dict[str, str]) -> str:
        payload = json.dumps({
            "kind": node_kind.kind, "params": params, "model": asdict(model) if model else None,
            "seed": seed, "inputs": input_sigs,
        }, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()

    def _execute(self, wf: Workflow, values: dict[str, Any], seed: int, state: _RunState,
                 specs: dict[str, ModelSpec], use_cache: bool) -> RunResult:
        graph = build_graph(wf)
        bus = state.bus
        run_id = state.run_id
        backend_for = self._backend_resolver(specs)
        default_model = next(iter(specs), DEFAULT_MODEL_ALIAS)
        outputs: dict[str, dict[str, Any]] = {}
        signatures: dict[str, str] = {}
        remaining = {n: graph.in_degree(n) for n in graph.nodes}
        order = {n.id: i for i, n in enumerate(wf.nodes)}
        ready = sorted((n for n, d in remaining.items() if d == 0), key=order.__getitem__)
        running: dict[Future[dict[str, Any]], str] = {}
        failure: NodeFailure | None = None
        stop_reason: str | None = None
        total = len(wf.nodes)
        finished = 0
        by_id = {n.id: n for n in wf.nodes}
        input_sig = {k: hashlib.sha256(json.dumps(v, sort_keys=True, default=str).encode()).hexdigest()
                     for k, v in values.items()}

        def gather(node_id: str) -> tuple[dict[str, Any], dict[str, str]]:
            node = by_id[node_id]
            got: dict[str, Any] = {}
            sigs: dict[str, str] = {}
            for port, ref in node.inputs.items():
                head, tail = split_ref(ref)  # type: ignore[misc]
                if head == "inputs":
                    got[port] = values[tail]
                    sigs[port] = "in:" + input_sig[tail]
                else:
                    got[port] = outputs[head][tail]
                    sigs[port] = f"{signatures[head]}.{tail}"
            return got, sigs

        def run_node(node_id: str, cls: type[NodeKind], params: dict[str, Any], got: dict[str, Any],
                     node_seed: int, signature: str) -> dict[str, Any]:
            node = by_id[node_id]
            ctx = RunNodeContext(state, node_id, cls.kind, node.model, node_seed, values, backend_for,
                                 default_model, self.allow_python)
            bus.emit(Event(ev.NODE_START, run_id, node_id, {
                "kind": cls.kind, "params": to_jsonable(params), "inputs": to_jsonable(got),
                "model": (node.model or default_model) if cls.uses_model else None,
                "seed": node_seed, "signature": signature,
            }))
            state.cancel.raise_if_cancelled()
            start = time.perf_counter()
            result = cls().run(got, params, ctx)
            missing = [p.name for p in cls.outputs if p.name not in result]
            if missing:
                raise NodeError(f"{cls.kind} did not produce output(s) {', '.join(missing)}")
            bus.emit(Event(ev.NODE_END, run_id, node_id, {
                "kind": cls.kind, "outputs": to_jsonable(result), "duration_s": time.perf_counter() - start,
                "signature": signature,
            }))
            return result

        executor = ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix=f"run-{run_id}")
        inputs_of: dict[str, dict[str, Any]] = {}
        try:
            while ready or running:
                while ready and failure is None and not state.cancel.cancelled:
                    node_id = ready.pop(0)
                    node = by_id[node_id]
                    cls = self.registry.get(node.kind)
                    assert cls is not None
                    params = cls.resolve_params(node.params)
                    got, sigs = gather(node_id)
                    node_seed = derive_seed(seed, node_id)
                    model_spec = specs.get(node.model or default_model) if cls.uses_model else None
                    signature = self._signature(cls, params, model_spec, node_seed, sigs)
                    signatures[node_id] = signature
                    cached = self.cache.get(signature) if use_cache else None
                    if cached is not None:
                        outputs[node_id] = cached
                        state.stats.nodes_cached += 1
                        finished += 1
                        bus.emit(Event(ev.NODE_CACHED, run_id, node_id, {
                            "kind": cls.kind, "outputs": to_jsonable(cached), "signature": signature,
                            "params": to_jsonable(params)}))
                        bus.emit(Event(ev.PROGRESS, run_id, None, {"done": finished, "total": total}))
                        ready.extend(self._release(graph, node_id, remaining, order))
                        continue
                    inputs_of[node_id] = got
                    fut = executor.submit(run_node, node_id, cls, params, got, node_seed, signature)
                    running[fut] = node_id
                if not running:
                    break
                done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for fut in sorted(done, key=lambda f: order[running[f]]):
                    node_id = running.pop(fut)
                    node = by_id[node_id]
                    exc = fut.exception()
                    if exc is None:
                        result = fut.result()
                        outputs[node_id] = result
                        state.stats.nodes_run += 1
                        finished += 1
                        self.cache.put(signatures[node_id], result)
                        bus.emit(Event(ev.PROGRESS, run_id, None, {"done": finished, "total": total}))
                        ready.extend(self._release(graph, node_id, remaining, order))
                        continue
                    if isinstance(exc, CancelledError):
                        stop_reason = state.cancel.reason or str(exc)
                        bus.emit(Event(ev.NODE_ERROR, run_id, node_id, {
                            "kind": node.kind, "error": stop_reason, "cause": type(exc).__name__,
                            "inputs_preview": _truncate(inputs_of.get(node_id))}))
                        continue
                    if failure is None:
                        failure = NodeFailure(node_id, node.kind, type(exc).__name__, str(exc),
                                              _truncate(inputs_of.get(node_id)))
                        state.cancel.cancel(f"node {node_id!r} failed")
                        if not isinstance(exc, NodeError | BackendError):
                            log.error("node %s crashed", node_id, exc_info=exc)
                    bus.emit(Event(ev.NODE_ERROR, run_id, node_id, {
                        "kind": node.kind, "error": str(exc), "cause": type(exc).__name__,
                        "inputs_preview": _truncate(inputs_of.get(node_id))}))
        finally:
            executor.shutdown(wait=True, cancel_futures=True)

        for node in wf.nodes:
            if node.id not in outputs and node.id not in inputs_of:
                bus.emit(Event(ev.NODE_SKIPPED, run_id, node.id, {
                    "kind": node.kind, "reason": "an upstream node failed or the run stopped"}))
        result = RunResult(run_id=run_id, status=SUCCEEDED, node_outputs=outputs, stats=state.stats)
        if failure is not None:
            result.status, result.failure, result.error = FAILED, failure, str(failure)
            if failure.inputs_preview:
                result.error += f" (inputs: {failure.inputs_preview})"
        elif state.cancel.cancelled or stop_reason:
            reason = state.cancel.reason or stop_reason or "cancelled"
            result.status = BUDGET_EXCEEDED if reason.startswith("budget") else CANCELLED
            result.error = reason
        if result.status == SUCCEEDED or all(
                split_ref(ref) and (split_ref(ref)[0] in outputs or split_ref(ref)[0] == "inputs")  # type: ignore[index]
                for ref in wf.outputs.values()):
            for name, ref in wf.outputs.items():
                head, tail = split_ref(ref)  # type: ignore[misc]
                result.outputs[name] = values[tail] if head == "inputs" else outputs[head][tail]
        return result

    @staticmethod
    def _release(graph: Any, node_id: str, remaining: dict[str, int], order: dict[str, int]) -> list[str]:
        newly = []
        for succ in graph.successors(node_id):
            remaining[succ] -= 1
            if remaining[succ] == 0:
                newly.append(succ)
        return sorted(newly, key=order.__getitem__)
