"""Workflows for in-process callers (the Python API): from a path, YAML text or an example's name, checked as
`metagen validate` checks them, and copies with changed node params."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.eval.sweep import SweepAxis, apply_point, check_axes
from app.platform.resources import examples_dir
from app.service.errors import UserError
from app.workflow.problems import Issue, WorkflowError, errors
from app.workflow.spec import Workflow, load_workflow, load_workflow_text
from app.workflow.validation import validate
from nodes.registry import NodeRegistry

YAML_SUFFIXES = (".yaml", ".yml")


def _example(name: str) -> Path | None:
    try:
        folder = examples_dir()
    except FileNotFoundError:
        return None
    path = folder / f"{name}.yaml"
    return path if Path(name).name == name and path.is_file() else None


def load_source(source: str | Path) -> tuple[Workflow, str]:
    """(workflow, label for messages) from a file path, YAML text, or the name of a bundled example
    ("self_consistency"). Raises WorkflowError as `metagen validate` reports a file it cannot load."""
    if isinstance(source, Path):
        return load_workflow(source), str(source)
    text = source.strip()
    if "\n" in text or (":" in text and not Path(text).expanduser().exists()):
        return load_workflow_text(source), ""
    path = Path(text).expanduser()
    if path.exists() or path.suffix in YAML_SUFFIXES or "/" in text:
        return load_workflow(path), str(path)
    example = _example(text)
    if example is None:
        raise WorkflowError([Issue("not_found", f"no workflow file or example named {text!r}",
                                   "give a path to a .yaml file, YAML text, or an example's name such as "
                                   "'self_consistency'")])
    return load_workflow(example), str(example)


def checked(wf: Workflow, registry: NodeRegistry) -> list[Issue]:
    """Every issue `metagen validate` prints; WorkflowError carrying all of them when one is an error."""
    issues = validate(wf, registry)
    if errors(issues):
        raise WorkflowError(issues)
    return issues


def with_params(wf: Workflow, params: Any, registry: NodeRegistry) -> Workflow:
    """A copy of `wf` with {"node.param": value} set; UserError naming every unknown node, param or bad value."""
    if not isinstance(params, Mapping):
        raise UserError(f"params: give a dict of 'node.param' -> value, e.g. {{'think.n': 16}}, "
                        f"got {type(params).__name__}")
    problems: list[str] = []
    axes = []
    for key, value in params.items():
        node, _, param = str(key).partition(".")
        if not isinstance(key, str) or not node or not param:
            problems.append(f"params: {key!r} must be 'node.param', e.g. 'think.n'")
            continue
        axes.append(SweepAxis(node, param, (value,)))
    problems += [p.replace("sweep ", "params: ", 1) for p in check_axes(wf, axes, registry)]
    if problems:
        raise UserError("; ".join(problems))
    return apply_point(wf, {axis.key: axis.values[0] for axis in axes})
