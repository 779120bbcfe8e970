"""An evaluation plan: the workflows, their sweep points, the dataset items and the metric, all checked
before anything runs (every problem of every workflow and every row is reported at once)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.eval.dataset_meta import DatasetMetaError, declared_metric
from app.eval.datasets import Binding, Dataset, DatasetError, bind, check_rows, load_dataset, select_items
from app.eval.metrics import Metric, MetricError, parse_metric
from app.eval.selection import default_selection, grading_leaks
from app.eval.sweep import SweepAxis, SweepError, apply_point, check_axes, grid, parse_sweep
from app.eval.tasks import TaskError, TaskPreset, load_task, load_task_dataset
from app.run.scheduler import derive_seed
from app.workflow.problems import WorkflowError, errors
from app.workflow.spec import Workflow, load_workflow, load_workflow_text
from app.workflow.subworkflows import version_hash
from app.workflow.validation import check, validate
from nodes.registry import NodeRegistry

DEFAULT_OUTPUT = "answer"
SAMPLER_KIND = "sampler"


class EvalSetupError(ValueError):
    """The evaluation cannot start; `problems` says every reason (nothing has run)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        shown = problems[:12]
        more = f"\n(and {len(problems) - len(shown)} more)" if len(problems) > len(shown) else ""
        super().__init__("\n".join(shown) + more)


@dataclass
class EvalWorkflow:
    """One workflow of the evaluation, with its sweep points (already applied) and dataset binding."""

    name: str
    source: str
    workflow: Workflow
    binding: Binding
    points: list[dict[str, Any]]
    """Sweep points as {"node.param": value}; [{}] without a sweep."""
    variants: list[Workflow]
    """The workflow at each point, same order as `points`."""
    sampler: str | None
    """The sampler graded per sample (pass@k), when the workflow has exactly one."""
    output: str
    version: str = ""
    """The hash its runs record (`subworkflows.version_hash`: with its sub-workflows): `metagen history`'s version."""

    @property
    def yaml(self) -> str:
        return self.workflow.to_yaml()


@dataclass
class EvalPlan:
    workflows: list[EvalWorkflow]
    dataset: Dataset
    items: list[int]
    metric: Metric
    metric_spec: str
    output: str
    axes: list[SweepAxis]
    seed: int = 0
    shuffle: bool = False
    limit: int | None = None
    mapping: dict[str, str] = field(default_factory=dict)
    reference: str | None = None
    share_samples: bool = False
    """Samplers' seeds derive from the item's prompt, not the node id: workflows drawing the same (model, prompt,
    decoding params) share one draw through the sample cache (`metagen eval --share-samples`)."""
    bootstrap: int = 0
    """maj@k / best-of-k curves: the mean over this many random k-subsets of the N samples (0: the first k)."""
    task: str | None = None
    """The task preset (`tasks/NAME.yaml`) that made the dataset's prompts and references, if any."""
    data_given: str | None = None
    """The dataset as given (`--data`), in place of the preset's own; None: the preset's."""
    repeats: int = 1
    """Every item runs this many times, repeat r with the seed `repeat_seed(seed, r)` (`metagen eval --repeats`)."""
    baseline: str | None = None
    """The point (label or workflow name) every other point is compared with; None: every pair."""
    warnings: list[str] = field(default_factory=list)
    """What makes a result mean less than it seems, found while planning (e.g. selection that sees the grading
    tests: app.eval.selection); shown by the CLI and kept in the summary."""

    @property
    def total_tasks(self) -> int:
        return sum(len(w.points) for w in self.workflows) * len(self.items) * self.repeats

    def task_keys(self) -> list[int]:
        """The stored item keys of every run of an item: repeat r of row i is `i + r * rows` (see `split_key`)."""
        rows = len(self.dataset.rows)
        return [item + r * rows for r in range(self.repeats) for item in self.items]

    def config(self) -> dict[str, Any]:
        """What the evaluation record keeps: enough to redo the plan on --resume and to tell runs apart."""
        return {
            "workflows": [{"name": w.name, "source": w.source, "yaml": w.yaml, "hash": w.workflow.semantic_hash(),
                           "version": w.version or w.workflow.semantic_hash(),
                           "points": w.points, "sampler": w.sampler, "output": w.output} for w in self.workflows],
            "dataset": {"path": str(self.dataset.path), "name": self.dataset.path.name,
                        "sha256": self.dataset.sha256, "rows": len(self.dataset.rows)},
            "items": self.items, "metric": self.metric_spec, "output": self.output,
            "sweep": [{"node": a.node, "param": a.param, "values": list(a.values)} for a in self.axes],
            "seed": self.seed, "shuffle": self.shuffle, "limit": self.limit, "mapping": self.mapping,
            "reference": self.reference, "total_tasks": self.total_tasks,
            "share_samples": self.share_samples, "bootstrap": self.bootstrap,
            "task": self.task, "data_given": self.data_given, "repeats": self.repeats, "baseline": self.baseline,
            "warnings": list(self.warnings),
        }


