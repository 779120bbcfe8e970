"""The tune's candidates: every example workflow (or the ones named) that binds to the dataset and whose output the
metric can grade, each with its natural compute axis on a doubling grid within the budget; the rest skipped, with
the reason. Greedy chain_of_thought is always one of them: the baseline."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.eval.baseline import point_label
from app.eval.datasets import Dataset, DatasetError, bind, check_rows
from app.eval.estimate import completion_ceiling
from app.eval.metrics import Metric
from app.eval.selection import grading_leaks, selecting_nodes
from app.eval.sweep import SweepError, apply_point, parse_sweep
from app.eval.tune.api import SKIPPED
from app.eval.tune.coupled import fit_points
from app.eval.tune.errors import TuneError
from app.eval.tune.model_override import replace_models
from app.workflow.model_refs import hub_needs
from app.workflow.problems import WorkflowError, errors
from app.workflow.spec import Workflow, load_workflow, workflow_from_dict
from app.workflow.validation import validate
from nodes.registry import NodeRegistry

log = logging.getLogger(__name__)

BASELINE = "chain_of_thought"
"""The example every tune compares with (greedy chain of thought), always a candidate."""
NATURAL_AXES = ("n", "max_expansions", "beam_width", "rounds", "population")
"""Compute params, in order of preference: the first one a node of the workflow has is its axis."""
GRID_START = {"n": 2}
"""Where a doubling grid starts (one sample is no vote: n starts at 2); others start at 1."""
MAX_GRID = 4
"""At most this many values per axis: 2, 4, 8, 16 samples."""
NUMERIC_EXTRACTS = ("last_number", "number", "math", "choice", "boxed")
"""An answer extracted like this is no program: the tests metric cannot grade it."""


@dataclass
class Candidate:
    """One strategy at one compute setting (a workflow and its params)."""

    label: str
    workflow: str
    params: dict[str, Any]
    yaml: str = ""
    status: str = "running"
    reason: str = ""
    dropped_after: int | None = None
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "workflow": self.workflow, "params": self.params, "status": self.status,
                "dropped_after": self.dropped_after, "reason": self.reason}


@dataclass
class CandidateContext:
    """What every candidate is checked against."""

    dataset: Dataset
    metric: Metric
    metric_spec: str
    registry: NodeRegistry
    model: dict[str, Any] | None
    budget_tokens: int | None
    models_folder: Path
    axes: list[str] = field(default_factory=list)
    mapping: dict[str, str] | None = None


def find_sources(names: list[str], examples_dir: Path | None, workflows_dir: Path) -> list[tuple[str, Path]]:
    """(name, file) of each candidate: the named files / example names, else every example; the baseline first."""
    folders = [f for f in (examples_dir, workflows_dir) if f is not None]
    if not names:
        if examples_dir is None:
            raise TuneError("no example workflows are installed to tune over; name candidates with --candidates")
        files = sorted(p for p in examples_dir.glob("*.yaml") if p.is_file())
    else:
        files = [_find(name, folders) for name in names]
    found = [(p.stem, p) for p in files]
    if not any(stem == BASELINE for stem, _ in found):
        found.insert(0, (BASELINE, _find(BASELINE, folders)))
    found.sort(key=lambda pair: pair[0] != BASELINE)
    return found


def _find(name: str, folders: list[Path]) -> Path:
    path = Path(name).expanduser()
    if path.is_file():
        return path
    for folder in folders:
        for candidate in (folder / name, folder / f"{name}.yaml"):
            if candidate.is_file():
                return candidate
    raise TuneError(f"--candidates {name}: no such workflow file or example name (examples: `metagen validate` "
                    "lists files; e.g. self_consistency, best_of_n, code_best_of_n)")


def _load(path: Path, model: dict[str, Any] | None) -> Workflow:
    wf = load_workflow(path)
    if model is None:
        return wf
    replaced = workflow_from_dict(replace_models(wf.to_dict(), model))
    replaced.source = wf.source
    return replaced


def _skip_reason(wf: Workflow, name: str, ctx: CandidateContext) -> str | None:
    """Why this workflow cannot be a candidate (None: it can)."""
    problems = errors(validate(wf, ctx.registry))
    if problems:
        return "invalid: " + problems[0].format()
    missing = hub_needs(wf.models, ctx.models_folder)
    if missing:
        return f"needs the Hub model {missing[0].repo}, not pulled (`metagen models pull {missing[0].repo}`)"
    output = "answer" if "answer" in wf.outputs else (next(iter(wf.outputs)) if len(wf.outputs) == 1 else None)
    if output is None:
        return f"no `answer` output to grade (it has {', '.join(wf.outputs)})"
    try:
        binding = bind(ctx.dataset, wf.inputs, ctx.mapping)
        check_rows(ctx.dataset, binding, wf.inputs)
    except DatasetError as exc:
        return "its inputs do not bind to the dataset: " + (exc.problems or [str(exc)])[0]
    extract = _graded_extract(wf, output)
    if ctx.metric.runs_code and extract in NUMERIC_EXTRACTS:
        return f"its answer is an extracted {extract}, which the {ctx.metric_spec} metric cannot grade as code"
    leaks = grading_leaks(wf, name, binding, ctx.metric.name, ctx.metric.needs_reference or ctx.metric.runs_code)
    if leaks:
        return "its selection would see the graded column: " + leaks[0]
    return _default_selection(wf, binding)


def _default_selection(wf: Workflow, binding: Any) -> str | None:
    """Why a workflow would select every item with the same default text (an input a selecting node reads has no
    column in the dataset, e.g. instruction_best_of_n's `check` and `arg` on the code set): its race would measure
    nothing of its selection, so it is skipped before the race with this reason, not warned about after it."""
    for inp in wf.inputs:
        nodes = [] if inp in binding.inputs else selecting_nodes(wf, [inp])
        if nodes:
            return (f"its input {inp!r} has no column in the dataset, so node{'s' if len(nodes) > 1 else ''} "
                    f"{', '.join(nodes)} would select every item with the input's default")
    return None


def _graded_extract(wf: Workflow, output: str) -> str | None:
    """The `extract` param of the node feeding the graded output, if it has one."""
    node = wf.node(str(wf.outputs.get(output, "")).split(".")[0])
    return None if node is None else node.params.get("extract")


def _declares(wf: Workflow, node_id: str, param: str, registry: NodeRegistry) -> bool:
    """Whether the workflow has a node `node_id` whose kind takes `param` (an --axes text applies to it)."""
    node = wf.node(node_id)
    cls = registry.get(node.kind) if node is not None else None
    return cls is not None and cls.param(param) is not None


def natural_axis(wf: Workflow, registry: NodeRegistry) -> tuple[str, str, int, int] | None:
    """(node, param, low, high) of the workflow's compute axis, None when it has none (greedy)."""
    for param_name in NATURAL_AXES:
        for node in wf.nodes:
            cls = registry.get(node.kind)
            param = cls.param(param_name) if cls is not None else None
            if param is None or param.type != "int":
                continue
            if param.show_if is not None:
                shown = node.params.get(param.show_if[0], getattr(cls.param(param.show_if[0]), "default", None))
                if shown not in param.show_if[1]:
                    continue
            return node.id, param_name, int(param.min or 1), int(param.max or 64)
    return None


def _grid(wf: Workflow, ctx: CandidateContext) -> list[dict[str, Any]]:
    """The points of this workflow: the --axes that apply to it, else its natural axis doubling within the budget;
    each with the params its node ties to the axis scaled along (coupled.py), so every point validates."""
    given = [parse_sweep(text) for text in ctx.axes]
    own = [a for a in given if _declares(wf, a.node, a.param, ctx.registry)]
    if own:
        axis = own[0]
        return fit_points(wf, [{axis.key: v} for v in axis.values], ctx.registry)
    found = natural_axis(wf, ctx.registry)
    if found is None:
        return [{}]
    node, param, low, high = found
    points, value = [], max(low, GRID_START.get(param, 1))
    while value <= high and len(points) < MAX_GRID:
        point = {f"{node}.{param}": value}
        ceiling = completion_ceiling(apply_point(wf, point), ctx.registry)
        if ctx.budget_tokens is not None and ceiling > ctx.budget_tokens and points:
            break
        points.append(point)
        value *= 2
    return fit_points(wf, points, ctx.registry)


def make_candidates(sources: list[tuple[str, Path]], ctx: CandidateContext) -> list[Candidate]:
    """Every (workflow, grid point) candidate, and one skipped entry per workflow that cannot be one."""
    out: list[Candidate] = []
    for name, path in sources:
        try:
            wf = _load(path, ctx.model)
        except (WorkflowError, OSError) as exc:
            out.append(Candidate(name, name, {}, status=SKIPPED, reason=f"cannot be loaded: {exc}"))
            continue
        reason = _skip_reason(wf, name, ctx)
        if reason is None:
            try:
                points = _grid(wf, ctx)
            except SweepError as exc:
                raise TuneError(f"--axes: {exc}") from None
            out.extend(_variants(wf, name, points, ctx))
        else:
            out.append(Candidate(name, name, {}, status=SKIPPED, reason=reason))
    for text in ctx.axes:
        key = text.partition("=")[0].strip()
        if not any(key in c.params for c in out):
            raise TuneError(f"--axes {text}: no candidate has a node {key.partition('.')[0]!r} with a param "
                            f"{key.partition('.')[2]!r}; use NODE.PARAM=v1,v2 with a node id of a candidate")
    if not any(c.workflow == BASELINE and c.status != SKIPPED for c in out):
        why = next((c.reason for c in out if c.workflow == BASELINE), "")
        raise TuneError(f"the baseline, greedy {BASELINE}, cannot run on this dataset ({why}); map the dataset's "
                        "question column to its `question` input")
    return out


def _variants(wf: Workflow, name: str, points: list[dict[str, Any]], ctx: CandidateContext) -> list[Candidate]:
    out = []
    for point in sorted(points, key=lambda p: [-v if isinstance(v, int | float) else 0 for v in p.values()]):
        variant = apply_point(wf, point)
        problems = errors(validate(variant, ctx.registry))
        label = point_label(name, point)
        if problems:
            out.append(Candidate(label, name, point, status=SKIPPED, reason="invalid: " + problems[0].format()))
            continue
        ceiling = completion_ceiling(variant, ctx.registry)
        if ctx.budget_tokens is not None and ceiling > 4 * ctx.budget_tokens:
            out.append(Candidate(label, name, point, status=SKIPPED,
                                 reason=f"over budget: up to {ceiling} completion tokens per item by its params"))
            continue
        out.append(Candidate(label, name, point, yaml=variant.to_yaml()))
    return out
