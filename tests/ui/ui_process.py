"""`metagen ui --dry-run` in a subprocess with its own temp folder, and uploads to its Gradio server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

from tests.serve.conftest import ROOT, free_port


def start_ui(tmp: Path, home: Path, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    """A `metagen ui --dry-run` process (its temp folder `tmp`, its data folder `home`) and its URL."""
    port = free_port()
    env = {**os.environ, "TMPDIR": str(tmp), "METAGEN_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    for key in ("GRADIO_TEMP_DIR", "METAGEN_WORKFLOWS", "METAGEN_TRACE_DB", "METAGEN_SHARE_MODE"):
        env.pop(key, None)
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "ui", "--dry-run", "--no-browser", "--port", str(port),
                             *args],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, "metagen ui exited early"
        try:
            with urllib.request.urlopen(url, timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise AssertionError("metagen ui did not answer")


def upload(url: str, name: str, data: bytes = b"hello") -> Path:
    """POST a file to Gradio's upload route; the path of Gradio's copy (urllib's HTTPError for a refusal)."""
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"{name}\"\r\n"
            f"Content-Type: text/plain\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(f"{url}/gradio_api/upload", data=body, method="POST",
                                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return Path(json.loads(response.read())[0])
