"""Children of a visitor's workflow: only `.yaml` files inside the folder are read (a `./.env` is refused without
echoing its content), a symlink named by name is not followed out of the folder, and no message shows the
folder's absolute path (issue 32, finding 11)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.service.studio import StudioService
from app.share.policy import SharePolicy

ROOT = Path(__file__).resolve().parents[2]
CHILD = (ROOT / "workflows" / "refine_each.yaml").read_text(encoding="utf-8")
PARENT = (ROOT / "workflows" / "best_of_refined.yaml").read_text(encoding="utf-8")


@pytest.fixture
def service(tmp_path: Path) -> Any:
    models = tmp_path / "models"
    models.mkdir()
    policy = SharePolicy.for_serving("127.0.0.1", force_share_mode=True, models_folder=models)
    studio = StudioService(policy=policy, dry_run=True, workflows_dir=tmp_path / "wf",
                           examples_dir=tmp_path / "no-examples", models_dir=models, trace_db=tmp_path / "t.db")
    studio.workflows_dir.mkdir(exist_ok=True)
    yield studio
    studio.close()


def _issues(service: StudioService, ref: str) -> list[dict[str, Any]]:
    result = service.parse_yaml(PARENT.replace("workflow: refine_each", f"workflow: {ref!r}"))
    assert result["error"] is None, result["error"]
    return [i for i in result["issues"] if i["severity"] == "error"]


def _shown(issues: list[dict[str, Any]]) -> str:
    return " ".join(f"{i['message']} {i.get('hint', '')} {i.get('file') or ''}" for i in issues)


def test_a_dot_env_is_refused_and_never_echoed(service: StudioService, tmp_path: Path) -> None:
    (service.workflows_dir / ".env").write_text("OPENAI_API_KEY: sk-secret\n", encoding="utf-8")
    issues = _issues(service, "./.env")
    assert [i["code"] for i in issues] == ["workflow_path_refused"]
    assert "OPENAI_API_KEY" not in _shown(issues) and str(tmp_path) not in _shown(issues)


def test_a_symlink_named_by_name_is_not_followed_out_of_the_folder(service: StudioService, tmp_path: Path) -> None:
    outside = tmp_path / "outside.yaml"
    outside.write_text(CHILD, encoding="utf-8")
    (service.workflows_dir / "sneaky.yaml").symlink_to(outside)
    issues = _issues(service, "sneaky")
    assert [i["code"] for i in issues] == ["workflow_path_refused"]
    assert str(tmp_path) not in _shown(issues)


def test_messages_about_children_show_no_absolute_path(service: StudioService, tmp_path: Path) -> None:
    missing = _issues(service, "not_there")
    assert [i["code"] for i in missing] == ["unknown_workflow"]
    bad_child = CHILD.replace("max_tokens:", "max_tokens: -3 #", 1)
    (service.workflows_dir / "refine_each.yaml").write_text(bad_child, encoding="utf-8")
    inside = _issues(service, "refine_each")
    assert inside and all(i["file"] == "refine_each.yaml" for i in inside), inside
    assert str(tmp_path) not in _shown(missing + inside)
