"""The Traces tab's Download bundle and Replay in Chromium (`metagen ui --dry-run`): a run made in the editor,
its bundle downloaded and read back, and its replay showing every call answered from the bundle; its version line
says plainly that no save recorded it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.traces.bundle import read_bundle

pytestmark = pytest.mark.e2e

SERVER_ARGS = ["--dry-run"]

VOTE = """version: 1
name: replay-vote
inputs:
  question: {type: text, default: 'What is 3 + 4?'}
nodes:
- id: think
  kind: sampler
  params: {prompt: '{question}', n: 4, temperature: 0.7, max_tokens: 16, extract: last_number}
  inputs: {question: inputs.question}
- id: vote
  kind: voter
  params: {method: majority, extract: last_number}
  inputs: {candidates: think.candidates}
outputs: {answer: vote.answer}
"""


def test_download_the_bundle_and_replay_the_run(ui: Any, shot: Any, tmp_path: Path) -> None:
    ui.page.locator("[data-testid=yaml-editor]").fill(VOTE)
    ui.page.wait_for_function("document.querySelectorAll('[data-node-id]').length === 4")
    run_id = ui.click_run()
    assert ui.wait_run_finished(60) == "succeeded"

    ui.tab("Traces")
    ui.page.locator("#mg-trace-summary").get_by_text(run_id).first.wait_for()  # the newest run is shown
    version = ui.page.locator("#mg-trace-version").inner_text()  # an unsaved editor run: no version to open
    assert "not in the version store" in version and "Open the version this ran" not in version
    with ui.page.expect_download(timeout=30_000) as download:
        ui.page.locator("#mg-traces-bundle").click()
    saved = tmp_path / "run.bundle.json.gz"
    download.value.save_as(str(saved))
    bundle = read_bundle(saved)
    assert bundle["run"]["id"] == run_id and bundle["run"]["workflow"] == "replay-vote"

    ui.page.locator("#mg-traces-replay").click()
    result = ui.page.locator("#mg-replay-result[data-replayed]")
    result.wait_for(timeout=30_000)
    assert result.get_attribute("data-replayed") == str(bundle["run"]["stats"]["lm_calls"])
    assert result.get_attribute("data-model") == "0" and result.get_attribute("data-identical") == "true"
    assert "answered from the bundle" in result.inner_text()
    shot(ui.page, "replayed")
