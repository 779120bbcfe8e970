"""Export -> JSON file -> import -> show gives the same record; bad files are refused clearly."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from app.run.scheduler import Scheduler
from app.traces import TraceStore, TraceStoreError
from app.workflow.spec import Workflow


def test_export_import_show_gives_the_same_record(tmp_path: Path, store: TraceStore, sc_workflow: Workflow,
                                                  make_scheduler: Callable[..., Scheduler]) -> None:
    result = make_scheduler().run(sc_workflow, seed=5, observers=[store])
    original = store.get_run(result.run_id)
    document = store.export_run(result.run_id)
    file = tmp_path / "run.json"
    file.write_text(json.dumps(document), encoding="utf-8")
    # prompts are stored once in the document, not once per sample
    assert len(document["prompts"]) == 1 and all("prompt" not in c for c in document["lm_calls"])
    assert document["run"]["workflow_yaml"] == sc_workflow.to_yaml()

    other = TraceStore(tmp_path / "other.db")
    try:
        imported_id = other.import_run(json.loads(file.read_text(encoding="utf-8")))
        assert imported_id == result.run_id
        copy = other.get_run(imported_id)
        assert {k: v for k, v in copy.items() if k != "provenance"} == \
            {k: v for k, v in original.items() if k != "provenance"}
        assert copy["provenance"]["source"] == "imported"
        assert copy["provenance"]["imported_from"] == result.run_id
        assert other.candidates(imported_id, "vote") == store.candidates(result.run_id, "vote")
        # exporting the copy gives the original document back (but for the export time and provenance)
        again = other.export_run(imported_id)
        for doc in (again, document):
            doc.pop("exported_at")
            doc.pop("provenance")
        assert again == document
    finally:
        other.close()

    # importing into the database that has the run keeps both, under a new id
    second_id = store.import_run(document)
    assert second_id != result.run_id and second_id.startswith(result.run_id)
    assert store.get_run(second_id)["lm_calls"] == original["lm_calls"]


def test_a_get_run_record_imports_too(store: TraceStore, tmp_path: Path, sc_workflow: Workflow,
                                      make_scheduler: Callable[..., Scheduler]) -> None:
    result = make_scheduler().run(sc_workflow, observers=[store])
    record = store.get_run(result.run_id)
    other = TraceStore(tmp_path / "o.db")
    try:
        run_id = other.import_run({"format": "metagen-trace", "format_version": 1, **record})
        assert other.get_run(run_id)["lm_calls"] == record["lm_calls"]
    finally:
        other.close()


@pytest.mark.parametrize(("document", "message"), [
    ([1, 2], "not a Metagen trace export"),
    ({"format": "other"}, "not a Metagen trace export"),
    ({"format": "metagen-trace", "format_version": 99}, "upgrade"),
    ({"format": "metagen-trace", "format_version": 1, "run": {"id": "x"}}, "'nodes' is missing"),
    ({"format": "metagen-trace", "format_version": 1, "run": {}, "nodes": [], "lm_calls": [], "events": []},
     "no id"),
    ({"format": "metagen-trace", "format_version": 1, "run": {"id": "x"}, "nodes": [{"kind": "a"}],
      "lm_calls": [], "events": []}, "damaged"),
])
def test_bad_documents_are_refused(store: TraceStore, document: object, message: str) -> None:
    with pytest.raises(TraceStoreError, match=message):
        store.import_run(document)
    assert store.list_runs() == []


def test_unknown_run_ids_and_prefixes(store: TraceStore, sc_workflow: Workflow,
                                      make_scheduler: Callable[..., Scheduler]) -> None:
    result = make_scheduler().run(sc_workflow, observers=[store])
    assert store.get_run(result.run_id[:5])["run"]["id"] == result.run_id
    with pytest.raises(TraceStoreError, match="no run 'nope'"):
        store.get_run("nope")
    with pytest.raises(TraceStoreError, match="traces list"):
        store.export_run("nope")
