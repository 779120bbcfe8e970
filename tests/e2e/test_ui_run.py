"""Running from the editor page against a slowed-down fake model: live node states, per-node candidate tables,
cancel mid-way with the UI staying usable, and the run in the Traces tab (`metagen ui --dry-run`)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.e2e

SERVER_ARGS = ["--dry-run", "--fake-latency", "1.0"]

CHAIN = """version: 1
name: slow-chain
inputs:
  question: {type: text, default: 'What is 2 + 2?'}
nodes:
- id: draft
  kind: generator
  params: {prompt: '{question}', max_tokens: 16}
  inputs: {question: inputs.question}
- id: check
  kind: generator
  params: {prompt: 'Check: {text}', max_tokens: 16}
  inputs: {text: draft.text}
- id: final
  kind: generator
  params: {prompt: 'Final: {text}', max_tokens: 16}
  inputs: {text: check.text}
- id: polish
  kind: generator
  params: {prompt: 'Polish: {text}', max_tokens: 16}
  inputs: {text: final.text}
outputs: {answer: polish.text}
"""


def type_workflow(ui: Any, text: str, nodes: int) -> None:
    ui.page.locator("[data-testid=yaml-editor]").fill(text)
    ui.page.wait_for_function(f"document.querySelectorAll('[data-node-id]').length === {nodes}")
    ui.page.wait_for_function("document.querySelector('[data-testid=issue-count]').textContent === '0'")


def test_cancel_a_run_mid_way_then_keep_working(ui: Any, shot: Any) -> None:
    type_workflow(ui, CHAIN, 6)
    ui.click_run()
    ui.page.wait_for_function("document.querySelector(\"[data-node-id='check'] [data-testid=state-badge]\")"
                              "?.textContent.trim() === 'running'")
    assert ui.node_state("draft") == "done"
    assert ui.node_state("polish") == "queued"
    assert not ui.page.locator("[data-testid=cancel-btn]").is_disabled()
    ui.page.locator("[data-testid=cancel-btn]").click()
    assert ui.wait_run_finished(30) == "cancelled"
    assert "cancelled" in ui.page.locator("[data-testid=run-status]").inner_text()
    assert ui.node_state("polish") != "done"
    assert ui.page.locator("[data-testid=cancel-btn]").is_disabled()
    shot(ui.page, "cancelled")

    # the page still answers: edit the workflow, run again; the finished first node comes from the cache
    ui.select("polish")
    ui.set_param("max_tokens", "20")
    ui.wait_yaml(lambda t: "max_tokens: 20" in t)
    ui.click_run()
    assert ui.wait_run_finished(60) == "succeeded"
    assert ui.node_state("draft") == "cached"
    assert ui.node_state("polish") == "done"
    assert ui.page.locator("[data-testid=run-outputs] [data-testid=output-answer]").inner_text().strip()
    shot(ui.page, "second-run")


VOTE = """version: 1
name: fake-vote
inputs:
  question: {type: text, default: 'What is 3 + 4?'}
  samples: {type: number, default: 3}
nodes:
- id: think
  kind: sampler
  params: {prompt: '{question}', mode: raw, n: 5, max_tokens: 16, extract: last_number}
  inputs: {question: inputs.question}
- id: vote
  kind: voter
  params: {method: majority, extract: last_number}
  inputs: {candidates: think.candidates}
outputs: {answer: vote.answer}
"""


def test_a_run_shows_live_states_outputs_candidate_table_and_its_trace(ui: Any, shot: Any) -> None:
    type_workflow(ui, VOTE, 5)
    question = ui.page.locator("[data-testid=input-question]")
    assert question.input_value() == "What is 3 + 4?"
    assert ui.page.locator("[data-testid=input-samples]").get_attribute("type") == "number"
    question.fill("What is 5 + 6?")
    ui.page.locator("[data-testid=seed-input]").fill("7")
    ui.click_run()
    ui.page.wait_for_function("document.querySelector(\"[data-node-id='think'] [data-testid=state-badge]\")"
                              "?.textContent.trim() === 'running'")
    assert ui.node_state("vote") == "queued"
    assert ui.run_status() == "running"
    assert ui.wait_run_finished(60) == "succeeded"
    assert ui.node_state("think") == "done" and ui.node_state("vote") == "done"
    assert ui.page.locator("[data-testid=run-progress]").get_attribute("aria-valuenow") == "100"
    ui.page.locator("[data-testid=run-outputs] [data-testid=output-answer]").wait_for()

    ui.select("think")
    table = ui.page.locator("[data-testid=node-outputs] [data-testid=candidates-table]")
    table.wait_for()
    assert table.locator("thead th").all_inner_texts() == ["#", "text", "answer", "score", "cluster", "winner"]
    assert table.locator("tbody tr").count() == 5
    assert "5 + 6" in table.locator("tbody tr").first.inner_text()  # the fake model echoes the prompt
    shot(ui.page, "node-outputs")

    ui.tab("Traces")
    runs = ui.page.locator("#mg-traces-runs")
    runs.get_by_text("fake-vote").first.wait_for()
    assert "succeeded" in runs.inner_text()
    ui.page.locator("#mg-trace-summary").get_by_text("succeeded").first.wait_for()
    ui.page.locator("#mg-trace-timeline .js-plotly-plot").wait_for()
    ui.page.get_by_role("tab", name="Samples").click()
    ui.page.locator("#mg-trace-samples-plot .js-plotly-plot").wait_for()
    shot(ui.page, "traces")

    ui.page.get_by_role("tab", name="Compare").click()  # this run against the cancelled one of the first test
    for box, nth in (("#mg-compare-a", 0), ("#mg-compare-b", -1)):
        ui.page.locator(f"{box} input").click()
        options = ui.page.get_by_role("option")
        (options.last if nth < 0 else options.nth(nth)).click()
    ui.page.locator("#mg-compare-btn").click()
    compare = ui.page.locator("#mg-compare")
    compare.locator("#mg-compare-totals").wait_for()
    assert "fake-vote" in compare.inner_text() and "slow-chain" in compare.inner_text()
    shot(ui.page, "compare")

    ui.page.locator("#mg-traces-open").click()  # back to the editor with this run's workflow
    ui.page.locator(".mg-page").wait_for(state="visible")
    ui.page.wait_for_function("document.querySelector('[data-testid=notice]').textContent.includes('Opened run')")
    assert "name: fake-vote" in ui.yaml()
    assert sorted(ui.node_ids()) == ["inputs.question", "inputs.samples", "outputs.answer", "think", "vote"]
