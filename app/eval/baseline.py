"""Which point an evaluation's baseline names: a point's label, or its workflow by any of its names (the name it is
listed under, its YAML `name:`, its file name with or without `.yaml`), alone or with the point's sweep params."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePath
from typing import Any

import yaml

YAML_SUFFIXES = (".yaml", ".yml")
"""A workflow file's name may be given with its suffix: `chain_of_thought.yaml` names `chain_of_thought`."""


def point_label(workflow: str, params: dict[str, Any]) -> str:
    """A point's label: its workflow's name, then its sweep params (`self-consistency · think.n=3`)."""
    if not params:
        return workflow
    return f"{workflow} · " + ", ".join(f"{k}={v}" for k, v in params.items())


def workflow_names(name: str, source: str | None = None, yaml_name: str | None = None) -> list[str]:
    """The names a workflow of an evaluation answers to: `name` (as the plan lists it), the YAML's own `name:`,
    and, when `source` is a file, its file name and stem (`chain_of_thought.yaml`, `chain_of_thought`)."""
    names = [name]
    if yaml_name:
        names.append(yaml_name)
    if source and source.lower().endswith(YAML_SUFFIXES):
        path = PurePath(source)
        names += [path.name, path.stem]
    return list(dict.fromkeys(n for n in names if n))


def yaml_name_of(text: str | None) -> str | None:
    """A workflow YAML's `name:` (None when the text has none or does not parse)."""
    try:
        data = yaml.safe_load(text or "")
    except yaml.YAMLError:
        return None
    value = data.get("name") if isinstance(data, dict) else None
    return str(value) if value else None


def point_names(names: Iterable[str], params: Mapping[str, Any]) -> set[str]:
    """What names one point of a workflow called by `names`: each name with the point's params (`NAME · k=v`), and
    the bare name too (it means the point only where the workflow has one point: see `resolve_baseline`)."""
    return {point_label(n, dict(params)) for n in names} | set(names)


def plan_points(workflows: Iterable[Any]) -> list[dict[str, Any]]:
    """The points of a plan's workflows (`EvalWorkflow`s) as `resolve_baseline` takes them."""
    return [{"label": point_label(w.name, params), "workflow": w.name, "params": params,
             "names": workflow_names(w.name, w.source, w.workflow.name)} for w in workflows for params in w.points]


def resolve_baseline(baseline: str | None, points: Sequence[Mapping[str, Any]]) -> str | None:
    """The label of the point `baseline` names; ValueError saying which points there are otherwise. Each point is
    {label, workflow, params?, names?} (`names`: its workflow's other names, `workflow_names`); an exact label
    wins, else the one point whose workflow (by any name) or `NAME · params` it is."""
    if not baseline:
        return None
    baseline = baseline.strip()
    labels = [str(p["label"]) for p in points]
    if baseline in labels:
        return baseline
    wanted = {baseline}
    if baseline.lower().endswith(YAML_SUFFIXES):
        wanted.add(baseline[: baseline.rfind(".")])
    matches = [str(p["label"]) for p in points
               if wanted & point_names(p.get("names") or [p["workflow"]], p.get("params") or {})]
    if len(matches) == 1:
        return matches[0]
    listed = "; ".join(labels)
    if matches:
        raise ValueError(f"{baseline!r} has {len(matches)} sweep points: name one by its label (the points: {listed})")
    raise ValueError(f"no single point {baseline!r}: name a point's label, or its workflow's name or file name "
                     f"(the points: {listed})")
