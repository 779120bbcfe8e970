"""The samples view of code runs, drawn from a trace record of a real run (candidates' code run confined): each
candidate's tests, the failing assert and its error, output tails, and the behaviour vote's note."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest

from app.run.providers import fake_provider
from app.run.scheduler import SUCCEEDED, Scheduler
from app.traces import TraceStore
from app.viz import export_html, sample_view, samples_html
from app.workflow.spec import workflow_from_dict
from nodes.registry import default_registry

TESTS = "assert add(1, 2) == 3\nassert add(2, 2) == 4\nassert add(-1, 1) == 0"
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
# the harness keeps what the program prints to sys.stdout for its tests; the real stdout is the run's tail
NOISY_OFF = ("```python\nimport sys\nprint('hello from stdout', file=sys.__stdout__)\n"
             "print('warning on stderr', file=sys.stderr)\n"
             "def add(a, b):\n    return a + b + 1 if a > 0 else a + b\n```")
RAISES = "```python\ndef add(a, b):\n    raise ValueError('cannot add')\n```"
BROKEN = "```python\ndef add(a, b) return a\n```"


def workflow() -> Any:
    return workflow_from_dict({"version": 1, "name": "code-views", "inputs": {
        "question": {"type": "text", "default": "Write add(a, b)."},
        "tests": {"type": "text", "default": TESTS},
        "generated": {"type": "text", "default": "Here are three inputs:\nsome numbers\n2. add(4, 5"}},
        "nodes": [
            {"id": "s", "kind": "sampler", "params": {"n": 4, "prompt": "{question}"},
             "inputs": {"question": "inputs.question"}},
            {"id": "v", "kind": "verifier", "params": {"method": "tests"},
             "inputs": {"candidates": "s.candidates", "tests": "inputs.tests"}},
            {"id": "vote", "kind": "voter", "params": {"method": "behaviour", "entry_point": "add",
                                                        "filter_passing": False},
             "inputs": {"candidates": "v.candidates", "tests": "inputs.tests",
                        "generated_inputs": "inputs.generated"}}],
        "outputs": {"answer": "vote.answer"}})


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    store = TraceStore(Path(tmp_path_factory.mktemp("code-views")) / "traces.db")
    scheduler = Scheduler(default_registry(), fake_provider(replies=[RIGHT, NOISY_OFF, RAISES, BROKEN]))
    scheduler.allow_code_execution = True
    try:
        result = scheduler.run(workflow(), seed=0, observers=[store])
        assert result.status == SUCCEEDED, result.error
        return store.get_run(result.run_id)
    finally:
        store.close()


def cells(page: str) -> list[str]:
    """The tests cell of each candidate row, unescaped text without tags."""
    found = re.findall(r"<td><details><summary>(\d+/\d+ passed.*?)</details></td>", page, re.S)
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", f)).split()) for f in found]


def test_each_candidate_shows_its_tests(record: dict[str, Any]) -> None:
    page = samples_html(record, "v")
    assert "<th>tests</th>" in page
    right, noisy, raises, broken = cells(page)
    assert right.startswith("3/3 passed") and right.count("✓") == 3
    # the failing assert, the value it got; the passing one with its value
    assert noisy.startswith("1/3 passed") and noisy.count("✗") == 2
    assert "assert add(1, 2) == 3" in noisy and "got 4" in noisy and "✓ assert add(-1, 1) == 0" in noisy
    assert "hello from stdout" in noisy and "warning on stderr" in noisy
    assert "stdout (tail)" in noisy and "stderr (tail)" in noisy
    assert raises.startswith("0/3 passed") and "ValueError: cannot add" in raises
    assert broken.startswith("0/3 passed") and "SyntaxError" in broken  # no test ran: the reason says why


def test_the_figure_table_counts_each_candidates_tests(record: dict[str, Any]) -> None:
    (table,) = [t for t in sample_view(record, "v").data if t.type == "table"]
    assert list(table.header.values)[-1] == "tests"
    assert list(table.cells.values[-1]) == ["3/3 passed", "1/3 passed", "0/3 passed", "0/3 passed"]
    (table,) = [t for t in sample_view(record, "s").data if t.type == "table"]
    assert "tests" not in list(table.header.values)


def test_the_voter_shows_its_own_runs_and_the_note_on_generated_inputs(record: dict[str, Any]) -> None:
    page = html.unescape(samples_html(record, "vote"))
    assert "3 generated inputs could not be used: 'Here are three inputs:' (SyntaxError: " in page
    assert "clustered on the example tests only" in page
    assert "Clusters whose outputs are all errors: #" in page  # the program that raises on every test
    assert len(cells(samples_html(record, "vote"))) == 4  # the voter runs every program again (no filter)


def test_views_without_code_runs_have_no_tests_column(record: dict[str, Any]) -> None:
    assert "<th>tests</th>" not in samples_html(record, "s")
    assert "could not be used" not in samples_html(record, "v")


def test_the_offline_report_carries_them(record: dict[str, Any]) -> None:
    page = html.unescape(export_html(record))
    assert "got 4" in page and "clustered on the example tests only" in page
