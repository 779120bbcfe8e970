"""Suite-wide test settings: user data in a temp folder, no network-bound telemetry."""

from __future__ import annotations

import os
import tempfile


def pytest_configure(config: object) -> None:
    # Never read or write the developer's real data folder, trace database or settings.
    if "METAGEN_HOME" not in os.environ:
        os.environ["METAGEN_HOME"] = tempfile.mkdtemp(prefix="metagen-test-home-")
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("DO_NOT_TRACK", "1")
