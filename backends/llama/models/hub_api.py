"""The Hugging Face Hub's HTTP API as far as pulling GGUFs needs it: endpoint and token from the environment,
a repo's files with their LFS sha256, search, and the download URL (HF_ENDPOINT honoured, HF_HUB_OFFLINE obeyed)."""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any
from urllib.parse import quote

import httpx

from backends.llama.models.hub_files import HubError, HubFile

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://huggingface.co"
TIMEOUT = httpx.Timeout(30.0, read=60.0)
MAX_METADATA_BYTES = 16 << 20
"""The largest metadata answer (model info, file tree, search) read; a bigger one is refused unread."""
METADATA_DEADLINE_S = 120.0
"""The longest a metadata answer may take to arrive whole (a drip feed fails instead of hanging)."""


def endpoint() -> str:
    """The Hub's base URL: $HF_ENDPOINT (a mirror, or the tests' fake Hub), else huggingface.co."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "METAGEN_OFFLINE"))


def check_online(what: str) -> None:
    if offline():
        raise HubError("offline", f"cannot {what}: offline mode is on (HF_HUB_OFFLINE or METAGEN_OFFLINE is set); "
                                  "unset it to reach the Hub, or copy the .gguf into the models folder by hand")


def auth_headers() -> dict[str, str]:
    """The Authorization header from $HF_TOKEN (or huggingface_hub's saved login), if any."""
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if not token:
        try:
            from huggingface_hub import get_token

            token = get_token()
        except Exception:  # no huggingface_hub, or no saved login
            token = None
    return {"Authorization": f"Bearer {token}"} if token else {}


def client() -> httpx.Client:
    return httpx.Client(timeout=TIMEOUT, follow_redirects=True,
                        headers={"User-Agent": "metagen-studio", **auth_headers()})


def raise_for_hub(response: httpx.Response, repo: str, what: str) -> None:
    """Turn the Hub's refusals into HubErrors that say what to do (X-Error-Code as the Hub sends it)."""
    if response.status_code < 400:
        return
    code = response.headers.get("X-Error-Code", "")
    message = response.headers.get("X-Error-Message", "")
    if code == "GatedRepo" or (response.status_code == 403 and "gated" in message.lower()):
        raise HubError("gated", f"{repo} is gated: accept its terms on the Hub page, then set HF_TOKEN to a token "
                                "of that account (https://huggingface.co/settings/tokens)")
    if code == "RepoNotFound" or (response.status_code == 404 and code != "EntryNotFound"):
        hint = "" if auth_headers() else " (if it is private, set HF_TOKEN to a token that can read it)"
        raise HubError("unknown_repo", f"no model repo {repo!r} on {endpoint()}{hint}; check the name with "
                                       "`metagen models search NAME`")
    if code in ("EntryNotFound", "RevisionNotFound"):
        raise HubError("unknown_file", f"{repo}: {what} not found ({message or code})")
    if response.status_code in (401, 403):
        raise HubError("gated", f"{repo} needs a Hub login for {what} (gated or private): set HF_TOKEN to a token "
                                "that can read it")
    raise HubError("hub_error", f"the Hub answered {response.status_code} for {what} of {repo}; try again later")


def _get_json(path: str, repo: str, what: str, params: dict[str, Any] | None = None) -> Any:
    """The JSON answer, read up to MAX_METADATA_BYTES within METADATA_DEADLINE_S."""
    check_online(what)
    try:
        with client() as http, http.stream("GET", f"{endpoint()}{path}", params=params) as response:
            raise_for_hub(response, repo, what)
            raw = _read_capped(response, what)
    except httpx.HTTPError as exc:
        raise HubError("network", f"cannot reach the Hub at {endpoint()} for {what}: {exc}") from None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise HubError("hub_error", f"the Hub at {endpoint()} answered {what} of {repo} with something that is not "
                                    "JSON; check HF_ENDPOINT") from None


def _read_capped(response: httpx.Response, what: str) -> bytes:
    started, got = time.monotonic(), bytearray()
    for chunk in response.iter_bytes():
        got += chunk
        if len(got) > MAX_METADATA_BYTES:
            raise HubError("hub_error", f"the Hub at {endpoint()} answered {what} with more than "
                                        f"{MAX_METADATA_BYTES >> 20} MB; refused (check HF_ENDPOINT)")
        if time.monotonic() - started > METADATA_DEADLINE_S:
            raise HubError("network", f"the Hub at {endpoint()} took more than {METADATA_DEADLINE_S:g} s to answer "
                                      f"{what}; try again later, or check HF_ENDPOINT")
    return bytes(got)


def repo_files(repo: str, revision: str | None = None) -> tuple[list[HubFile], str | None]:
    """The repo's files (path, size, LFS sha256) and the commit they belong to."""
    path = f"/api/models/{repo}" + (f"/revision/{quote(revision, safe='')}" if revision else "")
    info = _get_json(path, repo, "the file list", params={"blobs": "true"})
    files = []
    for sibling in info.get("siblings") or []:
        lfs = sibling.get("lfs") or {}
        size = lfs.get("size", sibling.get("size"))
        files.append(HubFile(path=str(sibling["rfilename"]), size=int(size) if size is not None else None,
                             sha256=lfs.get("sha256")))
    if any(f.path.endswith(".gguf") and not f.sha256 for f in files):
        files = _with_tree_hashes(repo, revision or info.get("sha") or "main", files)
    return files, info.get("sha")


def _with_tree_hashes(repo: str, revision: str, files: list[HubFile]) -> list[HubFile]:
    """Sizes and LFS sha256 from the tree listing, for a Hub (or mirror) whose model info left them out."""
    try:
        tree = _get_json(f"/api/models/{repo}/tree/{quote(revision, safe='')}", repo, "the file tree",
                         params={"recursive": "true"})
    except HubError as exc:
        log.info("no tree listing for %s: %s", repo, exc)
        return files
    known = {e.get("path"): e for e in tree if isinstance(e, dict)}
    out = []
    for f in files:
        entry = known.get(f.path) or {}
        lfs = entry.get("lfs") or {}
        out.append(HubFile(f.path, f.size if f.size is not None else entry.get("size"),
                           f.sha256 or lfs.get("oid") or lfs.get("sha256")))
    return out


def search(query: str, limit: int = 20) -> list[dict[str, Any]]:
    """Hub model repos with GGUF files matching `query`, most downloaded first: id, downloads, updated."""
    found = _get_json("/api/models", query, "the search",
                      params={"search": query, "filter": "gguf", "sort": "downloads", "direction": "-1",
                              "limit": str(limit)})
    return [{"repo": m.get("id") or m.get("modelId"), "downloads": m.get("downloads", 0),
             "updated": m.get("lastModified", ""), "likes": m.get("likes", 0)} for m in found]


def file_url(repo: str, path: str, revision: str | None) -> str:
    return f"{endpoint()}/{repo}/resolve/{quote(revision or 'main', safe='')}/{quote(path)}"
