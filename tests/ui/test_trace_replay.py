"""The Traces tab's "Download bundle" and "Replay" (their functions, without a browser): the bundle file of a run
the studio ran, its replay with every call answered from it, and the refusals (no run, share mode)."""

from __future__ import annotations

import html
import json
from pathlib import Path

from app.traces.bundle import read_bundle
from app.ui.trace_replay import bundle_file, replay_html
from tests.studio_fixtures import studio_service

WORKFLOW = (Path(__file__).resolve().parents[2] / "workflows" / "self_consistency.yaml").read_text(encoding="utf-8")


def _ran(tmp_path: Path, share: bool = False) -> tuple[object, str]:
    from app.workflow.spec import load_workflow_text

    service = studio_service(tmp_path, share=share, reply=lambda prompt, i: f"Answer: {i % 2 + 4}")
    started = service.start_run(load_workflow_text(WORKFLOW).to_dict())
    assert service.wait_run(started["run_id"], timeout=30)["status"] == "succeeded"
    return service, started["run_id"]


def test_download_bundle_and_replay(tmp_path: Path) -> None:
    service, run_id = _ran(tmp_path)
    path = bundle_file(service, run_id, None)  # type: ignore[arg-type]
    assert path is not None and path.endswith(".bundle.json.gz")
    bundle = read_bundle(Path(path))
    assert bundle["run"]["id"] == run_id and bundle["calls"]
    shown = replay_html(service, run_id, None)  # type: ignore[arg-type]
    lm_calls = bundle["run"]["stats"]["lm_calls"]
    assert f'data-replayed="{lm_calls}" data-model="0" data-identical="true"' in shown
    assert html.escape(json.dumps(bundle["run"]["outputs"]["answer"])) in shown
    assert "Pick a run first" in replay_html(service, None, None)  # type: ignore[arg-type]
    assert bundle_file(service, None, None) is None  # type: ignore[arg-type]


def test_share_mode_visitors_get_no_replay(tmp_path: Path) -> None:
    service, run_id = _ran(tmp_path, share=True)
    assert "Replay is for the studio" in replay_html(service, run_id, "someone")  # type: ignore[arg-type]
    assert bundle_file(service, run_id, "someone") is None  # type: ignore[arg-type]  # not their run


def test_an_unknown_run_says_so(tmp_path: Path) -> None:
    service, _ = _ran(tmp_path)
    assert "no run &#x27;nope&#x27;" in replay_html(service, "nope", None)  # type: ignore[arg-type]
    assert bundle_file(service, "nope", None) is None  # type: ignore[arg-type]
