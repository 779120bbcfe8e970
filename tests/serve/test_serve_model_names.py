"""Model names are reserved on /v1: a workflow named like a model file (or `bundled`) never takes the model's
place, is not listed as a workflow, and cannot be saved under that name."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from app.serve.catalog import FileModel, WorkflowModel, find_model, list_models
from app.service.errors import UserError
from app.service.studio import StudioService
from backends.llama.models.bundled import bundled_model_path

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = bundled_model_path().name


@pytest.fixture
def service(tmp_path: Path) -> Any:
    studio = StudioService(workflows_dir=tmp_path / "wf", examples_dir=ROOT / "workflows", dry_run=True,
                           models_dir=tmp_path / "models", trace_db=tmp_path / "t.db")
    yield studio
    studio.close()


def _plant(service: StudioService, name: str) -> None:
    """A workflow file under a model's name, as an older install or a hand copy leaves it."""
    shutil.copyfile(ROOT / "workflows" / "best_of_n.yaml", service.workflows_dir / f"{name}.yaml")


@pytest.mark.parametrize("name", [Path(BUNDLED).stem, BUNDLED.removesuffix(".gguf"), "bundled"])
def test_a_workflow_named_like_a_model_does_not_take_its_place(service: StudioService, name: str) -> None:
    _plant(service, name)
    found = find_model(service, service.policy, name)
    assert isinstance(found, FileModel) and found.spec.source == "bundled"
    listed = [m for m in list_models(service, service.policy) if m["metagen"]["kind"] == "workflow"]
    assert name not in [m["id"] for m in listed]
    assert isinstance(find_model(service, service.policy, "best_of_n"), WorkflowModel)


@pytest.mark.parametrize("name", [Path(BUNDLED).stem, "bundled", "BUNDLED.yaml"])
def test_saving_a_workflow_under_a_model_name_is_refused(service: StudioService, name: str) -> None:
    data = service.open_example("best_of_n")["workflow"]
    with pytest.raises(UserError, match="name of a model"):
        service.save_workflow(name, data)
    with pytest.raises(UserError, match="name of a model"):
        service.save_yaml_text(name, (ROOT / "workflows" / "best_of_n.yaml").read_text(encoding="utf-8"))
    assert not list(service.workflows_dir.glob("*undled*"))
