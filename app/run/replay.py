"""Replaying a run bundle (app/traces/bundle.py): its workflow, or an edited one, run again with each model call
answered from the bundle's recorded calls (backends/replay/backend.py) and only the others sent to a model, when one is
given; the run's result with the counts of each."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from app.run.events import Observer
from app.run.scheduler import BackendProvider, Budget, RunResult, Scheduler
from app.workflow.problems import WorkflowError
from app.workflow.spec import Workflow, load_workflow_text
from app.workflow.subworkflows import ChildLoader, version_hash
from app.workflow.validation import check
from backends.base import CancelToken, LLMBackend, ModelSpec
from backends.replay.backend import ReplayBackend, ReplayCounts, ReplayTable
from backends.replay.calls import model_ref
from nodes.base import from_jsonable
from nodes.registry import NodeRegistry, default_registry


class ReplayError(ValueError):
    """A bundle that cannot be replayed as it is (its workflow does not match its hash ...)."""


@dataclass
class ReplayOutcome:
    """A replayed run: its result, how many model calls the bundle answered and how many the model did."""

    result: RunResult
    calls: ReplayCounts
    workflow: Workflow
    edited: bool

    def to_json(self) -> dict[str, Any]:
        """What `metagen run --json` prints, plus {"calls": {"replayed", "model"}}."""
        return {**self.result.to_json(), "calls": self.calls.to_json()}

    @property
    def summary(self) -> str:
        c = self.calls
        return (f"{c.replayed} model call{'s' * (c.replayed != 1)} answered from the bundle, "
                f"{c.model} by the model")


def bundled_workflow(bundle: Mapping[str, Any]) -> Workflow:
    """The bundle's own workflow, checked against the hash its run recorded."""
    try:
        wf = load_workflow_text(bundle["workflow"]["yaml"])
    except WorkflowError as exc:
        raise ReplayError(f"the bundle's workflow does not load: {exc}") from None
    recorded = str(bundle["workflow"].get("hash") or "")
    if recorded and recorded not in (wf.semantic_hash(), _tree_version(wf, bundle)):
        raise ReplayError(f"the bundle's workflow YAML has hash {wf.semantic_hash()[:12]}, but its run recorded "
                          f"{recorded[:12]}: the bundle was edited or damaged; export it again")
    return wf


def _tree_version(wf: Workflow, bundle: Mapping[str, Any]) -> str:
    """The version a run of `wf` with the bundle's sub-workflows records (the tree hash when it has children)."""
    texts = dict(bundle["workflow"].get("subworkflows") or {})
    if not texts:
        return wf.semantic_hash()
    checked = check(wf, default_registry(), ChildLoader(texts=texts))
    return version_hash(wf, checked.children)


def replay_provider(table: ReplayTable, counts: ReplayCounts,
                    model_provider: BackendProvider | None) -> BackendProvider:
    """One ReplayBackend per model entry; calls the bundle lacks go to `model_provider`'s model (loaded on the first
    such call only), or fail when there is none."""
    made: dict[str, LLMBackend] = {}
    lock = threading.Lock()

    def provide(spec: ModelSpec) -> LLMBackend:
        ref = model_ref(spec)
        with lock:
            if ref not in made:
                fallback = (lambda: model_provider(spec)) if model_provider is not None else None
                made[ref] = ReplayBackend(table, ref, counts, fallback)  # type: ignore[assignment]
            return made[ref]

    return provide


def _budget(recorded: Any) -> Budget:
    known = {f.name for f in fields(Budget)}
    return Budget(**{k: v for k, v in (recorded or {}).items() if k in known})


def replay_bundle(bundle: Mapping[str, Any], *, workflow: Workflow | None = None,
                  model_provider: BackendProvider | None = None, registry: NodeRegistry | None = None,
                  observers: Sequence[Observer] = (), cancel: CancelToken | None = None,
                  children: ChildLoader | None = None, like: Scheduler | None = None) -> ReplayOutcome:
    """Run the bundle's workflow (or `workflow`, an edited one) on the bundle's inputs and seed with its recorded
    calls answering; the calls it lacks go to `model_provider` (None: they fail the run, naming the node and what
    changed). Sub-workflows come from the bundle for its own workflow, from files (`children`, else the
    workflows folders) for an edited one. `like`: a scheduler whose rules the replay keeps (share mode's: no python
    verifier, no code execution, capped limits). Raises ReplayError or WorkflowError before any node runs."""
    edited = workflow is not None
    wf = workflow if workflow is not None else bundled_workflow(bundle)
    run = bundle["run"]
    table = ReplayTable(bundle["calls"], bundle.get("models") or {})
    counts = ReplayCounts()
    loader = children if edited else ChildLoader(texts=dict(bundle["workflow"].get("subworkflows") or {}))
    scheduler = Scheduler(registry or default_registry(), replay_provider(table, counts, model_provider),
                          children=loader)
    if like is not None:
        scheduler.allow_python = like.allow_python
        scheduler.allow_code_execution = like.allow_code_execution
        scheduler.code_limit_caps = like.code_limit_caps
        scheduler.hide_cache_hits = like.hide_cache_hits
    scheduler.origin = ("replay", str(run.get("id") or ""))
    for node in bundle.get("cached_nodes") or []:  # came from the node cache when recorded: no calls to answer
        scheduler.cache.put(str(node["signature"]), from_jsonable(node["outputs"] or {}))
    inputs = {k: v for k, v in (run.get("inputs") or {}).items() if k in wf.inputs}
    result = scheduler.run(wf, inputs, seed=int(run.get("seed") or 0), budget=_budget(run.get("budget")),
                           observers=observers, cancel=cancel)
    return ReplayOutcome(result=result, calls=counts, workflow=wf, edited=edited)


__all__ = ["ReplayError", "ReplayOutcome", "bundled_workflow", "replay_bundle", "replay_provider"]
