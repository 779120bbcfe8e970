"""The recommended workflow written as YAML, its params set and a `provenance` block (dataset, model, split, dev
and test figures, date) that the editor shows."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

from app.platform.fileio import atomic_write_text
from app.workflow.spec import load_workflow_text

TUNED_FOLDER = "tuned"
BRANCH_ROLE = "branch of "
"""How an adaptive tune marks the branch files of its policy (`provenance.role`): parts of the policy, not models."""
POLICY_ROLE = "adaptive policy"
"""How it marks the policy: a model of its own, but `auto` keeps answering with the recommended workflow."""


def default_path(workflows_dir: Path, dataset: str, model: str) -> Path:
    """tuned/<dataset>-<model>.yaml in the workflows folder (names made safe for a file)."""
    def safe(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "x"

    stem = Path(dataset).stem if not dataset.startswith(("hf:", "task:")) else dataset.split(":", 1)[1]
    return workflows_dir / TUNED_FOLDER / f"{safe(stem)}-{safe(model)}.yaml"


def write_recommended(yaml_text: str, path: Path, provenance: dict[str, Any], name: str) -> Path:
    """Write the recommended workflow with its provenance; the file loads and validates as any workflow."""
    wf = load_workflow_text(yaml_text)
    wf.name = name
    wf.provenance = {**provenance, "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, wf.to_yaml())
    return path
