"""Model specs of a workflow (`models:` section) and the provider that turns them into backends."""

from __future__ import annotations

from typing import Any

from app.workflow.spec import Workflow
from backends.base import ModelSpec

DEFAULT_MODEL_ALIAS = "main"


def model_spec_from_dict(data: dict[str, Any]) -> ModelSpec:
    source = data.get("source", "path" if data.get("path") else "bundled")
    options = data.get("options") or {}
    return ModelSpec(
        source=str(source),
        path=str(data["path"]) if data.get("path") else None,
        device=str(data.get("device", "auto")),
        n_ctx=int(data.get("n_ctx", 4096)),
        threads=int(data["threads"]) if data.get("threads") is not None else None,
        n_gpu_layers=int(data["n_gpu_layers"]) if data.get("n_gpu_layers") is not None else None,
        flash_attn=bool(data.get("flash_attn", False)),
        options=tuple(sorted((str(k), v) for k, v in options.items())),
    )


def model_specs(wf: Workflow) -> dict[str, ModelSpec]:
    """Alias -> spec; a workflow without `models:` runs on the bundled model as 'main'."""
    if not wf.models:
        return {DEFAULT_MODEL_ALIAS: ModelSpec()}
    return {alias: model_spec_from_dict(spec) for alias, spec in wf.models.items()}


