"""Sub-workflow checks cost one check per distinct child (issue 32, 3): a tree using a child W times at each of
several levels is checked once per (child, depth), its instances are capped, and page loads check nothing new."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.service.studio import StudioService
from app.share.policy import SharePolicy
from app.workflow import validation
from app.workflow.spec import load_workflow
from app.workflow.subworkflows import MAX_CHILD_INSTANCES, ChildLoader
from backends.fake import FakeBackend
from nodes.registry import default_registry
from tests.core.subworkflow_trees import wide_tree

REGISTRY = default_registry()


@pytest.fixture()
def checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of every workflow `validation.check` is called on (the recursion goes through the module name)."""
    seen: list[str] = []
    real = validation.check

    def counting(wf: Any, *args: Any, **kw: Any) -> Any:
        seen.append(wf.name)
        return real(wf, *args, **kw)

    monkeypatch.setattr(validation, "check", counting)
    return seen


def test_each_distinct_child_is_checked_once_per_depth(tmp_path: Path, checks: list[str]) -> None:
    top = wide_tree(tmp_path, uses=6, depth=3)  # 6 + 36 + 216 uses; the old code checked every use
    checked = validation.check(load_workflow(tmp_path / f"{top}.yaml"), REGISTRY, ChildLoader((tmp_path,)))
    assert [i for i in checked.issues if i.severity == "error"] == []
    assert sorted(checks) == ["leaf", "wide1", "wide2", "wide3"]
    assert checked.instances == 6 + 36 + 216
    leaf = checked.children["u5"].checked.children["u5"].checked.children["u5"]
    assert leaf.workflow.name == "leaf" and leaf.kind.output_port("answer") is not None


def test_a_tree_past_the_instance_cap_is_refused_cheaply(tmp_path: Path, checks: list[str]) -> None:
    top = wide_tree(tmp_path, uses=12, depth=4)  # 12 + 144 + 1,728 + 20,736 uses
    checked = validation.check(load_workflow(tmp_path / f"{top}.yaml"), REGISTRY, ChildLoader((tmp_path,)))
    codes = [i.code for i in checked.issues]
    assert "too_many_subworkflows" in codes and len(codes) < 50
    assert len(checks) <= 5 and checked.instances <= MAX_CHILD_INSTANCES


def test_a_child_problem_keeps_its_path_at_every_use(tmp_path: Path) -> None:
    top = wide_tree(tmp_path, uses=2, depth=2)
    leaf = (tmp_path / "wide0.yaml").read_text()
    (tmp_path / "wide0.yaml").write_text(leaf.replace("kind: template", "kind: templat"))
    checked = validation.check(load_workflow(tmp_path / f"{top}.yaml"), REGISTRY, ChildLoader((tmp_path,)))
    paths = sorted(i.node_id for i in checked.issues if i.code == "unknown_kind")
    assert paths == ["u0/u0/t", "u0/u1/t", "u1/u0/t", "u1/u1/t"]


def test_page_loads_do_not_check_the_folder_again(tmp_path: Path, checks: list[str]) -> None:
    folder = tmp_path / "wf"
    service = StudioService(policy=SharePolicy.local(), provider=lambda spec: FakeBackend(), dry_run=True,
                            workflows_dir=folder, examples_dir=tmp_path / "none", models_dir=tmp_path,
                            trace_db=tmp_path / "t.db")
    wide_tree(folder, uses=5, depth=3)
    service.record_versions()  # first sight of the folder: each file's version (its tree hash) is recorded once
    assert len(checks) <= 2 + 3 + 4, " ".join(checks)  # wide1's tree once (wide1, leaf), wide2's, wide3's
    checks.clear()
    first = service.workflow_ports()
    assert set(first) == {"wide0", "wide1", "wide2", "wide3"}
    assert len(checks) <= 4 + 3, " ".join(checks)  # each top workflow once, each child once per depth (shared)
    checks.clear()
    assert service.workflow_ports() == first and checks == []  # a page load with no change checks nothing
    (folder / "other.yaml").write_text((folder / "wide0.yaml").read_text().replace("name: leaf", "name: other"))
    assert "other" in service.workflow_ports() and checks  # a changed folder is checked again


def test_a_link_carrying_a_wide_tree_checks_each_child_once(tmp_path: Path, checks: list[str]) -> None:
    wide_tree(tmp_path, uses=10, depth=2)  # what a share link of a W=10 tree carries: the children's texts
    texts = {name: (tmp_path / f"{name}.yaml").read_text() for name in ("wide0", "wide1")}
    top = load_workflow(tmp_path / "wide2.yaml")
    loader = ChildLoader((), trusted=False, texts=texts)
    checked = validation.check(top, REGISTRY, loader)
    assert [i for i in checked.issues if i.severity == "error"] == []
    assert sorted(checks) == ["leaf", "wide1", "wide2"] and checked.instances == 10 + 100
