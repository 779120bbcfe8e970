"""Fixtures: a real `metagen serve --dry-run --fake-script FILE` on a free localhost port per test (the server of
tests/serve, its fake model scripted to call a tool and then answer from the tool's result)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.serve.conftest import ServeProcess, start_serve, stop_serve


@pytest.fixture
def scripted_serve(tmp_path: Path) -> Iterator[Callable[[Path], ServeProcess]]:
    """Start `metagen serve --dry-run --fake-script SCRIPT` (stopped at the test's end)."""
    started: list[ServeProcess] = []

    def make(script: Path) -> ServeProcess:
        server = start_serve(tmp_path / f"serve{len(started)}", ["--dry-run", "--fake-script", str(script)])
        started.append(server)
        return server

    yield make
    for server in started:
        stop_serve(server)
