"""`metagen serve` from the command line: refusals with a message saying what to do, never a traceback."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.serve.conftest import metagen


def test_a_non_loopback_bind_without_a_key_is_refused(tmp_path: Path) -> None:
    out = metagen("serve", "--host", "0.0.0.0", "--port", "1", home=tmp_path)
    assert out.returncode == 2
    assert "without an API key" in out.stderr and "--api-key KEY" in out.stderr and "--api-key-file" in out.stderr
    assert "Traceback" not in out.stderr


def test_bad_flags_and_key_files(tmp_path: Path) -> None:
    for args, words in ((["--api-key-file", str(tmp_path / "none")], "cannot read the API key file"),
                        (["--port", "0"], "--port"), (["--max-concurrent-runs", "0"], "--max-concurrent-runs"),
                        (["--workflows", str(Path(__file__))], "is a file")):
        out = metagen("serve", *args, home=tmp_path)
        assert out.returncode == 2 and words in out.stderr and "Traceback" not in out.stderr, out.stderr
    empty = tmp_path / "keys.txt"
    empty.write_text("# nothing yet\n")
    out = metagen("serve", "--api-key-file", str(empty), home=tmp_path)
    assert out.returncode == 2 and "holds no key" in out.stderr


def test_a_busy_port_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = metagen("serve", "--dry-run", "--port", str(port), home=tmp_path)
    assert out.returncode == 1 and "already in use" in out.stderr and "Traceback" not in out.stderr


def test_help_lists_the_command(tmp_path: Path) -> None:
    out = metagen("--help", home=tmp_path)
    assert "serve" in out.stdout
    out = metagen("serve", "--help", home=tmp_path)
    assert "--api-key" in out.stdout and "--max-concurrent-runs" in out.stdout


def test_a_fake_script_needs_dry_run_and_a_good_file(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text("replies: [ok]\n")
    out = metagen("serve", "--fake-script", str(script), home=tmp_path)
    assert out.returncode == 2 and "add --dry-run" in out.stderr, out.stderr
    script.write_text("replys: [ok]\n")
    out = metagen("serve", "--dry-run", "--fake-script", str(script), home=tmp_path)
    assert out.returncode == 2 and "unknown key(s) replys" in out.stderr, out.stderr