@dataclass
class WorkflowSource:
    """A workflow given to an evaluation: a file, or YAML text (the editor's current workflow)."""

    path: Path | None = None
    text: str | None = None
    name: str | None = None


def _load(source: WorkflowSource) -> tuple[Workflow, str]:
    if source.text is not None:
        wf = load_workflow_text(source.text)
        return wf, source.name or wf.name or "workflow"
    assert source.path is not None
    wf = load_workflow(source.path)
    return wf, wf.name or source.path.stem


def _single_sampler(wf: Workflow) -> str | None:
    samplers = [n.id for n in wf.nodes if n.kind == SAMPLER_KIND]
    return samplers[0] if len(samplers) == 1 else None


def _graded_output(wf: Workflow, wanted: str | None) -> tuple[str | None, str | None]:
    """(output name, problem): the asked output, else `answer`, else the workflow's only output."""
    names = list(wf.outputs)
    if wanted:
        return (wanted, None) if wanted in names else (None, f"has no output {wanted!r} (it has {', '.join(names)})")
    if DEFAULT_OUTPUT in names:
        return DEFAULT_OUTPUT, None
    if len(names) == 1:
        return names[0], None
    return None, f"has outputs {', '.join(names)}; choose the graded one with --output NAME"


def _applicable(wf: Workflow, axes: list[SweepAxis], registry: NodeRegistry) -> list[SweepAxis]:
    """The axes this workflow can take: its node of that id declares that param. Others are skipped, so
    `--sweep think.n=1,4,16` compares a sampler at each N with a greedy generator named `think` run once."""
    kinds = {n.id: registry.get(n.kind) for n in wf.nodes}
    by_id = {n.id: n.kind for n in wf.nodes}
    return [a for a in axes if ("/" in a.node and by_id.get(a.node.split("/", 1)[0]) == "workflow")
            or (kinds.get(a.node) is not None and any(p.name == a.param for p in kinds[a.node].params))]


def _load_data(dataset_path: Path | None, preset: TaskPreset | None) -> Dataset:
    """The dataset, made by the task preset when there is one (its own dataset, or `dataset_path` in its place)."""
    label = str(dataset_path) if dataset_path is not None else f"of task {preset.name if preset else ''}"
    try:
        if preset is not None:
            return load_task_dataset(preset, dataset_path)
        if dataset_path is None:
            raise EvalSetupError(["no dataset given: --data FILE or --task NAME"])
        return load_dataset(dataset_path)
    except DatasetError as exc:
        raise EvalSetupError([f"dataset {label}: {p}" for p in (exc.problems or [str(exc)])]) from None


def _preset(task: str | None) -> TaskPreset | None:
    try:
        return load_task(task) if task else None
    except TaskError as exc:
        raise EvalSetupError([str(exc)]) from None


def _metric(metric: str, preset: TaskPreset | None) -> tuple[Metric | None, str | None]:
    try:
        return parse_metric(metric, base_dir=Path.cwd()), None
    except MetricError as exc:
        if preset is not None and metric == preset.metric == "tests":
            return None, (f"task {preset.name} grades with the `tests` metric (the benchmark's unit tests run on the "
                          "completion: code execution), which this install does not have; update metagen-studio "
                          "or give another --metric")
        return None, f"metric {metric!r}: {exc}"


@dataclass
class _PlanChecks:
    """What every workflow of a plan is checked against, and what the checks found so far."""

    dataset: Dataset
    registry: NodeRegistry
    axes: list[SweepAxis]
    grader: Metric | None
    preset: TaskPreset | None
    output: str | None
    mapping: dict[str, str] | None
    reference: str | None
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    used_axes: set[tuple[str, str]] = field(default_factory=set)


def _plan_metric(metric: str | None, preset: TaskPreset | None, dataset_path: Path | None,
                 problems: list[str]) -> tuple[str, Metric | None]:
    """The metric spec in force (given, else the preset's, else the dataset's NAME.meta.yaml, else exact) and its
    grader (None, with the problem added, when it cannot be used)."""
    if not metric and preset is None:  # the dataset's own (its NAME.meta.yaml), else exact match
        try:
            metric = declared_metric(dataset_path)
        except DatasetMetaError as exc:
            problems.append(f"dataset {dataset_path}: {exc}")
    metric = metric or (preset.metric if preset is not None else "exact")
    grader, why = _metric(metric, preset)
    if why:
        problems.append(why)
    return metric, grader


