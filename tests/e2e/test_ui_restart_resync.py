"""After the studio restarts, the open page keeps working without a reload (issue 43 §2.1): the run that was going
shows how it ended, Cancel is off, Traces → Refresh lists the runs without Gradio error boxes, and a new run
runs."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import PageWatch, Studio, start_server, stop_server
from tests.e2e.test_ui_connection_lost import BANNER, SLOW

pytestmark = pytest.mark.e2e

STATUS = "document.querySelector('[data-testid=run-status]')"


def test_a_restart_mid_run_resyncs_the_open_page(page: Any, page_watch: PageWatch, tmp_path: Path,
                                                 shot: Any) -> None:
    for refused in ("ERR_CONNECTION_REFUSED", "ERR_EMPTY_RESPONSE", "ERR_CONNECTION_RESET", "Failed to fetch",
                    "NetworkError", "Connection errored out", "Connection lost", "heartbeat", "queue/join",
                    "Failed to load resource", "network error", "options.rules is required"):
        page_watch.allow(refused)  # the dead server's own errors, which this test provokes
    args = ["--dry-run", "--fake-latency", "30"]
    server = start_server(tmp_path / "home", args)
    port = int(server.url.rstrip("/").rsplit(":", 1)[1])
    ui = Studio(page, server).open()
    try:
        ui.page.locator("[data-testid=yaml-editor]").fill(SLOW)
        ui.page.wait_for_function("document.querySelectorAll('[data-node-id]').length === 4")
        run_id = ui.click_run()
        ui.page.wait_for_function(f"{STATUS}.dataset.status === 'running'")
        ui.tab("Traces")  # the run picked there: a value the restarted server's choices will not hold
        ui.page.wait_for_function("(id) => document.querySelector('#mg-traces-run input').value.startsWith(id)",
                                  arg=run_id, timeout=30_000)

        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=30)
        ui.page.wait_for_selector(BANNER, state="visible", timeout=30_000)
        server = start_server(tmp_path / "home", args, port=port)
        ui.page.wait_for_selector(BANNER, state="hidden", timeout=60_000)

        ui.page.wait_for_selector(".mg-page[data-ready='1']", timeout=60_000)  # Gradio may re-render the app
        ui.page.wait_for_function(f"{STATUS}.dataset.status === 'lost'", timeout=30_000)
        assert "ended when the studio stopped" in ui.page.locator("[data-testid=run-status]").inner_text()
        assert ui.page.locator("[data-testid=cancel-btn]").is_disabled()

        ui.tab("Traces")
        ui.page.locator("#mg-traces-refresh").click()
        ui.page.wait_for_function("document.querySelector('#mg-traces-runs').innerText.includes('interrupted')",
                                  timeout=30_000)
        ui.page.wait_for_timeout(1000)  # any error box of the refresh would be up by now
        assert "is not in the list of choices" not in ui.page.locator("body").inner_text()
        assert ui.page.locator(".toast-body.error").count() == 0
        shot(ui.page, "traces-after-restart")

        ui.tab("Editor")
        ui.click_run()  # and the page keeps working: a new run runs, and cancels (each call takes 30 s)
        ui.page.wait_for_function(f"{STATUS}.dataset.status === 'running'", timeout=30_000)
        ui.page.locator("[data-testid=cancel-btn]").click()
        ui.page.wait_for_function(f"{STATUS}.dataset.status === 'cancelled'", timeout=60_000)
        shot(ui.page, "run-after-restart")
    finally:
        if server.process.poll() is None:
            stop_server(server)
