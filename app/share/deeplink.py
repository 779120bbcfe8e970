"""Deep links: `?workflow=NAME` (`NAME@VERSION`: a saved version, read-only), `?run=ID` and `?wf=<payload>` (a
whole workflow, compressed into the URL).

A payload is `1.` + base64url(zlib(workflow YAML)), or, for a workflow with sub-workflows, `2.` +
base64url(zlib(JSON {"workflow": YAML, "children": {NAME: YAML}})) carrying the children by the name the workflow
uses (names only, never paths); at most MAX_PAYLOAD_CHARS long. Opening a link only decodes and parses: the
workflow is shown in the editor and validated, never run.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from app.workflow.files import safe_workflow_name
from app.workflow.problems import WorkflowError
from app.workflow.spec import Workflow, load_workflow_text

PAYLOAD_VERSION = 1
BUNDLE_VERSION = 2
"""A payload that carries sub-workflows beside the workflow (version 1 payloads still open as before)."""
MAX_LINK_CHILDREN = 32
"""Most sub-workflows one link may carry."""
MAX_PAYLOAD_CHARS = 16 * 1024
"""Encoded size limit: links longer than this break in chat apps and some browsers."""
MAX_DECODED_BYTES = 256 * 1024
"""Decompressed size limit (guards against a zip bomb in a crafted link)."""
_PAYLOAD_RE = re.compile(r"[A-Za-z0-9_\-]+")
_RUN_ID_RE = re.compile(r"[A-Za-z0-9_\-]{1,64}")
_VERSION_REF_RE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")

WORKFLOW, PAYLOAD, RUN = "workflow", "wf", "run"
LINK_KINDS = (WORKFLOW, PAYLOAD, RUN)


class DeepLinkError(ValueError):
    """A link that cannot be opened; the message says why, in words a visitor understands."""


# ------------------------------------------------------------------ payloads


def encode_workflow(yaml_text: str, children: Mapping[str, str] | None = None) -> str:
    """The `wf=` payload for a workflow's YAML and the sub-workflows it uses (by the name it uses: version 2
    when there are any); DeepLinkError when it is too big for a link or a child is not named by a plain name."""
    if children:
        check_link_children(children)
        raw = json.dumps({"workflow": yaml_text, "children": dict(children)}, ensure_ascii=False).encode("utf-8")
        version = BUNDLE_VERSION
    else:
        raw, version = yaml_text.encode("utf-8"), PAYLOAD_VERSION
    if len(raw) > MAX_DECODED_BYTES:
        raise DeepLinkError(f"the workflow is {len(raw) // 1024} KB, too large to put in a link; save it and "
                            "share a ?workflow=NAME link instead")
    body = base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode("ascii").rstrip("=")
    payload = f"{version}.{body}"
    if len(payload) > MAX_PAYLOAD_CHARS:
        raise DeepLinkError(f"the workflow compresses to {len(payload)} characters, more than the "
                            f"{MAX_PAYLOAD_CHARS} a link may carry; save it and share a ?workflow=NAME link "
                            "instead")
    return payload


def check_link_children(children: Any) -> dict[str, str]:
    """Sub-workflows carried by a link (or sent back by its page): at most MAX_LINK_CHILDREN, each keyed by a
    plain workflow name (no path, no `..`) with its YAML text; DeepLinkError otherwise."""
    if not isinstance(children, Mapping):
        raise DeepLinkError("the link's sub-workflows are not a name -> workflow table; ask for the link again")
    if len(children) > MAX_LINK_CHILDREN:
        raise DeepLinkError(f"the link carries {len(children)} sub-workflows; at most {MAX_LINK_CHILDREN}")
    out: dict[str, str] = {}
    size = 0
    for name, text in children.items():
        if not isinstance(name, str) or not isinstance(text, str):
            raise DeepLinkError("the link's sub-workflows are not a name -> workflow table; ask for the link again")
        size += _utf8_size(name) + _utf8_size(text)
        if size > MAX_DECODED_BYTES:  # what a link may unpack to, whichever way the children arrive
            raise DeepLinkError(f"the sub-workflows sent with this workflow are more than "
                                f"{MAX_DECODED_BYTES // 1024} KB together; save them in the workflows folder and "
                                "use their names")
        try:
            plain = safe_workflow_name(name)
        except ValueError:
            plain = ""
        if plain != name:
            raise DeepLinkError(f"the link carries a sub-workflow as {name[:80]!r}: a link names sub-workflows by "
                                "name only (no paths); save it in the workflows folder and use its name")
        out[name] = text
    return out


def _utf8_size(text: str) -> int:
    """Bytes of `text` in UTF-8, without encoding a text already over the limit by its characters."""
    return len(text) if len(text) > MAX_DECODED_BYTES else len(text.encode("utf-8", "surrogatepass"))


def decode_payload(payload: str) -> str:
    """The workflow YAML carried by a `wf=` payload; DeepLinkError for an oversized, tampered,
    truncated or foreign payload."""
    return decode_bundle(payload)[0]


def decode_bundle(payload: str) -> tuple[str, dict[str, str]]:
    """The workflow YAML and the sub-workflows (name -> YAML, empty for a version 1 link) carried by a `wf=`
    payload; DeepLinkError for an oversized, tampered, truncated or foreign payload."""
    payload = (payload or "").strip()
    if not payload:
        raise DeepLinkError("the link carries an empty workflow")
    if len(payload) > MAX_PAYLOAD_CHARS:
        raise DeepLinkError(f"the workflow in the link is too large ({len(payload)} characters; at most "
                            f"{MAX_PAYLOAD_CHARS}); ask for a ?workflow=NAME link instead")
    version, dot, body = payload.partition(".")
    if not dot or not version.isdigit() or not version.isascii():  # "²" and "١" are digits too, not int()'s
        raise DeepLinkError("the link's workflow is not in a format this app knows (was the link cut or edited?)")
    version = version.lstrip("0")
    if version not in (str(PAYLOAD_VERSION), str(BUNDLE_VERSION)):  # as text: int() refuses over 4,300 digits
        raise DeepLinkError(f"the link's workflow uses link format {version[:12]}; this app reads formats "
                            f"{PAYLOAD_VERSION} and {BUNDLE_VERSION} (upgrade metagen-studio to open it)")
    if not _PAYLOAD_RE.fullmatch(body):
        raise DeepLinkError("the link's workflow contains characters a link cannot carry; it was damaged "
                            "or edited, ask for the link again")
    try:
        compressed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        raise DeepLinkError("the link's workflow is damaged (bad encoding); ask for the link again") from None
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(compressed, MAX_DECODED_BYTES + 1)
    except zlib.error:
        raise DeepLinkError("the link's workflow is damaged or was tampered with (checksum failed); "
                            "ask for the link again") from None
    if len(raw) > MAX_DECODED_BYTES or inflater.unconsumed_tail:
        raise DeepLinkError(f"the link's workflow unpacks to more than {MAX_DECODED_BYTES // 1024} KB; "
                            "it is refused")
    if not inflater.eof or inflater.unused_data:
        raise DeepLinkError("the link's workflow is incomplete or has trailing data (was the link cut?); "
                            "ask for the link again")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DeepLinkError("the link's workflow is not text; ask for the link again") from None
    if version == str(PAYLOAD_VERSION):
        return text, {}
    try:
        bundle = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: a crafted, deeply nested bundle
        raise DeepLinkError("the link's workflow and sub-workflows are damaged; ask for the link again") from None
    if not isinstance(bundle, dict) or not isinstance(bundle.get("workflow"), str):
        raise DeepLinkError("the link carries no workflow beside its sub-workflows; ask for the link again")
    return bundle["workflow"], check_link_children(bundle.get("children") or {})


def workflow_from_payload(payload: str) -> Workflow:
    """Decode and parse (not validate, never run) the workflow carried by a link."""
    return _parse_linked_yaml(decode_payload(payload))


def _parse_linked_yaml(text: str) -> Workflow:
    try:
        return load_workflow_text(text)
    except WorkflowError as exc:
        raise DeepLinkError(f"the workflow in the link is not a valid workflow: {exc}") from None


def check_run_id(run_id: str) -> str:
    run_id = (run_id or "").strip()
    if not _RUN_ID_RE.fullmatch(run_id):
        raise DeepLinkError("the run id in the link is malformed (letters, digits, _ and -, up to 64)")
    return run_id


# ------------------------------------------------------------------ URLs


def _with_query(base_url: str, params: dict[str, str]) -> str:
    parts = urlsplit(base_url)
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in LINK_KINDS]
    query = urlencode([*kept, *params.items()])
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", query, ""))


def workflow_link(base_url: str, name: str, version: str | None = None) -> str:
    """A link that opens a saved or example workflow by name (`version`: that version of it, read-only)."""
    if version is not None and not _VERSION_REF_RE.fullmatch(version):
        raise DeepLinkError(f"{version[:40]!r} is not a version reference")
    name = safe_workflow_name(name)
    return _with_query(base_url, {WORKFLOW: f"{name}@{version}" if version else name})


def payload_link(base_url: str, yaml_text: str, children: Mapping[str, str] | None = None) -> str:
    """A link that carries the whole workflow and its sub-workflows (works without saving; size-limited)."""
    return _with_query(base_url, {PAYLOAD: encode_workflow(yaml_text, children)})


def run_link(base_url: str, run_id: str) -> str:
    """A link that opens one run's trace."""
    return _with_query(base_url, {RUN: check_run_id(run_id)})


