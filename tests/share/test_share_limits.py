"""Size limits on the service's save and read paths, and Gradio's monitoring page closed in share mode."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest
import yaml

from app.service.errors import UserError
from app.service.studio import StudioService
from app.workflow.spec import MAX_WORKFLOW_BYTES
from tests.studio_fixtures import studio_service

SMALL_WF = {"version": 1, "name": "small", "inputs": {"q": {"type": "text", "default": "hi"}},
            "nodes": [{"id": "gen", "kind": "generator", "params": {"prompt": "{q}"}, "inputs": {"q": "inputs.q"}}],
            "outputs": {"answer": "gen.text"}}


def _service(tmp_path: Path, share: bool = True) -> StudioService:
    return studio_service(tmp_path, share=share)


def _huge_wf() -> dict[str, object]:
    return {**SMALL_WF, "inputs": {"q": {"type": "text", "default": "x" * (MAX_WORKFLOW_BYTES + 10)}}}


def test_save_refuses_a_workflow_over_the_limit_before_writing(tmp_path: Path) -> None:
    service = _service(tmp_path)
    with pytest.raises(UserError, match=r"not saved: the workflow text is [\d,]+ bytes; the limit is"):
        service.save_workflow("huge", _huge_wf())
    assert not (tmp_path / "workflows" / "huge.yaml").exists()
    assert service.save_workflow("small", SMALL_WF)["name"] == "small"


def test_upload_refuses_text_over_the_limit(tmp_path: Path) -> None:
    service = _service(tmp_path)
    text = yaml.safe_dump(_huge_wf())
    with pytest.raises(UserError, match=r"not saved: the workflow text is [\d,]+ bytes"):
        service.save_yaml_text("upload", text)
    assert not (tmp_path / "workflows" / "upload.yaml").exists()
    with pytest.raises(UserError, match="not text"):
        service.save_yaml_text("upload", b"version: 1")  # type: ignore[arg-type]


def test_reading_a_huge_file_is_refused_without_loading_it(tmp_path: Path) -> None:
    service = _service(tmp_path)
    (tmp_path / "workflows" / "big.yaml").write_text("# " + "x" * (MAX_WORKFLOW_BYTES + 1) + "\n")
    with pytest.raises(UserError, match=r"'big' is [\d,]+ bytes; the limit is"):
        service.read_workflow_text("big")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("share", [True, False])
def test_gradio_monitoring_is_closed_in_share_mode(tmp_path: Path, share: bool) -> None:
    from app.ui.app import build_app, launch_kwargs

    service = _service(tmp_path, share=share)
    blocks = build_app(service)
    port = _free_port()
    blocks.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                  **launch_kwargs(service))
    try:
        status = httpx.get(f"http://127.0.0.1:{port}/monitoring/summary", timeout=10).status_code
    finally:
        blocks.close()
    assert (status == 403) is share, status
