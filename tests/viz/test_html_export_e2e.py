"""The exported HTML report opens in Chromium offline, draws its charts and has the expected elements."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import app.viz as viz

pytestmark = pytest.mark.e2e

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--no-first-run", "--disable-gpu"]
LOCAL = ("file:", "data:", "blob:", "about:")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "viz"


@pytest.fixture(scope="module")
def chromium(chromium_browser: Any) -> Any:
    """The session's one Chromium (tests/conftest.py)."""
    return chromium_browser


@pytest.fixture
def open_report(chromium: Any, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """open_report(record) -> page showing the record's export; afterwards no errors, no network."""
    context = chromium.new_context(viewport={"width": 1300, "height": 1000})
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    page.on("request", lambda r: problems.append(f"request: {r.url}") if not r.url.startswith(LOCAL) else None)
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(LOCAL) else route.abort())

    def open_(record: dict[str, Any]) -> Any:
        path = tmp_path / f"run-{record['run']['id']}.html"
        path.write_text(viz.export_html(record), encoding="utf-8")
        page.goto(path.as_uri())
        page.wait_for_selector("#mg-timeline .js-plotly-plot .main-svg")
        return page

    yield open_
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()
    assert problems == []


def test_beam_search_report(open_report: Any, example_records: dict[str, dict[str, Any]]) -> None:
    record = example_records["beam_search"]
    page = open_report(record)
    assert page.title() == f"Run {record['run']['id']} · {record['run']['workflow']}"
    for section in ("mg-summary", "mg-timeline", "mg-samples", "mg-search-tree", "mg-refinement", "mg-tokens",
                    "mg-calls", "mg-workflow"):
        assert page.locator(f"section#{section}").is_visible()
    assert page.locator("#mg-summary-cards .mg-card").count() >= 8
    # one timeline bar per node run and per LM call
    bars = page.locator("#mg-timeline-plot g.point").count()
    assert bars == len(record["nodes"]) + len(record["lm_calls"])
    assert page.locator("#mg-samples .js-plotly-plot").count() == 1
    assert page.locator("#mg-samples tr.mg-winner").count() >= 1
    # the search tree: a marker per state, the chosen path drawn, the outline expandable
    tree = next(e for e in record["events"] if e["kind"] == "tree")["data"]["nodes"]
    markers = page.locator("#mg-tree-plot-0 .scatterlayer .point").count()
    assert markers == len(tree)
    state = page.locator("#mg-search-tree details:not([open])").first.get_attribute("data-state")
    closed = page.locator(f'#mg-search-tree details[data-state="{state}"]')  # a state off the chosen path
    text = closed.locator(":scope > div > .mg-text")
    assert not text.is_visible()
    closed.locator(":scope > summary").click()
    assert text.is_visible() and text.inner_text().strip()
    assert page.locator("table.mg-calls tbody tr").count() == len(record["lm_calls"])
    assert "name: beam-search" in page.locator("#mg-workflow pre").inner_text()


def test_token_panels_switch(open_report: Any, logprob_records: list[dict[str, Any]]) -> None:
    record = logprob_records[0]
    page = open_report(record)
    pick = page.locator("#mg-call-pick")
    ids = [c["call_id"] for c in record["lm_calls"] if c["logprobs"]]
    assert pick.locator("option").count() == len(ids) >= 2
    first, second = (page.locator(f'.mg-token-panel[data-call="{i}"]') for i in ids[:2])
    assert first.is_visible() and not second.is_visible()
    pick.select_option(ids[1])
    assert second.is_visible() and not first.is_visible()
    token = second.locator(".mg-tok").first
    assert token.get_attribute("title").startswith("p = ")
    assert token.evaluate("e => getComputedStyle(e).backgroundColor") != "rgba(0, 0, 0, 0)"


def test_refine_report(open_report: Any, example_records: dict[str, dict[str, Any]]) -> None:
    record = example_records["self_refine"]
    page = open_report(record)
    iterations = next(e for e in record["events"] if e["kind"] == "refine")["data"]["iterations"]
    assert page.locator("#mg-refinement .mg-box").count() == len(iterations)
    assert page.locator("#mg-refinement ins, #mg-refinement del").count() >= 1
    assert "no search tree" in page.locator("#mg-search-tree").inner_text()
