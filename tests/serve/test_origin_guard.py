"""The origin guard's rules on a small ASGI app: Host names, foreign Origins, cross-site loads without an Origin,
JSON-only bodies and CORS for listed origins only (the servers' own tests are in test_origin_guard_servers.py)."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from app.serve.origin_guard import OriginGuard, OriginRules


async def _echo(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True}, headers={"access-control-allow-origin": "http://localhost:9999"})


def _client(rules: OriginRules, client: str = "127.0.0.1") -> TestClient:
    app = Starlette(routes=[Route("/v1/chat/completions", _echo, methods=["POST", "OPTIONS"]),
                            Route("/config", _echo, methods=["GET"]),
                            Route("/gradio_api/upload", _echo, methods=["POST"])],
                    middleware=[Middleware(OriginGuard, rules=rules)])
    return TestClient(app, base_url="http://127.0.0.1:7860", client=(client, 5000))


LOCAL = OriginRules.for_server("127.0.0.1")
JSON = {"content-type": "application/json"}


def test_loopback_names_are_served_and_a_rebound_name_is_refused() -> None:
    c = _client(LOCAL)
    for host in ("127.0.0.1:7860", "localhost:7860", "[::1]:7860", "127.0.0.2:7860", "localhost"):
        assert c.get("/config", headers={"host": host}).status_code == 200, host
    r = c.get("/config", headers={"host": "evil.example:7860"})
    assert r.status_code == 421
    assert r.json()["error"]["code"] == "host_not_allowed"
    assert "--allowed-hosts" in r.json()["error"]["message"]
    assert c.post("/v1/chat/completions", json={}, headers={"host": "evil.example"}).status_code == 421


def test_allowed_hosts_and_the_bind_name_are_served() -> None:
    c = _client(OriginRules.for_server("studio.lan", ["proxy.example.com"]))
    assert c.get("/config", headers={"host": "studio.lan:7860"}).status_code == 200
    assert c.get("/config", headers={"host": "PROXY.example.com"}).status_code == 200
    assert c.get("/config", headers={"host": "other.example.com"}).status_code == 421


def test_a_wildcard_bind_serves_any_name_to_other_machines_but_not_to_this_one() -> None:
    rules = OriginRules.for_server("0.0.0.0")
    assert _client(rules, client="10.0.0.5").get("/config", headers={"host": "192.168.1.7:7860"}).status_code == 200
    # a page on this machine reached through a rebound name is still refused
    assert _client(rules).get("/config", headers={"host": "evil.example:7860"}).status_code == 421


def test_a_foreign_origin_is_refused_even_as_text_plain() -> None:
    c = _client(LOCAL)
    for origin in ("http://evil.example", "http://localhost:3000", "http://127.0.0.1:8000", "null",
                   "http://127.0.0.1", "file://", "chrome-extension://abc"):
        r = c.post("/v1/chat/completions", content=b'{"model": "x"}',
                   headers={"origin": origin, "content-type": "text/plain"})
        assert r.status_code == 403, origin
        assert r.json()["error"]["code"] == "origin_not_allowed"
        assert "access-control-allow-origin" not in r.headers
    same = c.post("/v1/chat/completions", json={}, headers={"origin": "http://127.0.0.1:7860"})
    assert same.status_code == 200
    # a TLS-terminating proxy that keeps the Host: the page's https origin names the same host and port
    proxied = c.post("/v1/chat/completions", json={}, headers={"origin": "https://127.0.0.1:7860"})
    assert proxied.status_code == 200


def test_a_text_plain_body_without_an_origin_is_refused_on_api_paths() -> None:
    c = _client(LOCAL)
    r = c.post("/v1/chat/completions", content=b'{"model": "x"}', headers={"content-type": "text/plain"})
    assert r.status_code == 415
    assert "application/json" in r.json()["error"]["message"]
    form = c.post("/v1/chat/completions", data={"a": "b"})
    assert form.status_code == 415
    assert c.post("/v1/chat/completions", json={}, headers=JSON).status_code == 200
    assert c.post("/v1/chat/completions", content=b"{}",
                  headers={"content-type": "application/json; charset=utf-8"}).status_code == 200
    assert c.post("/gradio_api/upload", files={"f": ("a.txt", b"x")}).status_code == 200  # multipart upload


def test_a_cross_site_load_without_an_origin_is_refused_but_a_followed_link_is_served() -> None:
    c = _client(LOCAL)
    script = c.get("/config", headers={"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors"})
    assert script.status_code == 403
    other_port = c.get("/config", headers={"sec-fetch-site": "same-site", "sec-fetch-mode": "no-cors"})
    assert other_port.status_code == 403
    link = c.get("/config", headers={"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"})
    assert link.status_code == 200
    assert c.get("/config", headers={"sec-fetch-site": "same-origin", "sec-fetch-mode": "cors"}).status_code == 200


def test_cors_headers_only_for_listed_origins() -> None:
    c = _client(OriginRules.for_server("127.0.0.1", allowed_origins=["http://localhost:3000"]))
    ok = c.post("/v1/chat/completions", json={}, headers={"origin": "http://localhost:3000"})
    assert ok.status_code == 200
    assert ok.headers["access-control-allow-origin"] == "http://localhost:3000"
    pre = c.options("/v1/chat/completions", headers={"origin": "http://localhost:3000",
                                                      "access-control-request-method": "POST"})
    assert pre.status_code == 204
    assert pre.headers["access-control-allow-origin"] == "http://localhost:3000"
    other = c.options("/v1/chat/completions", headers={"origin": "http://localhost:4000",
                                                        "access-control-request-method": "POST"})
    assert other.status_code == 403
    assert "access-control-allow-origin" not in other.headers


def test_a_malformed_allowed_origin_says_what_to_give() -> None:
    with pytest.raises(ValueError, match="scheme://host"):
        OriginRules.for_server("127.0.0.1", allowed_origins=["localhost:3000"])


def test_behind_the_share_tunnel_the_public_name_arrives_from_this_machine() -> None:
    rules = OriginRules.for_server("127.0.0.1", tunnel=True)
    assert _client(rules).get("/config", headers={"host": "abc123.gradio.live"}).status_code == 200
    same = _client(rules).post("/v1/chat/completions", json={},
                               headers={"host": "abc123.gradio.live", "origin": "https://abc123.gradio.live"})
    assert same.status_code == 200
