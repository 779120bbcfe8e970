"""The Traces tab's views of a tool_self_consistency run (scripted fake: Paris 3, Lyon 2, a text answer, two calls
the schema check rejects): the run summary's answer, the samples figure's table and the vote histogram show calls as
`name(args)` with their schema verdicts, never the answer JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app import viz
from app.traces import TraceStore
from tests.nodes.test_tool_nodes import EIGHT, Recording, example, run

RAW = ("&quot;tool_calls&quot;: [", "\\&quot;tool_calls\\&quot;", '"tool_calls": [', '\\"tool_calls\\"')
"""The answer JSON's key, plain, escaped for HTML, or inside a JSON string."""


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    store = TraceStore(Path(tmp_path_factory.mktemp("tool-views")) / "traces.db")
    try:
        result = run(example("tool_self_consistency"), Recording(replies=EIGHT), store=store)
        assert store.flush()
        return store.get_run(result.run_id)
    finally:
        store.close()


def test_the_summary_shows_the_answer_as_its_calls(record: dict[str, Any]) -> None:
    html = viz.summary_html(record)
    assert "get_weather(city=&quot;Paris&quot;, unit=&quot;celsius&quot;)" in html
    assert not any(raw in html for raw in RAW)


def test_the_samples_figure_shows_calls_and_schema_verdicts(record: dict[str, Any]) -> None:
    fig = viz.sample_view(record, "schema")
    (table,) = [t for t in fig.data if t.type == "table"]
    header = list(table.header.values)
    columns = dict(zip(header, table.cells.values, strict=True))
    assert columns["text"][0] == 'get_weather(city="Paris", unit="celsius")'
    assert list(columns["schema"][:3]) == ["✓ valid"] * 3
    assert columns["schema"][3].startswith("✗ ") and "no such tool" in columns["schema"][3]
    assert "unknown argument 'country'" in columns["schema"][6]
    assert not any(raw in json.dumps(list(columns["text"])) for raw in RAW)


def test_the_votes_view_counts_canonical_calls(record: dict[str, Any]) -> None:
    fig = viz.vote_histogram(record, "vote")
    (bars,) = fig.data
    assert list(bars.x)[:2] == ['get_weather(city="paris")', 'get_weather(city="lyon")']
    assert list(bars.y)[:2] == [3, 2]
