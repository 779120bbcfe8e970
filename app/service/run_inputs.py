"""What a run needs before it starts: required inputs (no default) given, Hub models pulled (a warning early)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.workflow.model_refs import hub_needs
from app.workflow.problems import Issue
from app.workflow.spec import Workflow


def missing_required(wf: Workflow, given: dict[str, Any]) -> list[str]:
    """The inputs without a default that `given` leaves out, null or blank (a text of only spaces)."""
    missing = []
    for name, spec in wf.inputs.items():
        if spec.default is not None:
            continue
        value = given.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            missing.append(name)
    return missing


def required_problem(wf: Workflow, given: dict[str, Any]) -> str | None:
    """The run's refusal when a required input is empty, naming each one; None when all are given."""
    missing = missing_required(wf, given)
    if not missing:
        return None
    names = ", ".join(repr(n) for n in missing)
    return (f"input {names} {'is' if len(missing) == 1 else 'are'} required (no default) and empty: give "
            f"{'it' if len(missing) == 1 else 'each'} a value (in the run form's field) before running")


def unpulled_warnings(wf: Workflow, models_folder: Path) -> list[Issue]:
    """A warning for each `source: hub` model not in the models folder yet, shown in Problems when the workflow
    is opened rather than first at Run."""
    return [Issue("model_not_pulled", need.message(), "Run offers to pull it; or pull it on the Models tab",
                  line=wf.line_of("models", need.alias), severity="warning")
            for need in hub_needs(wf.models or {}, models_folder)]
