"""Share mode's cap on sub-workflow runs (issue 32, 1): counted before the run where it can be, and as it runs."""

from __future__ import annotations

from pathlib import Path

from app.service.studio import StudioService
from app.share.policy import SHARE_MAX_CHILD_RUNS, SharePolicy
from app.workflow.spec import load_workflow
from backends.fake import FakeBackend
from tests.core.subworkflow_trees import fanout_tree


def _service(tmp_path: Path) -> StudioService:
    policy = SharePolicy.for_serving("127.0.0.1", force_share_mode=True, models_folder=tmp_path)
    backend = FakeBackend()
    return StudioService(policy=policy, provider=lambda spec: backend, dry_run=True, workflows_dir=tmp_path / "wf",
                         examples_dir=tmp_path / "none", models_dir=tmp_path, trace_db=tmp_path / "t.db")


def test_a_fan_out_known_to_pass_the_cap_is_refused_before_it_runs(tmp_path: Path) -> None:
    service = _service(tmp_path)
    folder = tmp_path / "wf"
    folder.mkdir(exist_ok=True)
    big = fanout_tree(folder, width=7, depth=3)  # 7 + 49 + 343 = 399 child runs
    codes = [i.code for i in service.check(load_workflow(folder / f"{big}.yaml"))]
    assert codes.count("too_many_child_runs") == 1
    assert service.policy.cap_budget(None).max_child_runs == SHARE_MAX_CHILD_RUNS
    assert "sub-workflow runs" in service.policy.describe()


def test_a_fan_out_under_the_cap_passes(tmp_path: Path) -> None:
    service = _service(tmp_path)
    folder = tmp_path / "wf"
    folder.mkdir(exist_ok=True)
    small = fanout_tree(folder, width=4, depth=3)  # 4 + 16 + 64 = 84
    assert "too_many_child_runs" not in [i.code for i in service.check(load_workflow(folder / f"{small}.yaml"))]
