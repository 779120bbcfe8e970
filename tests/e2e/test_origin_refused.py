"""Security round 7 §1.1 in a real browser: while `metagen ui` runs, a page on another origin sends the attack of
the probe (no-cors text/plain POSTs to /gradio_api/component_server calling mg_run with a workflow of its own, for
every component id 1-9, and to /v1/chat/completions) and tries to read /config: no run starts and nothing is read;
a forged Host gets 421 on the studio's own routes, and the studio's page itself still works (every other e2e test)."""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.workflow.spec import load_workflow_text
from tests.e2e.conftest import StudioServer, free_port
from tests.serve.conftest import metagen

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
SERVER_ARGS = ["--dry-run"]

ATTACK = """
async ({studio, workflow}) => {
  const payload = {workflow, inputs: {question: "2 + 2"}, seed: 1, origin: "file", confirmed_python: true};
  const sent = [];
  for (let id = 1; id < 10; id++) {
    const body = JSON.stringify({session_hash: "attacker" + id, component_id: id, fn_name: "mg_run",
                                 data: [payload]});
    try {
      await fetch(studio + "gradio_api/component_server", {method: "POST", mode: "no-cors",
                  headers: {"Content-Type": "text/plain"}, body});
      sent.push(id);
    } catch (e) { sent.push("error " + id); }
  }
  const chat = JSON.stringify({model: "chain_of_thought", messages: [{role: "user", content: "2 + 2"}]});
  await fetch(studio + "v1/chat/completions", {method: "POST", mode: "no-cors", body: chat}).catch(() => 0);
  let read = "nothing";
  try { read = await (await fetch(studio + "config")).text(); } catch (e) { read = "blocked: " + e; }
  let models = "nothing";
  try { models = await (await fetch(studio + "v1/models")).text(); } catch (e) { models = "blocked: " + e; }
  return {sent, read, models};
}
"""


@pytest.fixture(scope="module")
def attacker_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("attacker")
    (folder / "index.html").write_text("<html><body>an unrelated web page</body></html>", encoding="utf-8")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    server.shutdown()


def _runs(studio: StudioServer) -> list[Any]:
    out = metagen("traces", "list", "--json", home=studio.home)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_page_on_another_origin_cannot_run_or_read(studio: StudioServer, attacker_site: str, page: Any,
                                                     page_watch: Any) -> None:
    page_watch.allow(r"CORS policy|Failed to load resource|net::ERR_FAILED")  # the refusals the attack meets
    workflow = load_workflow_text((ROOT / "workflows" / "chain_of_thought.yaml").read_text()).to_dict()
    before = len(_runs(studio))
    page.goto(attacker_site)
    result = page.evaluate(ATTACK, {"studio": studio.url, "workflow": workflow})
    assert result["sent"] == list(range(1, 10))  # the requests went out (no-cors: the page cannot see answers)
    assert result["read"].startswith("blocked"), result["read"][:200]
    assert result["models"].startswith("blocked"), result["models"][:200]
    assert len(_runs(studio)) == before


def test_a_forged_host_gets_421_on_the_studios_routes(studio: StudioServer) -> None:
    for path in ("", "config", "v1/models", "health", "gradio_api/info"):
        r = httpx.get(studio.url + path, headers={"host": "evil.example"}, timeout=30)
        assert r.status_code == 421, (path, r.status_code)
    r = httpx.post(studio.url + "gradio_api/component_server", headers={"host": "evil.example"},
                   json={"session_hash": "x", "component_id": 1, "fn_name": "mg_run", "data": [{}]}, timeout=30)
    assert r.status_code == 421


def test_a_text_plain_component_call_without_origin_is_refused(studio: StudioServer) -> None:
    r = httpx.post(studio.url + "gradio_api/component_server", content=b'{"session_hash": "x"}',
                   headers={"content-type": "text/plain"}, timeout=30)
    assert r.status_code == 415
    r = httpx.get(studio.url + "config", headers={"origin": "http://localhost:1234"}, timeout=30)
    assert r.status_code == 403
    assert "access-control-allow-origin" not in {k.lower() for k in r.headers}
