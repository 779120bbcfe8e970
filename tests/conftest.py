"""Suite-wide test settings: user data in a temp folder, no network-bound telemetry."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def pytest_configure(config: object) -> None:
    # Never read or write the developer's real data folder, trace database or settings.
    if "METAGEN_HOME" not in os.environ:
        os.environ["METAGEN_HOME"] = tempfile.mkdtemp(prefix="metagen-test-home-")
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("DO_NOT_TRACK", "1")


CHROMIUM_PATH = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-gpu"]


@pytest.fixture(scope="session")
def chromium_browser() -> Iterator[Any]:
    """One headless Chromium for the whole session (Playwright allows one sync driver per thread).
    Debian's /usr/bin/chromium when installed, else the browser of `playwright install chromium`."""
    from playwright.sync_api import sync_playwright

    executable = CHROMIUM_PATH if Path(CHROMIUM_PATH).exists() else None
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
