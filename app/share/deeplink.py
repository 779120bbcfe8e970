"""Deep links: `?workflow=NAME`, `?run=ID` and `?wf=<payload>` (a whole workflow, compressed into the URL).

A payload is `1.` + base64url(zlib(workflow YAML)), at most MAX_PAYLOAD_CHARS long. Opening a link only
decodes and parses: the workflow is shown in the editor and validated, never run.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from app.workflow.files import safe_workflow_name
from app.workflow.problems import WorkflowError
from app.workflow.spec import Workflow, load_workflow_text

PAYLOAD_VERSION = 1
MAX_PAYLOAD_CHARS = 16 * 1024
"""Encoded size limit: links longer than this break in chat apps and some browsers."""
MAX_DECODED_BYTES = 256 * 1024
"""Decompressed size limit (guards against a zip bomb in a crafted link)."""
_PAYLOAD_RE = re.compile(r"[A-Za-z0-9_\-]+")
_RUN_ID_RE = re.compile(r"[A-Za-z0-9_\-]{1,64}")

WORKFLOW, PAYLOAD, RUN = "workflow", "wf", "run"
LINK_KINDS = (WORKFLOW, PAYLOAD, RUN)


class DeepLinkError(ValueError):
    """A link that cannot be opened; the message says why, in words a visitor understands."""


# ------------------------------------------------------------------ payloads


def encode_workflow(yaml_text: str) -> str:
    """The `wf=` payload for a workflow's YAML; DeepLinkError when it is too big for a link."""
    raw = yaml_text.encode("utf-8")
    if len(raw) > MAX_DECODED_BYTES:
        raise DeepLinkError(f"the workflow is {len(raw) // 1024} KB, too large to put in a link; save it and "
                            "share a ?workflow=NAME link instead")
    body = base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode("ascii").rstrip("=")
    payload = f"{PAYLOAD_VERSION}.{body}"
    if len(payload) > MAX_PAYLOAD_CHARS:
        raise DeepLinkError(f"the workflow compresses to {len(payload)} characters, more than the "
                            f"{MAX_PAYLOAD_CHARS} a link may carry; save it and share a ?workflow=NAME link "
                            "instead")
    return payload


def decode_payload(payload: str) -> str:
    """The workflow YAML carried by a `wf=` payload; DeepLinkError for an oversized, tampered,
    truncated or foreign payload."""
    payload = (payload or "").strip()
    if not payload:
        raise DeepLinkError("the link carries an empty workflow")
    if len(payload) > MAX_PAYLOAD_CHARS:
        raise DeepLinkError(f"the workflow in the link is too large ({len(payload)} characters; at most "
                            f"{MAX_PAYLOAD_CHARS}); ask for a ?workflow=NAME link instead")
    version, dot, body = payload.partition(".")
    if not dot or not version.isdigit() or not version.isascii():  # "²" and "١" are digits too, not int()'s
        raise DeepLinkError("the link's workflow is not in a format this app knows (was the link cut or edited?)")
    if version.lstrip("0") != str(PAYLOAD_VERSION):  # compared as text: int() refuses over 4,300 digits
        raise DeepLinkError(f"the link's workflow uses link format {version[:12]}; this app reads format "
                            f"{PAYLOAD_VERSION} (upgrade metagen-studio to open it)")
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
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DeepLinkError("the link's workflow is not text; ask for the link again") from None


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


def workflow_link(base_url: str, name: str) -> str:
    """A link that opens a saved or example workflow by name."""
    return _with_query(base_url, {WORKFLOW: safe_workflow_name(name)})


def payload_link(base_url: str, yaml_text: str) -> str:
    """A link that carries the whole workflow (works without saving; size-limited)."""
    return _with_query(base_url, {PAYLOAD: encode_workflow(yaml_text)})


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
    run_id: str | None = None
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
            return DeepLink(kind=kind, name=safe_workflow_name(value))
        if kind == RUN:
            return DeepLink(kind=kind, run_id=check_run_id(value))
        text = decode_payload(value)
        return DeepLink(kind=kind, workflow=_parse_linked_yaml(text), yaml_text=text)
    except ValueError as exc:  # DeepLinkError and bad names
        return DeepLink(kind=kind, error=str(exc))