def _parse_axes(sweeps: list[str], problems: list[str]) -> list[SweepAxis]:
    axes: list[SweepAxis] = []
    for text in sweeps:
        try:
            axes.append(parse_sweep(text))
        except SweepError as exc:
            problems.append(f"--sweep {text}: {exc}")
    return axes


def _plan_workflow(source: WorkflowSource, checks: _PlanChecks, taken: list[str]) -> EvalWorkflow | None:
    """One workflow checked against the dataset, metric and sweep (its problems and warnings added to `checks`);
    None when it cannot run."""
    label = str(source.path) if source.path else (source.name or "<editor>")
    problems = checks.problems
    try:
        wf, name = _load(source)
    except WorkflowError as exc:
        problems.extend(f"{label}: {i.format()}" for i in exc.issues)
        return None
    except OSError as exc:
        problems.append(f"{label}: {exc}")
        return None
    tree = check(wf, checks.registry)
    wf_problems = errors(tree.issues)
    if wf_problems:
        problems.extend(f"{label}: {i.format()}" for i in wf_problems)
        return None
    graded, why = _graded_output(wf, checks.output)
    if why:
        problems.append(f"{label} {why}")
        return None
    applicable = _applicable(wf, checks.axes, checks.registry)
    checks.used_axes |= {(a.node, a.param) for a in applicable}
    problems.extend(f"{label}: {p}" for p in check_axes(wf, applicable, checks.registry))
    try:
        binding = bind(checks.dataset, wf.inputs, checks.mapping, checks.reference)
        check_rows(checks.dataset, binding, wf.inputs)
    except DatasetError as exc:
        problems.extend(f"{label} on {checks.dataset.path.name}: {p}" for p in (exc.problems or [str(exc)]))
        return None
    try:
        points = grid(applicable)
    except SweepError as exc:
        problems.append(f"{label}: {exc}")
        return None
    variants = [apply_point(wf, p) for p in points]
    grader, preset = checks.grader, checks.preset
    if grader is not None:  # the reference is graded by reference metrics, and by a code preset (its tests)
        checks.warnings.extend(grading_leaks(wf, name, binding, grader.name, grader.needs_reference
                                             or (preset is not None and preset.metric == grader.name == "tests")))
    checks.warnings.extend(default_selection(wf, name, binding))
    for point, variant in zip(points, variants, strict=True):
        problems.extend(f"{label} at {point}: {i.format()}" for i in errors(validate(variant, checks.registry)))
    return EvalWorkflow(name=_unique(name, taken), source=label, workflow=wf, binding=binding, points=points,
                        variants=variants, sampler=_single_sampler(wf), output=graded or DEFAULT_OUTPUT,
                        version=version_hash(wf, tree.children))


def _unused_axes(checks: _PlanChecks, workflows: list[EvalWorkflow]) -> list[str]:
    """A problem for each sweep axis that no workflow has."""
    problems = []
    for axis in checks.axes:
        if (axis.node, axis.param) not in checks.used_axes and workflows:
            nodes = ", ".join(sorted({n.id for w in workflows for n in w.workflow.nodes}))
            if "/" in axis.node:
                problems.append(f"--sweep {axis.key}: no workflow has a workflow node {axis.node.split('/')[0]!r} "
                                f"(NODE/CHILD_NODE.param needs a workflow node first; nodes: {nodes})")
                continue
            problems.append(f"--sweep {axis.node}.{axis.param}: no workflow has a node {axis.node!r} with a param "
                            f"{axis.param!r} (nodes: {nodes})")
    return problems


