"""Fixtures of the Python API tests: a Studio on the scripted fake backend, in a temp folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import metagen

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def studio(tmp_path: Path) -> Iterator[metagen.Studio]:
    with metagen.Studio(dry_run=True, trace_db=tmp_path / "traces.db", workflows_dir=tmp_path / "workflows",
                        models_dir=tmp_path / "models") as s:
        yield s
