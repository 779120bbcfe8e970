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
from app.run.node_context import Budget as Budget  # re-exported: callers build budgets from here
from app.run.node_context import BudgetExceededError as BudgetExceededError
from app.run.node_context import RunNodeContext, RunState, RunStats
from app.run.preflight import prm_token_issues
from app.run.run_pool import fanout_width
from app.run.sample_cache import SampleCache
from app.run.status import BUDGET_EXCEEDED as BUDGET_EXCEEDED  # the statuses, re-exported for callers
from app.run.status import CANCELLED as CANCELLED
from app.run.status import FAILED, SUCCEEDED, budget_stop_reason, stop_status
from app.workflow.model_specs import DEFAULT_MODEL_ALIAS, model_specs
from app.workflow.problems import Issue, WorkflowError, errors
from app.workflow.spec import Workflow
from app.workflow.subworkflows import (
    Child,
    ChildLoader,
    branch_children,
    branch_key,
    version_hash,
    workflow_texts,
)
from app.workflow.validation import build_graph, check, check_input_value, split_ref
from backends.base import (
    BackendError,
    CancelledError,
    CancelToken,
    LLMBackend,
    ModelSpec,
)
from backends.llama.models.gguf import model_prompt_format
from backends.replay.calls import Entry, RecordingBackend, model_ref
from nodes.base import NodeError, NodeKind, to_jsonable
from nodes.registry import NodeRegistry
from nodes.seeds import derive_seed as derive_seed  # re-exported: callers derive seeds from here

log = logging.getLogger(__name__)

SUBWORKFLOWS_NOTE = "subworkflows"
"""The run-level note holding the YAML of every child workflow the run used, by reference."""
WAIT_POLL_S = 0.1
"""How often a run waiting on its nodes looks at its cancel token."""
STOP_GRACE_S = 5.0
"""Seconds the nodes of a stopped run get to stop by themselves before the run ends without them."""
BackendProvider = Callable[[ModelSpec], LLMBackend]
"""Returns the (shared, loaded) backend for a model spec."""


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


