"""Share mode's cap on sub-workflow runs (issue 32, 1): counted before the run where it can be, and as it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def test_a_cancelled_run_stuck_in_a_child_frees_the_slot_for_the_next_visitor(tmp_path: Path) -> None:
    from tests.core.test_subworkflow_fanout import Stuck
    from tests.core.test_subworkflows import CHILD, PARENT, write

    class StuckButBob(Stuck):
        def generate(self, prompt: Any, params: Any, *args: Any, **kw: Any) -> Any:
            if "bob" in str(prompt):
                return FakeBackend.generate(self, prompt, params, *args, **kw)
            return super().generate(prompt, params, *args, **kw)

    backend = StuckButBob()
    policy = SharePolicy.for_serving("127.0.0.1", force_share_mode=True, models_folder=tmp_path,
                                     max_concurrent_runs=1)
    service = StudioService(policy=policy, provider=lambda spec: backend, dry_run=True, workflows_dir=tmp_path / "wf",
                            examples_dir=tmp_path / "none", models_dir=tmp_path, trace_db=tmp_path / "t.db")
    folder = tmp_path / "wf"
    write(folder, "refine", CHILD)
    write(folder, "parent", PARENT)
    service.scheduler.stop_grace_s = 0.3
    try:
        stuck = service.start_run(load_workflow(folder / "parent.yaml").to_dict(), visitor="alice")
        assert backend.entered.wait(20)
        other = service.start_run(load_workflow(folder / "refine.yaml").to_dict(), {"draft": "bob"}, visitor="bob")
        assert service.run_status(other["run_id"], visitor="bob")["status"] == "queued"
        service.cancel_run(stuck["run_id"], visitor="alice")
        assert service.wait_run(stuck["run_id"], timeout=30, visitor="alice")["status"] == "cancelled"
        assert service.wait_run(other["run_id"], timeout=30, visitor="bob")["status"] == "succeeded"
    finally:
        backend.release.set()  # the old code: alice's run never ended, bob's stayed queued
