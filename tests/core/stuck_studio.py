"""`metagen ARGS...` (ui or serve, --dry-run) with a run that never ends: its fake model blocks on a lock nobody
releases, as a run stuck in a native call does. Usage: python tests/core/stuck_studio.py MARKER ui|serve ARGS...
MARKER is written once the run is stuck."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from app.cli.main import main  # noqa: E402
from backends.fake import FakeBackend  # noqa: E402

MARKER = Path(sys.argv[1])
_never = threading.Event()


def _stuck_generate(self: Any, *args: Any, **kwargs: Any) -> Any:
    MARKER.write_text("stuck\n")
    _never.wait()  # nobody sets it
    raise AssertionError("unreachable")


def _start_stuck_run(service: Any) -> None:
    workflow = yaml.safe_load((REPO / "workflows" / "chain_of_thought.yaml").read_text())
    service.start_run(workflow, {})


def _patch_builders() -> None:
    import app.serve.server as serve_server
    import app.ui.app as ui_app

    build_app, build_server = ui_app.build_app, serve_server.build_server

    def app_with_run(service: Any) -> Any:
        _start_stuck_run(service)
        return build_app(service)

    def server_with_run(service: Any, config: Any) -> Any:
        _start_stuck_run(service)
        return build_server(service, config)

    ui_app.build_app = app_with_run
    serve_server.build_server = server_with_run


if __name__ == "__main__":
    FakeBackend.generate = _stuck_generate  # type: ignore[method-assign]
    _patch_builders()
    sys.exit(main(sys.argv[2:]))
