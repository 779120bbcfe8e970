"""One rule for every route of both servers: the Host must be a name the server was started for, a request from
another origin is refused unless listed, a body-carrying API request must be JSON, and CORS only for listed origins
(a web page on another site, another port or a rebound DNS name cannot drive the studio)."""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
JSON_PREFIXES = ("/v1/", "/mcp", "/gradio_api/", "/app/gradio_api/")
"""Paths whose body-carrying requests must be `application/json` (an HTML form or a no-cors fetch cannot send it)."""
NOT_JSON_PATHS = ("/gradio_api/upload", "/app/gradio_api/upload")
"""Gradio's file upload takes multipart/form-data (its Origin is still checked)."""
CORS_METHODS = "GET, POST, PUT, DELETE, OPTIONS"
CORS_MAX_AGE = "600"
HOW_TO_ALLOW = ("behind a reverse proxy, start the server with --allowed-hosts NAME; to let a page on another origin "
                "call it, --allowed-origins ORIGIN")


def _split_host(value: str) -> tuple[str, str]:
    """(name, port) of a Host header or netloc: lowercase, IPv6 brackets removed, '' when absent."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        return name, rest[1:] if rest.startswith(":") else ""
    if value.count(":") == 1:
        name, _, port = value.partition(":")
        return name, port
    return value, ""


def _is_loopback_name(name: str) -> bool:
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _origin_key(origin: str) -> str | None:
    """`scheme://host[:port]` normalised (default ports left out), or None when it is no http(s) origin."""
    parts = urlsplit(origin.strip().lower())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    name, port = _split_host(parts.netloc)
    if (parts.scheme, port) in (("http", "80"), ("https", "443")):
        port = ""
    host = f"[{name}]" if ":" in name else name
    return f"{parts.scheme}://{host}{':' + port if port else ''}"


def _netloc(name: str, port: str) -> str:
    host = f"[{name}]" if ":" in name else name
    return f"{host}:{port}" if port else host


@dataclass(frozen=True)
class OriginRules:
    """Which Host names and Origins a server answers."""

    hosts: frozenset[str] = LOOPBACK_NAMES
    """Host names accepted (lowercase, no port); loopback names always are."""
    any_host: bool = False
    """Every Host accepted (the server listens on all addresses, or behind Gradio's share tunnel): requests from
    other machines meet the API keys and share-mode rules; one from this machine still needs a loopback name."""
    tunnel: bool = False
    """Behind Gradio's share tunnel every request arrives from this machine with the public name as its Host, and
    every request gets the share-mode rules (`all_remote`): any Host is served, from here too."""
    origins: frozenset[str] = field(default_factory=frozenset)
    """Other origins allowed to call (and read answers: CORS), as `scheme://host[:port]`; `*` allows any."""

    @classmethod
    def for_server(cls, bind_host: str, allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = (), *,
                   tunnel: bool = False) -> OriginRules:
        """The rules of a server listening on `bind_host`: its loopback names, the bind name itself, the
        --allowed-hosts given; ValueError naming a malformed --allowed-origins entry."""
        hosts = set(LOOPBACK_NAMES)
        bind = _split_host(bind_host)[0] if bind_host else ""
        if bind and bind not in WILDCARD_BINDS:
            hosts.add(bind)
        hosts.update(_split_host(h)[0] for h in allowed_hosts if h.strip() and h.strip() != "*")
        origins = set()
        for origin in allowed_origins:
            if origin.strip() == "*":
                origins.add("*")
                continue
            key = _origin_key(origin)
            if key is None:
                raise ValueError(f"--allowed-origins {origin!r} is not an origin: give scheme://host[:port], "
                                 "e.g. http://localhost:3000")
            origins.add(key)
        any_host = tunnel or bind in WILDCARD_BINDS or any(h.strip() == "*" for h in allowed_hosts)
        return cls(hosts=frozenset(hosts), any_host=any_host, tunnel=tunnel, origins=frozenset(origins))

    def host_problem(self, host_header: str, client: str) -> str | None:
        """Why a request with this Host (from this client address) is refused; None when it is served."""
        name, _ = _split_host(host_header)
        if not name:
            return "the request has no Host header"
        if name in self.hosts or _is_loopback_name(name):
            return None
        if self.tunnel or (self.any_host and not _is_loopback_name(client)):
            return None
        return (f"this server does not answer to the host name {name!r} (a page on a rebound DNS name would be "
                f"same-origin); {HOW_TO_ALLOW}")

    def origin_allowed(self, origin: str, host_header: str) -> bool:
        """Whether a request carrying `Origin: origin` to this Host may be served."""
        key = _origin_key(origin)
        if key is None:  # "null" (sandboxed frames, file: pages) and other schemes
            return "*" in self.origins or origin.strip().lower() in self.origins
        if "*" in self.origins or key in self.origins:
            return True
        scheme, _, netloc = key.partition("://")
        name, port = _split_host(host_header)
        if (scheme, port) in (("http", "80"), ("https", "443")):
            port = ""
        return netloc == _netloc(name, port)

    def listed(self, origin: str) -> bool:
        """Whether cross-origin pages of this origin get CORS headers."""
        key = _origin_key(origin)
        return "*" in self.origins or (key is not None and key in self.origins)


def _refusal(status: int, message: str, code: str) -> tuple[int, bytes]:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
    return status, json.dumps(body).encode()


def _json_content(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class OriginGuard:
    """ASGI middleware enforcing `OriginRules` on every HTTP request (and WebSocket handshake) of the app."""

    def __init__(self, app: ASGIApp, rules: OriginRules, json_prefixes: Sequence[str] = JSON_PREFIXES) -> None:
        self.app = app
        self.rules = rules
        self.json_prefixes = tuple(json_prefixes)

    def problem(self, scope: Scope) -> tuple[int, bytes] | None:
        """The refusal (status, JSON body) of this request, or None when it is served."""
        headers = Headers(scope=scope)
        client = scope.get("client") or ("", 0)
        host = headers.get("host", "")
        why = self.rules.host_problem(host, str(client[0]))
        if why is not None:
            return _refusal(421, why, "host_not_allowed")
        origin = headers.get("origin")
        method = scope.get("method", "GET")
        if origin is not None and not self.rules.origin_allowed(origin, host):
            return _refusal(403, f"requests from the origin {origin!r} are refused: a page on another site or port "
                            f"may not drive this server; {HOW_TO_ALLOW}", "origin_not_allowed")
        if origin is None and self._cross_site_subresource(headers, method):
            return _refusal(403, "a cross-site request without an Origin is refused (a page on another site may "
                            f"not load this server's answers); {HOW_TO_ALLOW}", "origin_not_allowed")
        path = scope.get("path", "")
        if (method in BODY_METHODS and path.startswith(self.json_prefixes) and not path.startswith(NOT_JSON_PATHS)
                and self._has_body(headers) and not _json_content(headers.get("content-type", ""))):
            given = headers.get("content-type") or "none"
            return _refusal(415, f"the request body must be JSON: send `Content-Type: application/json` (this "
                            f"request sent {given})", "unsupported_media_type")
        return None

    @staticmethod
    def _cross_site_subresource(headers: Headers, method: str) -> bool:
        """A request a page of another site made without an Origin (a no-cors script or image load); a link
        followed to the studio (a top-level navigation, GET) is served."""
        site = headers.get("sec-fetch-site", "")
        if site not in ("cross-site", "same-site"):
            return False
        return not (headers.get("sec-fetch-mode") == "navigate" and method in ("GET", "HEAD"))

    @staticmethod
    def _has_body(headers: Headers) -> bool:
        length = headers.get("content-length")
        if length is not None:
            return length.strip() not in ("", "0")
        return "transfer-encoding" in headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self.problem(scope)
        if refusal is not None:
            status, body = refusal
            log.warning("refused %s %s: %s", scope.get("method", "WS"), scope.get("path", ""), body.decode()[:300])
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        origin = Headers(scope=scope).get("origin")
        if scope["type"] == "http" and origin is not None and self.rules.listed(origin):
            if scope.get("method") == "OPTIONS" and "access-control-request-method" in Headers(scope=scope):
                await self._preflight(origin, send)
                return
            await self.app(scope, receive, self._with_cors(origin, send))
            return
        await self.app(scope, receive, send)

    @staticmethod
    async def _preflight(origin: str, send: Send) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": [
            (b"access-control-allow-origin", origin.encode()), (b"access-control-allow-methods", CORS_METHODS.encode()),
            (b"access-control-allow-headers", b"*"), (b"access-control-allow-credentials", b"true"),
            (b"access-control-max-age", CORS_MAX_AGE.encode()), (b"vary", b"Origin")]})
        await send({"type": "http.response.body", "body": b""})

    @staticmethod
    def _with_cors(origin: str, send: Send) -> Send:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if not k.lower().startswith(b"access-control-")]
                kept += [(b"access-control-allow-origin", origin.encode()),
                         (b"access-control-allow-credentials", b"true"), (b"vary", b"Origin")]
                message = {**message, "headers": kept}
            await send(message)

        return sending


def strip_cors(app: ASGIApp) -> ASGIApp:
    """Wraps an app so that no response carries CORS headers (Gradio's own middleware reflects any localhost
    origin; the guard in front adds them back for listed origins only)."""

    async def stripped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [(k, v) for k, v in message.get("headers", [])
                                                  if not k.lower().startswith(b"access-control-")]}
            await send(message)

        await app(scope, receive, sending)

    return stripped
