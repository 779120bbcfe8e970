"""Fuzz: trace export documents, generated and mutated from real runs, imported into a trace database. An
import is refused with a TraceStoreError or stores a run that reads back and exports again; the database
passes PRAGMA integrity_check at the end."""

from __future__ import annotations

from pathlib import Path

from tests.fuzz.targets import TARGETS, run_property


def test_trace_documents_import_or_are_refused(tmp_path: Path) -> None:
    run_property(TARGETS["trace_import"], tmp_path)
