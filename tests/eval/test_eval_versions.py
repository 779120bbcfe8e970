"""Every figure names its version (issue 50, item 2): an evaluation's rows carry the version they ran, the files
evaluated are recorded as versions (their history counts the runs and shows the best figure), and `metagen eval`
says so when rows that share a workflow name ran different versions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.main import main
from app.service.versions import WorkflowVersions, store_at
from app.workflow.spec import load_workflow_text

ROOT = Path(__file__).resolve().parents[2]
SC = (ROOT / "workflows" / "self_consistency.yaml").read_text(encoding="utf-8")


def test_rows_sharing_a_name_but_not_a_version_are_noted(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"question": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n"
                            for i in range(2)), encoding="utf-8")
    a, b = tmp_path / "a" / "sc.yaml", tmp_path / "b" / "sc.yaml"
    for path, n in ((a, 2), (b, 3)):
        path.parent.mkdir()
        path.write_text(SC.replace("n: 8", f"n: {n}").replace("min_samples: 4", "min_samples: 2"), encoding="utf-8")
    db = tmp_path / "t.db"
    code = main(["eval", str(a), str(b), "--data", str(data), "--metric", "number", "--dry-run", "--db", str(db),
                 "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    summary = json.loads(out.out)
    hashes = [load_workflow_text(p.read_text(encoding="utf-8")).semantic_hash() for p in (a, b)]
    assert [p["version"] for p in summary["points"]] == hashes
    assert "note: rows named 'self-consistency' ran different versions of the workflow" in out.err
    assert hashes[0] in out.err and hashes[1] in out.err
    history = WorkflowVersions(store_at(db), a.parent).history(a)
    assert [r["version"] for r in history] == [hashes[1], hashes[0]]  # both files are versions of `sc`
    assert history[1]["runs"] == 2 and history[1]["best"] is not None


def test_the_same_workflow_twice_is_not_noted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from app.eval.results import version_notes

    points = [{"workflow": "sc", "params": {}, "version": "abc", "workflow_idx": 0, "label": "sc"},
              {"workflow": "sc", "params": {"n": 2}, "version": "abc", "workflow_idx": 0, "label": "sc · n=2"}]
    assert version_notes(points, [{"source": "sc.yaml", "yaml": SC}]) == []
