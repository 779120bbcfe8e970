"""`metagen ui` start-up mistakes get one line saying what to do: a busy port, a file given as --workflows."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from app.cli.main import main
from app.cli.ui import listen_error


def test_a_busy_port_says_so_and_points_at_the_running_studio() -> None:
    gradio_text = OSError("Cannot find empty port in range: 7990-7990. You can specify a different port by setting "
                          "the GRADIO_SERVER_PORT environment variable or passing the `server_port` parameter to "
                          "`launch()`.")
    for exc in (gradio_text, OSError(errno.EADDRINUSE, "Address already in use")):
        message = listen_error("127.0.0.1", 7990, exc)
        assert message.startswith("port 7990 on 127.0.0.1 is already in use")
        assert "http://127.0.0.1:7990/" in message and "--port" in message
        assert "launch()" not in message and "GRADIO_SERVER_PORT" not in message


def test_other_listen_errors_name_the_address() -> None:
    message = listen_error("10.9.9.9", 80, OSError(errno.EADDRNOTAVAIL, "Cannot assign requested address"))
    assert message == "cannot listen on 10.9.9.9:80: Cannot assign requested address; pick another --port or --host"


def test_a_file_as_workflows_folder_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    not_a_folder = tmp_path / "notes.txt"
    not_a_folder.write_text("x", encoding="utf-8")
    assert main(["ui", "--no-browser", "--workflows", str(not_a_folder)]) == 2
    assert f"--workflows {not_a_folder} is a file" in capsys.readouterr().err
