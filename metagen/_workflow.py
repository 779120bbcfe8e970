"""`metagen.Workflow` and `metagen.load`: a workflow as a Python object over the app's workflow model."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.run.events import LM_REQUEST as LM_REQUEST_EVENT
from app.run.events import TOKEN as TOKEN_EVENT
from app.run.events import Event, EventRecorder
from app.run.scheduler import Budget, CancelToken
from app.service.versions import save_workflow_file
from app.service.views import workflow_html
from app.service.workflow_api import checked, load_source
from app.service.workflow_api import with_params as _with_params
from app.workflow.problems import Issue
from app.workflow.problems import WorkflowError as _ServiceWorkflowError
from app.workflow.spec import InputSpec, NodeSpec, workflow_from_dict
from app.workflow.spec import Workflow as _Spec
from metagen._args import expect
from metagen._errors import WorkflowError
from metagen._progress import RunBar
from metagen._studio import Studio, studio_or_default
from nodes.registry import default_registry

if TYPE_CHECKING:
    from metagen._results import RunResult

__all__ = ["Workflow", "load"]

BUDGET_KEYS = ("max_lm_calls", "max_tokens", "max_seconds")


def _checked(spec: _Spec, source: str) -> _Spec:
    try:
        checked(spec, default_registry())
    except _ServiceWorkflowError as exc:
        raise WorkflowError.from_service(exc, source) from None
    return spec


def load(source: str | Path) -> Workflow:
    """Load a workflow from a file path, YAML text, or a bundled example's name, and check it.

    Raises `metagen.WorkflowError` with every issue (codes, lines, hints) as `metagen validate` reports them.

    Example:
        >>> import metagen
        >>> wf = metagen.load("workflows/self_consistency.yaml")   # or metagen.load("self_consistency")
        >>> sorted(wf.inputs), sorted(wf.outputs)
        (['question'], ['answer', 'votes'])
    """
    expect("source", source, (str, Path), "a path, YAML text or an example's name (str or pathlib.Path)")
    try:
        spec, label = load_source(source)
    except _ServiceWorkflowError as exc:
        raise WorkflowError.from_service(exc, str(source) if isinstance(source, Path) else "") from None
    return Workflow(_checked(spec, label), source=label)


def _budget(budget: Any) -> Budget | None:
    if budget is None or isinstance(budget, Budget):
        return budget
    expect("budget", budget, dict, "a dict such as {'max_lm_calls': 32, 'max_tokens': 20000, 'max_seconds': 60}")
    unknown = sorted(set(budget) - set(BUDGET_KEYS))
    if unknown:
        raise ValueError(f"budget: unknown key(s) {', '.join(map(repr, unknown))}; use {', '.join(BUDGET_KEYS)}")
    for key, value in budget.items():
        if value is not None:
            expect(f"budget[{key!r}]", value, (int, float), "a positive number or None")
            if not value > 0:
                raise ValueError(f"budget[{key!r}] must be positive, got {value}")
    return Budget(**budget)


class Workflow:
    """A meta-generation workflow: nodes (samplers, voters, verifiers, search...) wired into a graph.

    Make one with `metagen.load(...)` or `Workflow.from_dict(...)`; it is checked on creation (a problem raises
    `metagen.WorkflowError`). It is a value: `with_params` returns a changed copy.

    Example:
        >>> import metagen
        >>> wf = metagen.load("self_consistency")
        >>> wf16 = wf.with_params({"think.n": 16, "think.temperature": 0.7})
        >>> result = wf16.run({"question": "What is 6 * 7?"})   # doctest: +SKIP
        >>> result.outputs["answer"]                             # doctest: +SKIP
        '42'
    """

    def __init__(self, spec: _Spec, *, source: str = "") -> None:
        expect("spec", spec, _Spec, "an app.workflow.spec.Workflow (use metagen.load or Workflow.from_dict)")
        self._spec = spec
        self._source = source

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Workflow:
        """A workflow from the dict form of its YAML (as `to_dict()` gives it); checked like `load`.

        Example:
            >>> wf = metagen.Workflow.from_dict(metagen.load("self_consistency").to_dict())
        """
        expect("data", data, dict, "a dict (the YAML's mapping)")
        try:
            spec = workflow_from_dict(copy.deepcopy(data))
        except _ServiceWorkflowError as exc:
            raise WorkflowError.from_service(exc) from None
        return cls(_checked(spec, ""))

    # ------------------------------------------------------------------ what it is

    @property
    def name(self) -> str:
        return self._spec.name

    @property
    def description(self) -> str:
        return self._spec.description

    @property
    def inputs(self) -> dict[str, InputSpec]:
        """The workflow's inputs by name (type, default, description); a copy."""
        return copy.deepcopy(self._spec.inputs)

    @property
    def outputs(self) -> dict[str, str]:
        """The workflow's outputs: name -> the node port it reads ("vote.answer")."""
        return dict(self._spec.outputs)

    @property
    def nodes(self) -> list[NodeSpec]:
        """The nodes (id, kind, model, params, inputs) in file order; copies."""
        return copy.deepcopy(self._spec.nodes)

    @property
    def spec(self) -> _Spec:
        """A copy of the app's workflow model underneath (for the service layer's own functions)."""
        return copy.deepcopy(self._spec)

    def to_dict(self) -> dict[str, Any]:
        """The YAML's mapping as plain dicts and lists."""
        return self._spec.to_dict()

    def to_yaml(self) -> str:
        """The canonical YAML text (what the editor and `save` write)."""
        return self._spec.to_yaml()

    def save(self, path: str | Path, *, message: str = "") -> Path:
        """Write the canonical YAML to `path` (atomically) and record it as a version of that workflow in the
        trace database (`metagen history NAME` lists them; an identical save adds none); returns the path.

        Example:
            >>> wf.save("my_workflow.yaml", message="n=16")   # doctest: +SKIP
        """
        expect("path", path, (str, Path), "a file path (str or pathlib.Path)")
        expect("message", message, (str,), "text")
        return save_workflow_file(self._spec, Path(path).expanduser(), message=message)

    def validate(self) -> list[Issue]:
        """Every issue `metagen validate` reports (warnings included; errors were refused on creation)."""
        from app.workflow.validation import validate

        return validate(self._spec, default_registry())

    def with_params(self, params: dict[str, Any]) -> Workflow:
        """A copy with node params changed: {"node.param": value}. An unknown node or param, or a value out of
        the param's range, raises ValueError naming it.

        Example:
            >>> wf4 = metagen.load("self_consistency").with_params({"think.n": 4})
            >>> wf4.nodes[0].params["n"]
            4
        """
        return Workflow(_checked(_with_params(self._spec, params, default_registry()), self._source),
                        source=self._source)

    # ------------------------------------------------------------------ running

    def run(self, inputs: dict[str, Any] | None = None, *, seed: int = 0, budget: dict[str, Any] | Budget | None = None,
            trace: bool = True, on_event: Callable[[Event], None] | None = None, progress: bool = True,
            studio: Studio | None = None, cancel: CancelToken | None = None) -> RunResult:
        """Run the workflow and wait for it; returns a `RunResult` (its `status` says how it ended).

        Args:
            inputs: input values by name (the others take their defaults).
            seed: the run seed (every sample's seed derives from it: same seed, same result).
            budget: limits for the whole run: {"max_lm_calls", "max_tokens", "max_seconds"}.
            trace: record the run in the trace database (its figures need it).
            on_event: called with every event (node start/end, LM calls, votes...) while the run goes on.
            progress: a progress bar over the nodes once the run takes more than a second.
            studio: the Studio to run on (default: the shared one, which keeps the model loaded).
            cancel: a token whose `cancel()` stops the run from another thread.

        Example:
            >>> result = metagen.load("self_consistency").run({"question": "What is 3 + 4?"}, seed=1)  # doctest: +SKIP
            >>> result.status, result.outputs["answer"], result.stats["calls"]                       # doctest: +SKIP
            ('succeeded', '7', 8)
        """
        from metagen._results import RunResult

        if inputs is not None:
            expect("inputs", inputs, dict, "a dict of input values by name, or None")
        expect("seed", seed, int, "a whole number")
        expect("trace", trace, bool, "True or False")
        expect("progress", progress, bool, "True or False")
        if on_event is not None and not callable(on_event):
            raise TypeError(f"on_event must be a function taking an event, got {type(on_event).__name__}")
        if cancel is not None:
            expect("cancel", cancel, CancelToken, "a CancelToken or None")
        limits = _budget(budget)
        owner = studio_or_default(studio)
        recorder = EventRecorder(skip=(TOKEN_EVENT, LM_REQUEST_EVENT))  # the traces keep the calls' records
        observers: list[Any] = [recorder]
        if on_event is not None:
            observers.append(_Callback(on_event))
        bar = RunBar(self.name, len(self._spec.nodes)) if progress else None
        if bar is not None:
            observers.append(bar)
        try:
            result = owner.service.run_workflow(self._spec, inputs, seed=seed, budget=limits, observers=observers,
                                                trace=trace, cancel=cancel)
        except _ServiceWorkflowError as exc:
            raise WorkflowError.from_service(exc, self._source) from None
        finally:
            if bar is not None:
                bar.close()
        return RunResult.from_scheduler(result, recorder.events, owner, traced=trace)

    async def arun(self, inputs: dict[str, Any] | None = None, **options: Any) -> RunResult:
        """`run` without blocking the event loop (it runs on a worker thread); cancelling the task cancels the run.

        Example:
            >>> result = await metagen.load("self_consistency").arun({"question": "What is 2 + 9?"})  # doctest: +SKIP
        """
        token = options.pop("cancel", None) or CancelToken()
        task = asyncio.ensure_future(asyncio.to_thread(self.run, inputs, cancel=token, **options))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            token.cancel("the task was cancelled")
            await asyncio.wait([task])
            raise

    # ------------------------------------------------------------------ display

    def _repr_html_(self) -> str:
        return workflow_html(self._spec.to_dict(), self._spec.to_yaml())

    def __repr__(self) -> str:
        return (f"<metagen.Workflow {self.name!r}: {len(self._spec.nodes)} nodes, inputs "
                f"{list(self._spec.inputs)}, outputs {list(self._spec.outputs)}>")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workflow) and other._spec.to_dict() == self._spec.to_dict()

    __hash__ = None  # type: ignore[assignment]


class _Callback:
    """`on_event` as an event observer."""

    def __init__(self, function: Callable[[Event], None]) -> None:
        self.function = function

    def on_event(self, event: Event) -> None:
        if event.type != LM_REQUEST_EVENT:  # the call records are the traces' (app/traces/bundle.py), not the caller's
            self.function(event)
