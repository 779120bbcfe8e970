"""Share mode and loaded models: visitors cannot load or unload models, nor pick settings that load a copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.service.errors import UserError
from app.service.studio import StudioService
from app.share.policy import SharePolicy, check_workflow_allowed, resolve_model_choices
from app.workflow.model_specs import model_specs
from app.workflow.spec import workflow_from_dict
from backends.base import ModelSpec
from backends.llama.models.bundled import bundled_model_path
from backends.pool import ModelPool
from tests.studio_fixtures import studio_service


class StubBackend:
    """Stands in for LlamaBackend in the pool: no real model is loaded."""

    def __init__(self, path: Path, spec: ModelSpec, device: dict[str, Any]) -> None:
        self.path, self.spec, self.device = path, spec, device
        self.model_id = f"{path.name}@{spec.n_ctx}"
        self.busy = False
        self.file_info = type("Info", (), {"name": path.name})()

    def memory_bytes(self) -> int:
        return 1000

    def close(self) -> None:
        pass


def _service(tmp_path: Path, share: bool) -> StudioService:
    return studio_service(tmp_path, share=share)


def test_visitor_cannot_unload_or_load_models_in_share_mode(tmp_path: Path) -> None:
    service = _service(tmp_path, share=True)
    pool = ModelPool(memory_budget_bytes=10**9, loader=StubBackend)
    pool.get(ModelSpec(source="bundled"))
    service._pool = pool  # the owner's loaded model, shared by every visitor
    key = "bundled"
    assert next(e for e in service.models.entries() if e["key"] == key)["loaded"]
    with pytest.raises(UserError, match="unloading models is disabled on a shared app"):
        service.models.unload(key)
    with pytest.raises(UserError, match="loading models is disabled on a shared app"):
        service.models.load(key)
    assert [e["path"] for e in pool.loaded()] == [str(bundled_model_path())]  # still loaded for everyone


def test_owner_can_still_unload_locally(tmp_path: Path) -> None:
    service = _service(tmp_path, share=False)
    pool = ModelPool(memory_budget_bytes=10**9, loader=StubBackend)
    pool.get(ModelSpec(source="bundled"))
    service._pool = pool
    key = "bundled"
    assert next(e for e in service.models.entries() if e["key"] == key)["loaded"]
    assert service.models.unload(key) is True
    assert pool.loaded() == []


def test_visitor_model_settings_are_replaced_by_the_owners(tmp_path: Path) -> None:
    """The chosen rule: settings within the caps are accepted but replaced by the owner's defaults, so a
    visitor's run uses the one loaded copy; settings above the caps are refused with a message."""
    policy = SharePolicy.for_serving("0.0.0.0", model_choices=[])
    wf = workflow_from_dict({"version": 1, "name": "m", "nodes": [], "outputs": {},
                             "models": {"main": {"source": "bundled", "n_ctx": 2048, "threads": 2,
                                                 "n_gpu_layers": 3, "flash_attn": True, "device": "cpu"}}})
    assert check_workflow_allowed(wf, policy) == []
    spec = model_specs(resolve_model_choices(wf, policy))["main"]
    assert spec == ModelSpec(source="bundled")
    local = model_specs(resolve_model_choices(wf, SharePolicy.local()))["main"]
    assert (local.n_ctx, local.threads, local.device) == (2048, 2, "cpu")  # the owner keeps full control