@dataclass(frozen=True)
class DeepLink:
    """What a page's query asks to open. Exactly one of name / workflow / run_id is set, or error."""

    kind: str
    name: str | None = None
    workflow: Workflow | None = None
    yaml_text: str | None = None
    children: Mapping[str, str] = field(default_factory=dict)
    """The sub-workflows a `wf=` link carries, by the name its workflow uses (empty for most links)."""
    run_id: str | None = None
    version: str | None = None
    """`?workflow=NAME@VERSION`: the version of NAME to open read-only (a hash, its prefix, a name, -1...)."""
    error: str | None = None


def read_deep_link(query: Mapping[str, str]) -> DeepLink | None:
    """Interpret a page's query parameters (e.g. gr.Request.query_params); None when there is no link.
    Problems come back as a DeepLink with `error` set, never as an exception."""
    present = [kind for kind in LINK_KINDS if query.get(kind)]
    if not present:
        return None
    if len(present) > 1:
        return DeepLink(kind=present[0], error=f"the link asks for several things at once ({', '.join(present)}); "
                                               "use one of ?workflow=, ?wf= or ?run=")
    kind = present[0]
    value = str(query[kind])
    try:
        if kind == WORKFLOW:
            name, at, version = value.partition("@")
            if at and not _VERSION_REF_RE.fullmatch(version):
                raise DeepLinkError("the version in the link is malformed (?workflow=NAME@VERSION: a version hash "
                                    "or its prefix, a version name, or -1 for the one before the latest)")
            return DeepLink(kind=kind, name=safe_workflow_name(name), version=version if at else None)
        if kind == RUN:
            return DeepLink(kind=kind, run_id=check_run_id(value))
        text, children = decode_bundle(value)
        return DeepLink(kind=kind, workflow=_parse_linked_yaml(text), yaml_text=text, children=children)
    except ValueError as exc:  # DeepLinkError and bad names
        return DeepLink(kind=kind, error=str(exc))