class Scheduler:
    """Compiles workflows to networkx graphs and runs them; one instance serves many runs and keeps
    the node cache between them."""

    def __init__(self, registry: NodeRegistry, provider: BackendProvider, cache: NodeCache | None = None,
                 max_workers: int = 8, allow_python: bool = True, children: ChildLoader | None = None) -> None:
        self.registry = registry
        self.children = children
        """Where workflow nodes find their children (None: the user's workflows folder, then the examples)."""
        self.provider = provider
        self.cache = cache if cache is not None else NodeCache()
        self.samples = SampleCache()
        """Seeded samples and candidate scores of every run: raising N draws only the new samples."""
        self.max_workers = max_workers
        self.allow_python = allow_python
        self.allow_code_execution = True
        """Whether candidates' code may run (`method: tests`, `behaviour`); the share policy turns it off."""
        self.code_limit_caps: tuple[float, int] | None = None
        """The most (timeout_s, memory_mb) a candidate program may have; share mode: the owner's caps."""
        self.hide_cache_hits = False
        """Default of `run(hide_cache_hits=)`: share mode turns it on (see RunState.hide_cache_hits)."""
        self.stop_grace_s = STOP_GRACE_S
        """Seconds a stopped run waits for its nodes before it ends without them (see _DagRun.execute)."""
        self.origin: tuple[str, str] | None = None
        """(source, run id) recorded with each run's trace instead of "live": ("replay", the bundled run's id)."""
        self.record_calls = True
        """Record every model call's request and result (an LM_REQUEST event each, backends/replay/calls.py): what a
        run bundle carries so that `metagen replay` answers the calls without the model."""

    def check(self, wf: Workflow) -> list[Issue]:
        return check(wf, self.registry, self.children).issues

    def run(self, wf: Workflow, inputs: dict[str, Any] | None = None, *, seed: int = 0,
            budget: Budget | None = None, cancel: CancelToken | None = None,
            observers: Sequence[Observer] = (), run_id: str | None = None, use_cache: bool = True,
            hide_cache_hits: bool | None = None, share_samples: bool = False,
            children: ChildLoader | None = None) -> RunResult:
        """Run the workflow. Raises WorkflowError (before touching any model) when it or its inputs are
        invalid; otherwise returns a RunResult whose status says how it ended. `share_samples` derives samples'
        seeds from the run seed and their prompt rather than the node (see RunState.shared_seed). `children`
        finds this run's sub-workflows instead of the scheduler's loader (a workflow from a link: names only)."""
        checked = check(wf, self.registry, children or self.children)
        problems = errors(checked.issues)
        if problems:
            raise WorkflowError(problems)
        values = resolve_inputs(wf, inputs or {})
        if isinstance(seed, bool) or not isinstance(seed, int) or not -(2**63) <= seed < 2**63:  # a trace column
            raise WorkflowError([Issue("bad_input", f"the run seed must be a whole number from -2**63 to 2**63 - 1, "
                                       f"got {str(seed)[:40]}", "pick a smaller seed")])
        budget = budget or Budget()
        cancel = cancel or CancelToken()
        run_id = run_id or uuid.uuid4().hex[:12]
        bus = EventBus(list(observers))
        hide = self.hide_cache_hits if hide_cache_hits is None else hide_cache_hits
        specs = model_specs(wf)
        state = RunState(run_id, budget, cancel, bus, self.samples if use_cache else None, hide_cache_hits=hide,
                         fanout_width=fanout_width(specs.values()))
        state.shared_seed = seed if share_samples else None
        token_problems = prm_token_issues(wf, specs, self.provider)  # needs the PRM's vocabulary: loads it
        if token_problems:
            raise WorkflowError(token_problems)
        bus.emit(Event(ev.RUN_START, run_id, None, {
            "workflow": wf.name, "workflow_yaml": wf.to_yaml(), "workflow_hash": version_hash(wf, checked.children),
            "inputs": to_jsonable(values), "seed": seed, "budget": asdict(budget),
            "models": {alias: asdict(spec) for alias, spec in specs.items()},
            **({"source": self.origin[0], "imported_from": self.origin[1]} if self.origin else {}),
        }))
        if checked.children:  # the children's YAML goes with the run: it stays readable after a child file changes
            bus.emit(Event(ev.NODE_EVENT, run_id, None, {"kind": SUBWORKFLOWS_NOTE,
                                                          "workflows": workflow_texts(wf, checked)}))
        timer = None
        if budget.max_seconds is not None:
            timer = threading.Timer(budget.max_seconds, lambda: cancel.cancel(
                budget_stop_reason(f"max_seconds={budget.max_seconds:g} reached")))
            timer.daemon = True
            timer.start()
        try:
            result = _DagRun(self, wf, values, seed, state, specs, use_cache, children=checked.children).execute()
        finally:
            if timer is not None:
                timer.cancel()
        result.stats.wall_s = time.perf_counter() - state.started
        bus.emit(Event(ev.RUN_END, run_id, None, {
            "status": result.status, "outputs": to_jsonable(result.outputs), "stats": result.stats.to_json(),
            "error": result.error,
        }))
        bus.close()  # a node left behind by a stop writes nothing after the run's end
        return result

    # ------------------------------------------------------------------ internals

    def _backend_resolver(self, specs: dict[str, ModelSpec],
                          on_resolved: Callable[[str, LLMBackend], None] | None = None,
                          record: Callable[[str | None, Entry], None] | None = None) -> Callable[[str], LLMBackend]:
        lock = threading.Lock()
        resolved: dict[str, LLMBackend] = {}

        def backend_for(alias: str) -> LLMBackend:
            with lock:
                if alias not in resolved:
                    if alias not in specs:
                        raise NodeError(f"model {alias!r} is not declared in the workflow's models")
                    backend = self.provider(specs[alias])
                    if record is not None:
                        backend = RecordingBackend(backend, model_ref(specs[alias]), record)  # type: ignore[assignment]
                        record(None, {"node": None, "method": "model", "model": model_ref(specs[alias]),
                                      "request": {"alias": alias, "spec": asdict(specs[alias])},
                                      "result": {"model_id": backend.model_id}})
                    resolved[alias] = backend
                    if on_resolved is not None:
                        on_resolved(alias, resolved[alias])
                return resolved[alias]

        return backend_for

    def _signature(self, node_kind: type[NodeKind], params: dict[str, Any], model: ModelSpec | None,
                   seed: int, input_sigs: dict[str, str]) -> str:
        payload = json.dumps({
            "kind": node_kind.kind, "params": params, "model": asdict(model) if model else None,
            "seed": seed, "inputs": input_sigs,
        }, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()


class _DagRun:
    """One execution of a workflow's DAG: starts ready nodes (from the cache or on the worker pool),
    records what they produce or why they failed, and works out how the run ended.

    Everything but `_run_node` runs on the scheduling thread, so the bookkeeping needs no lock. A sub-workflow
    runs as another _DagRun on the same RunState, its node ids prefixed by the workflow node's path (`w/2/`)."""

    def __init__(self, scheduler: Scheduler, wf: Workflow, values: dict[str, Any], seed: int, state: RunState,
                 specs: dict[str, ModelSpec], use_cache: bool, *, children: dict[str, Child] | None = None,
                 prefix: str = "") -> None:
        self.scheduler = scheduler
        self.children = children or {}
        self.prefix = prefix
        self.wf = wf
        self.values = values
        self.seed = seed
        self.state = state
        self.specs = specs
        self.use_cache = use_cache
        self.bus = state.bus
        self.run_id = state.run_id
        self.graph = build_graph(wf)
        self.backend_for = scheduler._backend_resolver(specs, self._record_model,
                                                       self._record_call if scheduler.record_calls else None)
        self.default_model = next(iter(specs), DEFAULT_MODEL_ALIAS)
        self.by_id = {n.id: n for n in wf.nodes}
        self.order = {n.id: i for i, n in enumerate(wf.nodes)}
        self.total = len(wf.nodes)
        self.input_sig = {k: hashlib.sha256(json.dumps(v, sort_keys=True, default=str).encode()).hexdigest()
                          for k, v in values.items()}
        self.remaining = {n: self.graph.in_degree(n) for n in self.graph.nodes}
        self.ready = sorted((n for n, d in self.remaining.items() if d == 0), key=self.order.__getitem__)
        self.running: dict[Future[dict[str, Any]], str] = {}
        self.outputs: dict[str, dict[str, Any]] = {}
        self.signatures: dict[str, str] = {}
        self.inputs_of: dict[str, dict[str, Any]] = {}
        """Inputs of the nodes handed to the worker pool (the nodes that started for real)."""
        self.failure: NodeFailure | None = None
        self.stop_reason: str | None = None
        self.finished = 0

    def _emit(self, type_: str, node_id: str | None, data: dict[str, Any]) -> None:
        if node_id is None and self.prefix and type_ == ev.PROGRESS:
            return  # a child's progress is not the run's
        self.bus.emit(Event(type_, self.run_id, self.prefix + node_id if node_id is not None else None, data))

    def _record_call(self, node_id: str | None, entry: Entry) -> None:
        """One model call's request and result (backends.replay.calls), for run bundles and replay."""
        self.bus.emit(Event(ev.LM_REQUEST, self.run_id, node_id, entry))

    def _record_model(self, alias: str, backend: LLMBackend) -> None:
        """A run-level `model` event when a model that knows its weights (a llama.cpp model from the pool:
        backends.llama.models.cpu_weights.WeightsChoice) is first used: which weights ran and why, so the trace says
        what produced the numbers."""
        weights = getattr(backend, "weights", None)
        if weights is not None:
            self.bus.emit(Event(ev.NODE_EVENT, self.run_id, None, {
                "kind": "model", "alias": alias, "model_id": backend.model_id, "weights": to_jsonable(weights),
                "prompt_format": model_prompt_format(getattr(backend, "path", None))}))

    # -- the loop
    def execute(self) -> RunResult:
        """Run the DAG. A sub-workflow's nodes take the run's helper threads (or this thread when none is free); the
        run's own nodes take a worker pool of the scheduler's size. Nodes still running `stop_grace_s` after a stop
        (cancel, time cap, a failure) are left behind, so that a stop ends the run whatever its nodes wait on."""
        executor = None if self.prefix else ThreadPoolExecutor(max_workers=self.scheduler.max_workers,
                                                                  thread_name_prefix=f"run-{self.run_id}")
        left_behind = False
        try:
            while self.ready or self.running:
                self._start_ready(executor)
                if not self.running:
                    break
                if not self._collect_some():
                    left_behind = True
                    break
        finally:
            if executor is not None:
                executor.shutdown(wait=not left_behind, cancel_futures=True)
        self._report_skipped()
        return self._result()

    def _collect_some(self) -> bool:
        """Wait for a running node to finish and record it; False when the run stopped and its nodes did not
        finish within the grace period (they are then reported stopped and left behind)."""
        stopped_at: float | None = None
        while True:
            done, _ = wait(list(self.running), timeout=WAIT_POLL_S, return_when=FIRST_COMPLETED)
            if done:
                for fut in sorted(done, key=lambda f: self.order[self.running[f]]):
                    self._collect(fut)
                return True
            if not self.state.cancel.cancelled:
                continue
            stopped_at = stopped_at if stopped_at is not None else time.perf_counter()
            if time.perf_counter() - stopped_at >= self.scheduler.stop_grace_s:
                self._leave_behind()
                return False

    def _leave_behind(self) -> None:
        reason = self.state.cancel.reason or "cancelled"
        self.stop_reason = reason
        for node_id in sorted(self.running.values(), key=self.order.__getitem__):
            log.warning("run %s: node %s did not stop within %gs of the stop (%s); left behind", self.run_id,
                        self.prefix + node_id, self.scheduler.stop_grace_s, reason)
            self._node_error(node_id, f"{reason} (the node did not stop in time and was left behind)",
                             CancelledError(reason))
        self.running.clear()

    def _start_ready(self, executor: ThreadPoolExecutor | None) -> None:
        """Start the ready nodes in file order, until a node fails or the run is cancelled."""
        while self.ready and self.failure is None and not self.state.cancel.cancelled:
            self._start(self.ready.pop(0), executor)

    def _start(self, node_id: str, executor: ThreadPoolExecutor | None) -> None:
        """Serve one ready node from the cache, or start it: on the worker pool (the run's own nodes), or for a
        sub-workflow's node on a free helper of the run, else on this thread."""
        node = self.by_id[node_id]
        cls = self._kind(node_id)
        params = cls.typed_params(node.params)
        got, sigs = self._gather(node_id)
        node_seed = derive_seed(self.seed, node_id)
        signature = self._sign(node_id, cls, self._signed_params(node_id, params), node_seed, sigs)
        cached = self._lookup_cache(signature)
        if cached is not None:
            self._record_cached(node_id, cls, params, cached, signature)
            return
        self.inputs_of[node_id] = got
        args = (node_id, cls, params, got, node_seed, signature)
        if executor is None:
            fut = self.state.pool.submit(self._run_node, *args) if self.ready or self.running else \
                self.state.pool.submit_here(self._run_node, *args)  # a child's only runnable node: this thread
        else:
            fut = executor.submit(self._run_node, *args)
        self.running[fut] = node_id

    # -- one node's inputs, signature and run
    def _gather(self, node_id: str) -> tuple[dict[str, Any], dict[str, str]]:
        """The node's input values by port, and the signature of each (a run input's hash, or the
        producing node's signature and port)."""
        got: dict[str, Any] = {}
        sigs: dict[str, str] = {}
        for port, ref in self.by_id[node_id].inputs.items():
            head, tail = split_ref(ref)  # type: ignore[misc]
            if head == "inputs":
                got[port] = self.values[tail]
                sigs[port] = "in:" + self.input_sig[tail]
            else:
                got[port] = self.outputs[head][tail]
                sigs[port] = f"{self.signatures[head]}.{tail}"
        return got, sigs

    def _kind(self, node_id: str) -> type[NodeKind]:
        """The node's kind: a workflow node's is bound to its child's ports."""
        child = self.children.get(node_id)
        cls = child.kind if child is not None else self.scheduler.registry.get(self.by_id[node_id].kind)
        assert cls is not None
        return cls

    def _signed_params(self, node_id: str, params: dict[str, Any]) -> dict[str, Any]:
        """What the signature takes of a node's params: the model entries its `model` / `judge_model` params name
        (a PRM, reward model or judge); a workflow node's also name its child's canonical hash, its mapped input
        and the models it maps, so editing the child re-runs the nodes that use it."""
        scorers = {key: asdict(self.specs[alias]) for key in ("model", "judge_model")
                    if isinstance(alias := params.get(key), str) and alias in self.specs}
        if scorers:  # a PRM / reward model / judge named in the params: its entry is part of what the node computes
            params = {**params, "scoring_models": scorers}
        branches = branch_children(self.children, node_id)
        if branches:  # a route node: editing any branch re-runs it
            return {**params, "branches_hash": [c.tree_hash for c in branches]}
        child = self.children.get(node_id)
        if child is None:
            return params
        models = {alias: asdict(self.specs[target]) for alias, target in sorted(child.models.items())
                  if target in self.specs}
        return {**params, "map": child.mapped or "", "child": child.tree_hash, "mapped_models": models}

    def _model_of(self, node_id: str) -> str:
        return self.by_id[node_id].model or self.default_model

    def _sign(self, node_id: str, cls: type[NodeKind], params: dict[str, Any], node_seed: int,
              input_sigs: dict[str, str]) -> str:
        model_spec = self.specs.get(self._model_of(node_id)) if cls.uses_model else None
        signature = self.scheduler._signature(cls, params, model_spec, node_seed, input_sigs)
        self.signatures[node_id] = signature
        return signature

    def _lookup_cache(self, signature: str) -> dict[str, Any] | None:
        return self.scheduler.cache.get(signature) if self.use_cache else None

    def _run_node(self, node_id: str, cls: type[NodeKind], params: dict[str, Any], got: dict[str, Any],
                  node_seed: int, signature: str) -> dict[str, Any]:
        """Runs on a worker thread: the node_start event, the node itself, the node_end event."""
        node = self.by_id[node_id]
        runner = None
        if node_id in self.children or branch_children(self.children, node_id):
            if node_id in self.children:
                params = {**params, "map": self.children[node_id].mapped or ""}

            def runner(runs: Sequence[dict[str, Any]], mapped: bool, branch: int | None = None) -> list[dict[str, Any]]:
                return self._run_child(node_id, node_seed, runs, mapped, branch)

        ctx = RunNodeContext(self.state, self.prefix + node_id, cls.kind, node.model, node_seed, self.values,
                             self.backend_for, self.default_model, self.scheduler.allow_python, runner,
                             code_allowed=self.scheduler.allow_code_execution,
                             code_caps=self.scheduler.code_limit_caps)
        self._emit(ev.NODE_START, node_id, {
            "kind": cls.kind, "params": to_jsonable(params), "inputs": to_jsonable(got),
            "model": self._model_of(node_id) if cls.uses_model else None,
            "seed": node_seed, "signature": signature,
        })
        self.state.cancel.raise_if_cancelled()
        start = time.perf_counter()
        result = cls().run(got, params, ctx)
        missing = [p.name for p in cls.outputs if p.name not in result]
        if missing:
            raise NodeError(f"{cls.kind} did not produce output(s) {', '.join(missing)}")
        self._emit(ev.NODE_END, node_id, {
            "kind": cls.kind, "outputs": to_jsonable(result), "duration_s": time.perf_counter() - start,
            "signature": signature,
        })
        return result

    def _run_child(self, node_id: str, seed: int, runs: Sequence[dict[str, Any]], mapped: bool,
                   branch: int | None = None) -> list[dict[str, Any]]:
        """Runs on the workflow node's thread: its child (a route node's: the branch's) once per inputs dict, as
        many at once as the run's helper threads allow (so their engine requests batch), on this run's state,
        counted against the run's cap on child runs; the outputs of each, or the first child's failure."""
        key = node_id if branch is None else branch_key(node_id, branch)
        if key not in self.children:
            raise NodeError(f"node {node_id!r} has no sub-workflow {key!r}")
        child = self.children[key]
        specs = model_specs(child.workflow)
        specs.update({alias: self.specs[target] for alias, target in child.models.items() if target in self.specs})

        def one(index: int, given: dict[str, Any]) -> dict[str, Any]:
            path = f"{self.prefix}{key}/" + (f"{index}/" if mapped else "")
            try:
                values = resolve_inputs(child.workflow, given)
            except WorkflowError as exc:
                raise NodeError(f"sub-workflow {path.rstrip('/')}: {exc}") from None
            run = _DagRun(self.scheduler, child.workflow, values, derive_seed(seed, index) if mapped else seed,
                          self.state, specs, self.use_cache, children=child.checked.children, prefix=path)
            return run.finish_as_child()

        self.state.reserve_child_runs(len(runs))  # the cap, before any of them starts
        if len(runs) == 1 and not mapped:
            return [one(0, dict(runs[0]))]
        futures = self.state.pool.map(one, [dict(given) for given in runs], self.state.cancel)
        failures = [f.exception() for f in futures if f.exception() is not None]
        failed = next((e for e in failures if not isinstance(e, CancelledError)), None)
        if failed is not None or failures:  # a child's failure, rather than the others' stops that it caused
            raise failed or failures[0]  # type: ignore[misc]
        return [f.result() for f in futures]

    def finish_as_child(self) -> dict[str, Any]:
        """Execute as a sub-workflow: its outputs, or the exception that stops the workflow node."""
        result = self.execute()
        if result.status == SUCCEEDED:
            return result.outputs
        if result.failure is not None:
            f = result.failure
            raise NodeError(f"node {self.prefix}{f.node_id} ({f.kind}) failed: {f.cause}: {f.message}")
        reason = result.error or "cancelled"
        raise (BudgetExceededError if result.status == BUDGET_EXCEEDED else CancelledError)(reason)

    # -- recording what happened
    def _record_cached(self, node_id: str, cls: type[NodeKind], params: dict[str, Any], cached: dict[str, Any],
                       signature: str) -> None:
        self.outputs[node_id] = cached
        self.state.stats.nodes_cached += 1
        self._emit(ev.NODE_CACHED, node_id, {
            "kind": cls.kind, "outputs": to_jsonable(cached), "signature": signature,
            "params": to_jsonable(params)})
        self._done(node_id)

    def _collect(self, fut: Future[dict[str, Any]]) -> None:
        """Record a finished future: the node's outputs, its stop by a cancel, or its failure."""
        node_id = self.running.pop(fut)
        exc = fut.exception()
        if exc is None:
            self._record_result(node_id, fut.result())
        elif isinstance(exc, CancelledError):
            self._on_stopped(node_id, exc)
        else:
            self._on_failure(node_id, exc)

    def _record_result(self, node_id: str, result: dict[str, Any]) -> None:
        self.outputs[node_id] = result
        self.state.stats.nodes_run += 1
        self.scheduler.cache.put(self.signatures[node_id], result)
        self._done(node_id)

    def _done(self, node_id: str) -> None:
        """Count a node as finished and make its successors ready once all their inputs are there."""
        self.finished += 1
        self._emit(ev.PROGRESS, None, {"done": self.finished, "total": self.total})
        self.ready.extend(self._release(node_id))

    def _release(self, node_id: str) -> list[str]:
        newly = []
        for succ in self.graph.successors(node_id):
            self.remaining[succ] -= 1
            if self.remaining[succ] == 0:
                newly.append(succ)
        return sorted(newly, key=self.order.__getitem__)

    def _on_stopped(self, node_id: str, exc: CancelledError) -> None:
        """A node stopped because the run was cancelled (by the user, a budget or another node's failure)."""
        self.stop_reason = self.state.cancel.reason or str(exc)
        self._node_error(node_id, self.stop_reason, exc)

    def _on_failure(self, node_id: str, exc: BaseException) -> None:
        """A node failed: the first failure stops the run (the nodes still running are cancelled)."""
        if self.failure is None:
            node = self.by_id[node_id]
            self.failure = NodeFailure(node_id, node.kind, type(exc).__name__, str(exc),
                                       _truncate(self.inputs_of.get(node_id)))
            self.state.cancel.cancel(f"node {node_id!r} failed")
            if not isinstance(exc, NodeError | BackendError):
                log.error("node %s crashed", node_id, exc_info=exc)
        self._node_error(node_id, str(exc), exc)

    def _node_error(self, node_id: str, error: str, exc: BaseException) -> None:
        self._emit(ev.NODE_ERROR, node_id, {
            "kind": self.by_id[node_id].kind, "error": error, "cause": type(exc).__name__,
            "inputs_preview": _truncate(self.inputs_of.get(node_id))})

    def _report_skipped(self) -> None:
        """A node_skipped event for every node that neither ran nor came from the cache."""
        for node in self.wf.nodes:
            if node.id not in self.outputs and node.id not in self.inputs_of:
                self._emit(ev.NODE_SKIPPED, node.id, {
                    "kind": node.kind, "reason": "an upstream node failed or the run stopped"})

    # -- how the run ended
    def _result(self) -> RunResult:
        result = RunResult(run_id=self.run_id, status=SUCCEEDED, node_outputs=self.outputs, stats=self.state.stats)
        if self.failure is not None:
            result.status, result.failure, result.error = FAILED, self.failure, str(self.failure)
            if self.failure.inputs_preview:
                result.error += f" (inputs: {self.failure.inputs_preview})"
        elif self.state.cancel.cancelled or self.stop_reason:
            reason = self.state.cancel.reason or self.stop_reason or "cancelled"
            result.status = stop_status(reason)
            result.error = reason
        if result.status == SUCCEEDED or self._outputs_available():
            result.outputs = self._workflow_outputs()
        return result

    def _outputs_available(self) -> bool:
        """Whether every workflow output refers to a run input or to a node that produced its outputs."""
        refs = [split_ref(ref) for ref in self.wf.outputs.values() if str(ref).strip()]  # unwired: stays empty
        return all(parts is not None and (parts[0] in self.outputs or parts[0] == "inputs") for parts in refs)

    def _workflow_outputs(self) -> dict[str, Any]:
        outputs: dict[str, Any] = {}
        for name, ref in self.wf.outputs.items():
            if not str(ref).strip():
                continue  # an Output node not wired yet (a warning, not an error)
            head, tail = split_ref(ref)  # type: ignore[misc]
            outputs[name] = self.values[tail] if head == "inputs" else self.outputs[head][tail]
        return outputs
