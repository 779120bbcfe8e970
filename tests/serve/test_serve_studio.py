"""The same /v1 routes on the studio's own server (`metagen ui`): the page and the API share one port."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.serve.conftest import API_KEY, ROOT, free_port, workflows_folder


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("studio")
    port = free_port()
    env = {**os.environ, "METAGEN_HOME": str(home), "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONUNBUFFERED": "1"}
    for key in ("METAGEN_WORKFLOWS", "METAGEN_TRACE_DB", "METAGEN_SHARE_MODE", "METAGEN_API_KEY"):
        env.pop(key, None)
    log = (home / "ui.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "ui", "--dry-run", "--no-browser", "--port", str(port), "--api-key", API_KEY,
         "--workflows", str(workflows_folder(home / "wf"))], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, (home / "ui.log").read_text()
        try:
            if httpx.get(url + "/", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.3)
    yield url
    process.terminate()
    process.wait(timeout=20)
    text = Path(home / "ui.log").read_text(errors="replace")
    assert "OpenAI-compatible API: " in text and "Traceback" not in text, text


def test_the_studio_serves_the_api_next_to_its_page(studio: str) -> None:
    client = openai.OpenAI(base_url=studio + "/v1", api_key=API_KEY, max_retries=0)
    assert "chain_of_thought" in {m.id for m in client.models.list()}
    chunks = list(client.chat.completions.create(model="chain_of_thought", stream=True,
                                                 messages=[{"role": "user", "content": "2 + 2?"}]))
    meta = chunks[0].model_dump()["metagen"]
    assert meta["trace"] == f"/?run={meta['run_id']}"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert httpx.get(studio + "/").status_code == 200, "the studio page still answers"
    assert httpx.get(studio + "/config").status_code == 200


def test_the_studio_api_asks_for_its_key(studio: str) -> None:
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=studio + "/v1", api_key="wrong", max_retries=0).models.list()
    response = httpx.get(studio + "/v1/models")
    assert response.status_code == 401 and response.json()["error"]["code"] == "missing_api_key"
