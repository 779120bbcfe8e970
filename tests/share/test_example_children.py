"""An example's sub-workflows resolve among the examples: a visitor's workflow named like an example's child
(`refine_each`) in the workflows folder never stands in for it, in the example's checks or in its runs."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from app.service.studio import StudioService
from app.ui.editor_page import mg_example, mg_run
from app.workflow.spec import load_workflow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def service(tmp_path: Path) -> Any:
    (tmp_path / "wf").mkdir()  # an upgraded install: the folder exists, the new examples were not copied in
    studio = StudioService(workflows_dir=tmp_path / "wf", examples_dir=ROOT / "workflows", dry_run=True,
                           trace_db=tmp_path / "t.db")
    # a visitor's workflow under the example child's name: other inputs and outputs than the example's child
    shutil.copyfile(ROOT / "workflows" / "chain_of_thought.yaml", studio.workflows_dir / "refine_each.yaml")
    yield studio
    studio.close()


def test_an_examples_children_come_from_the_examples(service: StudioService) -> None:
    opened = mg_example(service, {"name": "best_of_refined"})
    example_child = load_workflow(ROOT / "workflows" / "refine_each.yaml").to_yaml()
    assert opened["children"] == {"refine_each": example_child}
    assert not [i for i in opened["issues"] if i["severity"] == "error"], opened["issues"]
    assert {p["name"] for p in opened["children_ports"]["refine_each"]["inputs"]} == {"question", "draft"}


def test_an_examples_run_uses_the_examples_child(service: StudioService) -> None:
    opened = mg_example(service, {"name": "best_of_refined"})
    started = mg_run(service, {"workflow": opened["workflow"], "children": opened["children"], "origin": "file"})
    status = service.wait_run(started["run_id"], timeout=120)
    assert status["status"] == "succeeded", status
    assert "/revise]" in status["nodes"]["refine_each"]["text"]  # the example child's last node answered
