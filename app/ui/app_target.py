"""Which workflow an app page shows: `?app=NAME` / `?workflow=NAME` (a saved workflow, else an example), `?wf=`
(a workflow carried in the link), or the one workflow `metagen ui --app NAME` serves."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from app.service.errors import UserError
from app.service.studio import StudioService
from app.share.deeplink import PAYLOAD, WORKFLOW, DeepLinkError, decode_bundle
from app.workflow.files import safe_workflow_name
from app.workflow.problems import WorkflowError
from app.workflow.spec import Workflow, load_workflow_text

APP = "app"
"""The query parameter of an app link: `?app=NAME`."""
STUDIO = "studio"
"""`studio=1` beside a workflow link opens the full studio even in share mode (the app page's link to it)."""

SAVED, EXAMPLE, LINK = "saved", "example", "link"


@dataclass(frozen=True)
class AppTarget:
    """The workflow an app page shows, where it came from, and the sub-workflows a link carried with it."""

    workflow: Workflow
    source: str
    name: str | None = None
    payload: str | None = None
    children: Mapping[str, str] = field(default_factory=dict)

    @property
    def trusted(self) -> bool:
        """A file of the owner's folder or an example; a link's workflow is a stranger's."""
        return self.source != LINK

    def studio_url(self) -> str:
        """The full studio with this workflow open in its editor (relative to the app page, one folder up)."""
        query = {WORKFLOW: self.name} if self.source != LINK else {PAYLOAD: self.payload or ""}
        return "./?" + urlencode({**query, STUDIO: "1"})


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _parse(text: str, what: str) -> Workflow:
    try:
        return load_workflow_text(text)
    except WorkflowError as exc:
        raise UserError(f"{what} is not a valid workflow: {exc}") from None


def named_target(service: StudioService, raw_name: str) -> AppTarget:
    """A saved workflow by its name, else the example of that name; UserError naming what is missing."""
    from app.service.versions import split_ref

    raw_name, ref = split_ref(str(raw_name))
    try:
        name = safe_workflow_name(raw_name)
    except ValueError as exc:
        raise UserError(f"the link names no workflow this app can open: {exc}") from None
    if name in service.list_workflows():  # its published version (or the one `NAME@VERSION` pins), else the file
        spec = name if ref is None else f"{name}@{ref}"
        _, text, children, _ = service.served_workflow_text(spec)
        return AppTarget(_parse(text, f"the workflow {spec!r}"), SAVED, name, children=children)
    if name in service.list_examples():
        text = service.read_example_text(name)
        return AppTarget(_parse(text, f"the example {name!r}"), EXAMPLE, name, children=service.example_children(text))
    raise UserError(f"this app has no workflow named {name!r} (it may have been renamed or deleted); ask whoever "
                    "sent the link for a new one")


def payload_target(payload: str) -> AppTarget:
    """The workflow (and sub-workflows) carried in a `wf=` link."""
    try:
        text, children = decode_bundle(payload)
    except DeepLinkError as exc:
        raise UserError(str(exc)) from None
    return AppTarget(_parse(text, "the workflow in the link"), LINK, payload=payload, children=children)


def resolve_target(service: StudioService, query: Mapping[str, Any], fixed: str | None = None) -> AppTarget:
    """What the page's query asks for; `fixed` (metagen ui --app NAME) ignores the query: that page shows one
    workflow only."""
    if fixed is not None:
        return named_target(service, fixed)
    name = _text(query.get(APP)) or _text(query.get(WORKFLOW))
    payload = _text(query.get(PAYLOAD))
    if name and payload:
        raise UserError("the link names a workflow twice (a name and a workflow carried in the link); use one")
    if payload:
        return payload_target(payload)
    if name:
        return named_target(service, name)
    raise UserError("the link names no workflow: add ?app=NAME with the name of a saved workflow or example")
