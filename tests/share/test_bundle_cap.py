"""The 256 KB bundle cap holds for every way sub-workflows arrive beside a workflow: in a `?wf=` link, and sent
back by the page with each check, canvas sync and run (issue 32, finding 8: 29.5 MB of `children` sent to
`mg_parse_yaml` took 30 s)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.service.errors import UserError
from app.service.studio import StudioService
from app.share.deeplink import MAX_DECODED_BYTES, DeepLinkError, check_link_children
from app.ui.editor_page import mg_from_editor, mg_parse_yaml, mg_run

ROOT = Path(__file__).resolve().parents[2]
PARENT = (ROOT / "workflows" / "best_of_refined.yaml").read_text(encoding="utf-8")
CHILD = (ROOT / "workflows" / "refine_each.yaml").read_text(encoding="utf-8")


@pytest.fixture
def service(tmp_path: Path) -> Any:
    studio = StudioService(workflows_dir=tmp_path / "wf", examples_dir=ROOT / "workflows", dry_run=True,
                           trace_db=tmp_path / "t.db")
    yield studio
    studio.close()


def _oversize() -> dict[str, str]:
    """Children that are each small but together over the cap (a long description pads each)."""
    pad = "x" * (MAX_DECODED_BYTES // 8)
    return {f"c{i}": CHILD.replace("description:", f"description: {pad}", 1) for i in range(9)}


def test_children_over_the_cap_are_refused_by_every_page_call(service: StudioService) -> None:
    children = _oversize()
    opened = service.parse_yaml(PARENT)
    calls = [(mg_parse_yaml, {"text": PARENT}), (mg_from_editor, {"workflow": opened["workflow"]}),
             (mg_run, {"workflow": opened["workflow"], "origin": "link"})]
    for call, payload in calls:
        with pytest.raises(UserError, match="KB together"):
            call(service, {**payload, "children": children})


def test_one_huge_child_is_refused_without_being_read(service: StudioService) -> None:
    with pytest.raises(DeepLinkError, match="KB together"):
        check_link_children({"refine_each": "a" * 30_000_000})
    assert check_link_children({"refine_each": CHILD}) == {"refine_each": CHILD}
