"""Security round 7 §1 on a real `metagen serve --mcp`: a forged Host gets 421 on every route, a page on another
origin (another site or another localhost port) is refused with 403 and gets no CORS headers, and a text/plain or
form body (a no-cors fetch, an HTML form) starts no run (415); `--allowed-hosts` / `--allowed-origins` let a proxy
name or a listed page in."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.serve.conftest import ServeProcess

CHAT = {"model": "chain_of_thought", "messages": [{"role": "user", "content": "What is 2 + 2?"}], "max_tokens": 8}
ROUTES = [("GET", "/"), ("GET", "/health"), ("GET", "/v1/models"), ("POST", "/v1/chat/completions"),
          ("POST", "/v1/responses"), ("POST", "/v1/messages"), ("POST", "/mcp")]


@pytest.fixture(scope="module")
def server(serve_factory: Callable[..., ServeProcess]) -> ServeProcess:
    return serve_factory("--dry-run", "--mcp", "--allowed-hosts", "proxy.example", "--allowed-origins",
                         "http://localhost:3000")


def _root(server: ServeProcess) -> str:
    return server.base_url.removesuffix("/v1")


def _runs(server: ServeProcess) -> int:
    return len(server.traces())


def test_a_forged_host_is_refused_on_every_route(server: ServeProcess) -> None:
    for method, path in ROUTES:
        r = httpx.request(method, _root(server) + path, headers={"host": "evil.example"},
                          json=CHAT if method == "POST" else None, timeout=30)
        assert r.status_code == 421, (path, r.status_code, r.text[:200])
        assert r.json()["error"]["code"] == "host_not_allowed"


def test_the_proxy_name_given_is_served(server: ServeProcess) -> None:
    r = httpx.get(_root(server) + "/v1/models", headers={"host": "proxy.example"}, timeout=30)
    assert r.status_code == 200


def test_text_plain_and_form_bodies_start_no_run(server: ServeProcess) -> None:
    before = _runs(server)
    import json

    for path in ("/v1/chat/completions", "/v1/responses", "/v1/messages"):
        plain = httpx.post(_root(server) + path, content=json.dumps(CHAT), headers={"content-type": "text/plain"},
                           timeout=30)
        assert plain.status_code == 415, (path, plain.text[:200])
        form = httpx.post(_root(server) + path, data={json.dumps(CHAT): ""}, timeout=30)
        assert form.status_code == 415
    assert _runs(server) == before
    ok = httpx.post(server.base_url + "/chat/completions", json=CHAT, timeout=120)
    assert ok.status_code == 200, ok.text
    assert _runs(server) == before + 1


@pytest.mark.parametrize("origin", ["http://evil.example", "http://localhost:4000", "http://127.0.0.1:1", "null"])
def test_another_origin_is_refused_and_not_reflected(server: ServeProcess, origin: str) -> None:
    before = _runs(server)
    for path in ("/v1/models", "/health"):
        r = httpx.get(_root(server) + path, headers={"origin": origin}, timeout=30)
        assert r.status_code == 403, path
        assert "access-control-allow-origin" not in r.headers
    post = httpx.post(server.base_url + "/chat/completions", json=CHAT, headers={"origin": origin}, timeout=30)
    assert post.status_code == 403
    assert _runs(server) == before


def test_a_listed_origin_gets_cors(server: ServeProcess) -> None:
    pre = httpx.options(server.base_url + "/models", headers={"origin": "http://localhost:3000",
                                                               "access-control-request-method": "GET"}, timeout=30)
    assert pre.status_code == 204
    r = httpx.get(server.base_url + "/models", headers={"origin": "http://localhost:3000"}, timeout=30)
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "http://localhost:3000"