def make_plan(sources: list[WorkflowSource], dataset_path: Path | None, *, registry: NodeRegistry,
              metric: str | None = "exact", output: str | None = None, sweeps: list[str] = (),  # type: ignore[assignment]
              mapping: dict[str, str] | None = None, reference: str | None = None, limit: int | None = None,
              shuffle: bool = False, seed: int = 0, task: str | None = None) -> EvalPlan:
    """Check everything and build the plan; EvalSetupError with every problem otherwise. A `task` preset makes
    the dataset's prompts and references and gives the metric when `metric` is None; without a preset, the
    dataset's meta file (`dataset_meta.declared_metric`) does, else exact match."""
    problems: list[str] = []
    preset = _preset(task)
    metric, grader = _plan_metric(metric, preset, dataset_path, problems)
    try:
        dataset = _load_data(dataset_path, preset)
    except EvalSetupError as exc:
        raise EvalSetupError(problems + exc.problems) from None
    axes = _parse_axes(list(sweeps), problems)
    if not sources:
        problems.append("no workflow given: name one or more workflow files")
    checks = _PlanChecks(dataset=dataset, registry=registry, axes=axes, grader=grader, preset=preset, output=output,
                         mapping=mapping, reference=reference, problems=problems)
    workflows: list[EvalWorkflow] = []
    for source in sources:
        planned = _plan_workflow(source, checks, [w.name for w in workflows])
        if planned is not None:
            workflows.append(planned)
    problems.extend(_unused_axes(checks, workflows))
    if problems:
        raise EvalSetupError(problems)
    assert grader is not None
    items = select_items(len(dataset.rows), limit, shuffle, seed)
    if not items:
        raise EvalSetupError([f"dataset {dataset.path.name}: no items to evaluate (--limit {limit})"])
    return EvalPlan(workflows=workflows, dataset=dataset, items=items, metric=grader, metric_spec=metric,
                    output=output or DEFAULT_OUTPUT, axes=axes, seed=seed, shuffle=shuffle, limit=limit,
                    mapping=dict(mapping or {}), reference=workflows[0].binding.reference if workflows else None,
                    task=task or None, data_given=str(dataset_path) if task and dataset_path is not None else None,
                    warnings=list(dict.fromkeys(checks.warnings)))


def plan_from_config(config: dict[str, Any], registry: NodeRegistry) -> EvalPlan:
    """The plan of a recorded evaluation (for --resume): the same workflows (from their recorded YAML), dataset
    and items; refused when the dataset file changed since."""
    if isinstance(config.get("tune"), dict):  # resumed as an evaluation it would run every candidate on every item
        raise EvalSetupError(["this record is a tune (`metagen tune`): `metagen tune --resume ID` finishes it"])
    sources = [WorkflowSource(text=w["yaml"], name=w["name"]) for w in config["workflows"]]
    sweeps = [f"{a['node']}.{a['param']}=" + ",".join(json.dumps(v) for v in a["values"]) for a in config["sweep"]]
    task = config.get("task")
    given = config.get("data_given") if task else config["dataset"]["path"]
    plan = make_plan(sources, Path(given) if given else None, registry=registry, metric=config["metric"], task=task,
                     output=config.get("output") if config.get("output") != DEFAULT_OUTPUT else None,
                     sweeps=sweeps, mapping=config.get("mapping") or {}, reference=config.get("reference"),
                     limit=None, shuffle=False, seed=int(config.get("seed", 0)))
    if plan.dataset.sha256 != config["dataset"]["sha256"]:
        raise EvalSetupError([f"dataset {config['dataset']['path']} changed since the evaluation started "
                              "(its hash differs); start a new evaluation instead of resuming"])
    changed = [w.name for w, recorded in zip(plan.workflows, config["workflows"], strict=True)
               if recorded.get("hash") != w.workflow.semantic_hash()]
    if changed:  # the record's YAML no longer matches the workflow it started with: never run an edited copy
        raise EvalSetupError([f"workflow {name!r} of this evaluation was changed in the trace database since it "
                              "started (its hash differs); start a new evaluation instead of resuming"
                              for name in changed])
    plan.items = [int(i) for i in config["items"]]
    plan.limit, plan.shuffle = config.get("limit"), bool(config.get("shuffle"))
    plan.share_samples, plan.bootstrap = bool(config.get("share_samples")), int(config.get("bootstrap") or 0)
    plan.repeats, plan.baseline = int(config.get("repeats") or 1), config.get("baseline")
    for w, recorded in zip(plan.workflows, config["workflows"], strict=True):
        w.source = recorded.get("source", w.source)
    return plan


def split_key(key: int, rows: int) -> tuple[int, int]:
    """(dataset row, repeat) of a stored item key: repeats are stored as more keys of the same (workflow, point),
    so the store's key and schema stay those of single runs."""
    return (key % rows, key // rows) if rows > 0 else (key, 0)


def repeat_seed(seed: int, repeat: int) -> int:
    """The run seed of an item's repeat: the evaluation's seed for the first, a derived one for the others."""
    return seed if repeat == 0 else derive_seed(seed, "repeat", repeat)


def _unique(name: str, taken: list[str]) -> str:
    if name not in taken:
        return name
    k = 2
    while f"{name} ({k})" in taken:
        k += 1
    return f"{name} ({k})"

