"""App links: `?app=NAME` on the studio's address opens the app page (and, in share mode, so does a share link to a
workflow unless it asks for the studio with `studio=1`); the links "Copy app link" makes."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

from starlette.middleware import Middleware
from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.share.deeplink import LINK_KINDS, PAYLOAD, RUN, WORKFLOW, encode_workflow
from app.ui.app_target import APP, STUDIO
from app.workflow.files import safe_workflow_name

APP_ROUTE = "app"
"""The app page's path beside the studio's (a page of the same Gradio app: app/ui/app_page.py)."""


def app_redirect(query: str, share_mode: bool) -> str | None:
    """Where a request for the studio's main page with this query string goes instead (relative to it), or None
    to open the studio: `?app=` always opens the app page; in share mode a workflow link (`?workflow=` / `?wf=`)
    does too, unless it carries `studio=1` (the app page's own link to the full studio)."""
    params = dict(parse_qsl(query, keep_blank_values=True))
    if params.get(APP, "").strip():
        return f"{APP_ROUTE}?{query}"
    if share_mode and STUDIO not in params and RUN not in params and (params.get(WORKFLOW) or params.get(PAYLOAD)):
        return f"{APP_ROUTE}?{query}"
    return None


class AppLinkRedirect:
    """ASGI middleware: a GET of the main page whose query is an app link answers a redirect to the app page
    (before Gradio serves the whole studio), so a visitor never sees the editor flash first."""

    def __init__(self, app: ASGIApp, share_mode: bool = False) -> None:
        self.app = app
        self.share_mode = share_mode

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") in ("GET", "HEAD"):
            path, root = str(scope.get("path") or ""), str(scope.get("root_path") or "")
            if root and path.startswith(root):
                path = path[len(root):]
            query = (scope.get("query_string") or b"").decode("latin-1")
            target = app_redirect(query, self.share_mode) if path in ("", "/") and query else None
            if target is not None:
                await RedirectResponse(target, status_code=307)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def app_link_middleware(share_mode: bool) -> list[Middleware]:
    """The middleware list for FastAPI's `middleware` argument (through Gradio's `app_kwargs`)."""
    return [Middleware(AppLinkRedirect, share_mode=share_mode)]


def app_link(base_url: str, name: str) -> str:
    """`?app=NAME` on the studio's address: the app page of a saved workflow or example."""
    parts = urlsplit(base_url)
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
            if k not in (*LINK_KINDS, APP, STUDIO)]
    query = urlencode([*kept, (APP, safe_workflow_name(name))])
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", query, ""))


def app_payload_link(base_url: str, yaml_text: str, children: Any = None) -> str:
    """The app page of a workflow carried in the link (one not saved, or changed since): `app?wf=<payload>`."""
    page = urljoin(base_url if base_url.endswith("/") else base_url + "/", APP_ROUTE)
    return f"{page}?{urlencode({PAYLOAD: encode_workflow(yaml_text, children)})}"
