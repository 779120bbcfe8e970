"""Workflow versions in the trace database (issue 50): save, edit, save gives two versions and the first restores;
an identical save adds none; references (hash prefix, name, -1, published); run counts and best figures; a
process killed inside a save's transaction leaves the database and the file whole; a file edited outside the
studio becomes a version when listed."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.service.errors import UserError
from app.service.versions import WorkflowVersions, store_at
from app.traces.db import create_trace_engine
from app.traces.tables import EVAL_ITEMS, RUNS
from app.workflow.spec import load_workflow_text

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = (ROOT / "workflows" / "self_consistency.yaml").read_text(encoding="utf-8")
EDITED = EXAMPLE.replace("n: 8", "n: 16")


@pytest.fixture()
def versions(tmp_path: Path) -> WorkflowVersions:
    folder = tmp_path / "wf"
    folder.mkdir()
    return WorkflowVersions(store_at(tmp_path / "t.db"), folder)


def test_save_edit_save_gives_two_versions_and_the_first_restores(versions: WorkflowVersions) -> None:
    first = versions.save_text("sc", EXAMPLE, message="first")
    again = versions.save_text("sc", EXAMPLE)
    assert again.version == first.version
    second = versions.save_text("sc", EDITED, message="n=16")
    rows = versions.history("sc")
    assert [r["version"] for r in rows] == [second.version, first.version]  # newest first
    assert rows[0]["message"] == "n=16" and rows[1]["message"] == "first"
    assert second.parent == first.version and first.parent is None
    assert first.version == load_workflow_text(EXAMPLE).semantic_hash()  # the hash runs carry
    assert versions.version_yaml("sc", first.version[:6]) == EXAMPLE
    path = versions.workflows_dir / "sc.yaml"  # type: ignore[operator]
    path.write_text(EDITED.replace("n: 16", "n: 4"), encoding="utf-8")  # an edit not yet recorded
    restored = versions.restore("sc", "-2")
    assert restored.version == first.version and path.read_text(encoding="utf-8") == EXAMPLE
    assert len(versions.history("sc")) == 3  # the unrecorded edit was kept before the restore


def test_references_names_and_publishing(versions: WorkflowVersions) -> None:
    a = versions.save_text("sc", EXAMPLE)
    b = versions.save_text("sc", EDITED)
    assert versions.get("sc", "-1").version == a.version
    assert versions.get("sc").version == b.version
    versions.set_name("sc", a.version[:8], "baseline")
    assert versions.get("sc", "baseline").version == a.version
    with pytest.raises(UserError, match="already has a version named 'baseline'"):
        versions.set_name("sc", b.version, "baseline")
    with pytest.raises(UserError, match="has no version 'zzz'"):
        versions.get("sc", "zzz")
    with pytest.raises(UserError, match="has 2 recorded version"):
        versions.get("sc", "-5")
    assert versions.published("sc") is None
    versions.publish("sc", "baseline")
    assert versions.published("sc").version == a.version  # type: ignore[union-attr]
    assert versions.served("sc").yaml == EXAMPLE  # type: ignore[union-attr]
    assert [r["published"] for r in versions.history("sc")] == [False, True]
    assert versions.unpublish("sc") and versions.published("sc") is None


def test_history_counts_runs_and_the_best_evaluation_figure(versions: WorkflowVersions) -> None:
    a = versions.save_text("sc", EXAMPLE)
    b = versions.save_text("sc", EDITED)
    engine = create_trace_engine(versions.store.path)
    with engine.begin() as conn:  # three runs of a, one of b; an evaluation of a's runs: item means 0, 1, 1
        conn.execute(RUNS.insert(), [{"id": f"r{i}", "workflow_hash": a.version} for i in range(3)]
                     + [{"id": "rb", "workflow_hash": b.version}])
        conn.execute(EVAL_ITEMS.insert(), [
            {"eval_id": "e", "workflow_idx": 0, "point_idx": 0, "item_idx": i, "run_id": f"r{i}",
             "score": float(i > 0)} for i in range(3)])
    engine.dispose()
    rows = {r["version"]: r for r in versions.history("sc")}
    assert rows[a.version]["runs"] == 3 and rows[a.version]["best"] == pytest.approx(0.6667)
    assert rows[b.version]["runs"] == 1 and rows[b.version]["best"] is None


def test_a_file_changed_outside_the_studio_becomes_a_version_when_listed(versions: WorkflowVersions) -> None:
    path = versions.workflows_dir / "sc.yaml"  # type: ignore[operator]
    path.write_text(EXAMPLE, encoding="utf-8")
    assert versions.record_folder() == 1
    assert versions.record_folder() == 0  # unchanged: not read again
    path.write_text(EDITED, encoding="utf-8")  # a text editor, git checkout
    assert versions.history("sc")[0]["version"] == load_workflow_text(EDITED).semantic_hash()


def test_a_sub_workflow_change_is_a_new_version_of_its_parent(versions: WorkflowVersions) -> None:
    from tests.workflows.test_diff import LEAF, PARENT

    folder = versions.workflows_dir
    (folder / "leaf.yaml").write_text(LEAF, encoding="utf-8")  # type: ignore[operator]
    first = versions.save_text("parent", PARENT)
    assert list(first.children) == ["leaf"]  # kept with the parent, canonical
    assert load_workflow_text(first.children["leaf"]).to_dict() == load_workflow_text(LEAF).to_dict()
    (folder / "leaf.yaml").write_text(LEAF.replace("[{draft}]", "<{draft}>"), encoding="utf-8")  # type: ignore[operator]
    second = versions.record_file("parent", force=True)
    assert second is not None and second.version != first.version
    d = versions.diff("parent", first.version, second.version)
    assert list(d["subworkflows"]) == ["w"]


def test_restore_writes_back_the_sub_workflows_the_version_used(versions: WorkflowVersions) -> None:
    from tests.workflows.test_diff import LEAF, PARENT

    folder = versions.workflows_dir
    leaf = folder / "leaf.yaml"  # type: ignore[operator]
    leaf.write_text(LEAF, encoding="utf-8")
    first = versions.save_text("parent", PARENT)
    edited_leaf = LEAF.replace("[{draft}]", "<{draft}>")
    leaf.write_text(edited_leaf, encoding="utf-8")
    second = versions.record_file("parent", force=True)
    assert second is not None and second.version != first.version
    restored, children = versions.restore_tree("parent", first.version)
    assert restored.version == first.version and children == [leaf.resolve()]
    assert load_workflow_text(leaf.read_text(encoding="utf-8")).to_dict() == load_workflow_text(LEAF).to_dict()
    now = versions.record_file("parent", force=True)  # the files on disk are that version again, children too
    assert now is not None and now.version == first.version
    assert load_workflow_text(versions.get("leaf", "-1").yaml).to_dict() == \
        load_workflow_text(edited_leaf).to_dict()  # the child's edit was kept in its own history
    assert versions.restore_tree("parent", first.version)[1] == []  # the same tree: no child rewritten
    leaf.unlink()
    assert versions.restore_tree("parent", first.version)[1] == [folder / "leaf.yaml"]  # type: ignore[operator]
    assert leaf.is_file()


CRASHER = """
import os, signal, sys
from pathlib import Path
from app.service.versions import WorkflowVersions, store_at
versions = WorkflowVersions(store_at(sys.argv[1]), Path(sys.argv[2]))
text = Path(sys.argv[3]).read_text(encoding="utf-8")
versions.save_text("sc", text, hook=lambda: os.kill(os.getpid(), signal.SIGKILL))
"""


def test_a_process_killed_inside_the_save_transaction_leaves_database_and_file_whole(tmp_path: Path) -> None:
    folder = tmp_path / "wf"
    folder.mkdir()
    db = tmp_path / "t.db"
    versions = WorkflowVersions(store_at(db), folder)
    first = versions.save_text("sc", EXAMPLE)
    edited = tmp_path / "edited.yaml"
    edited.write_text(EDITED, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", CRASHER, str(db), str(folder), str(edited)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert (folder / "sc.yaml").read_text(encoding="utf-8") in (EXAMPLE, EDITED)  # never half a file
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temp file left beside it
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute("SELECT version, yaml FROM workflow_versions").fetchall()
    assert rows == [(first.version, EXAMPLE)]  # the killed transaction left nothing
    again = WorkflowVersions(store_at(db), folder)
    assert again.history("sc")[0]["version"] == load_workflow_text(EDITED).semantic_hash()


def test_the_python_api_save_records_a_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import metagen

    monkeypatch.setenv("METAGEN_TRACE_DB", str(tmp_path / "api.db"))
    wf = metagen.load(EXAMPLE)
    target = wf.save(tmp_path / "mine.yaml", message="from Python")
    wf.save(target)
    wf.with_params({"think.n": 4}).save(target)
    rows = WorkflowVersions(store_at(tmp_path / "api.db"), tmp_path).history(target)
    assert len(rows) == 2 and rows[1]["message"] == "from Python"
    assert json.loads(json.dumps(rows))  # JSON-able for the UI
    target.write_text(EXAMPLE.replace("n: 8", "n: 3"), encoding="utf-8")  # edited outside, then run from Python
    studio = metagen.Studio(dry_run=True, trace_db=tmp_path / "api.db")
    try:
        metagen.load(target).run(studio=studio, progress=False)
    finally:
        studio.close()
    rows = WorkflowVersions(store_at(tmp_path / "api.db"), tmp_path).history(target)
    assert len(rows) == 3 and rows[0]["runs"] == 1


def test_a_tunes_recommended_workflow_is_recorded_with_the_tunes_id(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from app.service.tunes import TuneService
    from tests.studio_fixtures import studio_service

    service = studio_service(tmp_path)
    try:
        out = service.workflows_dir / "tuned" / "best.yaml"
        out.parent.mkdir()
        out.write_text(EDITED, encoding="utf-8")  # what `metagen tune --out` wrote
        result = SimpleNamespace(tune_id="t123", recommended={"path": str(out)}, adaptive=None)
        TuneService(service)._record_versions(result)  # type: ignore[arg-type]
        assert result.recommended["version"] == load_workflow_text(EDITED).semantic_hash()
        history = service.versions.history(out)
        assert [h["message"] for h in history] == ["metagen tune t123"]
    finally:
        service.close()


def test_restore_never_overwrites_a_file_it_cannot_keep(versions: WorkflowVersions) -> None:
    first = versions.save_text("sc", EXAMPLE)
    path = versions.workflows_dir / "sc.yaml"  # type: ignore[operator]
    path.write_text("nodes: [unclosed\n", encoding="utf-8")
    with pytest.raises(UserError, match="does not load as a workflow"):
        versions.restore("sc", first.version)
    assert path.read_text(encoding="utf-8") == "nodes: [unclosed\n"
