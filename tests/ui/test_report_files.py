"""Class 7 (disk): trace report downloads are bounded in number and removed, and Gradio's copies expire."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.platform.scratch import ScratchFolder
from app.ui import traces_tab


def test_reports_folder_keeps_only_the_newest_files() -> None:
    scratch = ScratchFolder("metagen-test-reports", keep=3)
    paths = [scratch.write_text(f"run-{i}.html", "x" * 1000) for i in range(10)]
    kept = scratch.files()
    assert [p.name for p in kept] == ["run-7.html", "run-8.html", "run-9.html"]
    assert all(not p.exists() for p in paths[:7])
    folder = scratch.folder
    scratch.clear()
    assert not folder.exists()


def test_scratch_names_are_plain_file_names() -> None:
    scratch = ScratchFolder("metagen-test-reports")
    for bad in ("../escape.html", "/tmp/x.html", ".hidden"):
        with pytest.raises(ValueError, match="plain file name"):
            scratch.write_text(bad, "x")
    scratch.clear()


def test_viewing_many_runs_leaves_a_bounded_reports_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the Traces tab does on every run view: the report file it offers for download."""
    scratch = ScratchFolder("metagen-test-reports", keep=4)
    monkeypatch.setattr(traces_tab, "REPORTS", scratch)
    monkeypatch.setattr(traces_tab.viz, "export_html", lambda record: "<html>" + "r" * 100_000 + "</html>")
    for i in range(25):
        path = traces_tab._export_file({"run": {"id": f"run{i:03d}"}})
        assert path is not None and Path(path).is_file()
    assert len(scratch.files()) == 4
    total = sum(p.stat().st_size for p in scratch.files())
    assert total < 4 * 110_000
    scratch.clear()


def test_the_app_asks_gradio_to_delete_its_file_copies(tmp_path: Path) -> None:
    from app.service.studio import StudioService
    from app.share.policy import SharePolicy
    from app.ui.app import GRADIO_CACHE_CLEANUP, build_app

    service = StudioService(policy=SharePolicy.local(), dry_run=True, workflows_dir=tmp_path / "wf",
                            trace_db=tmp_path / "traces.db")
    demo = build_app(service)
    assert demo.delete_cache == GRADIO_CACHE_CLEANUP
    frequency, age = GRADIO_CACHE_CLEANUP
    assert 0 < frequency <= age <= 24 * 3600
