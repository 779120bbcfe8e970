"""Deep links and share links in the UI: the "Copy share link" control and server functions of the editor
page (static/share_links.js), and opening `?run=ID` in the Traces tab on page load."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import gradio as gr

from app.service.errors import UserError
from app.service.studio import StudioService, issues_summary
from app.share.deeplink import (
    PAYLOAD,
    RUN,
    WORKFLOW,
    DeepLinkError,
    check_link_children,
    check_run_id,
    payload_link,
    read_deep_link,
    run_link,
    workflow_link,
)
from app.ui.app_links import app_link, app_payload_link
from app.ui.assets import asset_tags
from app.ui.editor_page import linked_children
from app.ui.endpoints import endpoint, visitor_for
from app.ui.traces_tab import TracesTab
from app.workflow.problems import Issue, errors
from app.workflow.spec import Workflow, load_workflow_text
from app.workflow.subworkflows import CHILD_KINDS, workflow_texts
from app.workflow.validation import check as check_tree

log = logging.getLogger(__name__)

SHARE_ELEM_ID = "mg-share-links"
TRACES_TAB = "traces"

# Static markup; static/share_links.js moves the button into the editor toolbar. No `$` or backticks.
SHARE_MARKUP = """
<div class="mg-share" data-testid="share-links">
  <button class="mg-btn" type="button" data-testid="share-link-btn" title="Copy a link to this workflow">
    Copy share link</button>
  <button class="mg-btn" type="button" data-testid="app-link-btn"
    title="Copy a link to this workflow's app page: its inputs, Run and the answer, without the editor">
    Copy app link</button>
  <div class="mg-share-box" data-testid="share-box" hidden>
    <div class="mg-share-row"><span class="mg-share-label" data-testid="share-kind"></span>
      <input class="mg-share-url" data-testid="share-url" readonly aria-label="Share link">
      <button class="mg-btn" type="button" data-share="copy" data-testid="share-copy">Copy</button></div>
    <div class="mg-share-row"><span class="mg-share-label">App page</span>
      <input class="mg-share-url" data-testid="app-url" readonly aria-label="App link">
      <button class="mg-btn" type="button" data-share="copy-app" data-testid="app-copy">Copy</button></div>
    <div class="mg-share-row" data-testid="share-run-row" hidden><span class="mg-share-label">This run's trace</span>
      <input class="mg-share-url" data-testid="share-run-url" readonly aria-label="Link to the run">
      <button class="mg-btn" type="button" data-share="copy-run" data-testid="share-run-copy">Copy</button></div>
    <div class="mg-share-note" data-testid="share-note"></div>
    <button class="mg-btn" type="button" data-share="close" data-testid="share-close">Close</button>
  </div>
</div>
"""

SHARE_ASSETS = ("share_links.css", "share_links.js")
JS_ON_LOAD = "window.MetagenShare && window.MetagenShare.start(element, server);"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def sl_open_link(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    """What the page's query asks to open: {kind: null} when nothing, else the workflow to show
    (never run) or the run id, or {error}. Everything in the query is checked here before use."""
    query = payload.get("query") if isinstance(payload.get("query"), dict) else {}
    link = read_deep_link({str(k): _text(v) for k, v in query.items()})
    if link is None:
        return {"kind": None}
    if link.error:
        return {"kind": link.kind, "error": link.error}
    if link.kind == WORKFLOW:
        assert link.name is not None
        if link.version is not None:  # ?workflow=NAME@VERSION: that saved version, read-only
            try:
                opened = service.version_panel.open_version(link.name, link.version)
            except UserError as exc:
                return {"kind": WORKFLOW, "error": f"the link opens version {link.version!r} of {link.name!r}: {exc}"}
            return {"kind": WORKFLOW, "name": link.name, "source": "version", "version": opened["version"]}
        if link.name in service.list_workflows():
            return {"kind": WORKFLOW, "name": link.name, "source": "saved"}
        if link.name in service.list_examples():
            return {"kind": WORKFLOW, "name": link.name, "source": "example"}
        return {"kind": WORKFLOW, "error": f"the link opens the workflow {link.name!r}, which is not in this app's "
                                           "workflows folder or examples (it may have been renamed or deleted)"}
    if link.kind == PAYLOAD:
        assert link.yaml_text is not None
        checked = service.parse_yaml(link.yaml_text)
        if checked.get("error"):
            return {"kind": PAYLOAD, "error": "the workflow in the link does not load: "
                                              f"{checked['error'].get('message')}"}
        opened = {"kind": PAYLOAD, "yaml": link.yaml_text, "name": link.workflow.name if link.workflow else None}
        if not link.children:
            return opened
        refused = _linked_child_problems(service, link.workflow, link.children)
        if refused:
            return {"kind": PAYLOAD, "error": "a sub-workflow in the link is refused: " + issues_summary(refused)}
        return {**opened, "children": dict(link.children),
                "workflow_ports": service.linked_workflow_ports(link.children)}
    return {"kind": RUN, "run_id": link.run_id}


def _linked_child_problems(service: StudioService, wf: Workflow | None, children: Mapping[str, str]) -> list[Issue]:
    """The errors inside the sub-workflows a link carries (validation and the share policy, as for the parent's
    run): those refuse the link, while the parent's own problems show in the editor once opened."""
    if wf is None:
        return []
    issues = service.check(wf, service.child_loader(trusted=False, linked=children))
    return [issue for issue in errors(issues) if issue.file]


def _children_for_link(service: StudioService, yaml_text: str, linked: Mapping[str, str]) -> dict[str, str]:
    """The sub-workflows a link to this workflow must carry, by the name it uses (those its own link carried
    first, else the folder's); UserError for a child named by a path (a link names children by name only)."""
    wf = load_workflow_text(yaml_text)
    if not any(node.kind in CHILD_KINDS for node in wf.nodes):  # a route's branches travel too
        return {}
    loader = service.child_loader(trusted=not linked, linked=linked)
    texts = workflow_texts(wf, check_tree(wf, service.registry, loader))
    try:
        return check_link_children(texts)
    except DeepLinkError as exc:
        raise UserError(str(exc)) from None


def sl_make_links(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    """Links for the editor's workflow: by name when it is saved and unchanged, else carried in the link;
    plus a link to the current run's trace when there is one."""
    base = _text(payload.get("base")) or "/"
    name = _text(payload.get("name")) or None
    dirty = bool(payload.get("dirty"))
    yaml_text = _text(payload.get("yaml"))
    result: dict[str, Any] = {}
    if name and not dirty and name in service.list_workflows():
        result.update(kind=WORKFLOW, url=workflow_link(base, name), app_url=app_link(base, name),
                      note=f"Opens the saved workflow '{name}' from this app's workflows folder.")
    else:
        if not yaml_text.strip():
            raise UserError("there is no workflow to share yet")
        parsed = service.parse_yaml(yaml_text)  # must load; validation problems show after opening
        if parsed.get("error"):
            raise UserError(f"fix the YAML first: {parsed['error'].get('message')}")
        children = _children_for_link(service, yaml_text, linked_children(payload))
        carried = f", with its {len(children)} sub-workflow{'s' if len(children) != 1 else ''}," if children else ""
        try:
            result.update(kind=PAYLOAD, url=payload_link(base, yaml_text, children),
                          app_url=app_payload_link(base, yaml_text, children),
                          note=f"The whole workflow{carried} is inside the link (it opens in the editor and is "
                               "not run).")
        except DeepLinkError as exc:
            raise UserError(str(exc)) from None
    if service.share_mode:
        result["note"] += " In this shared app the link opens the workflow's app page, which links to the editor."
    run_id = _text(payload.get("run_id"))
    if run_id:
        try:
            result["run_url"] = run_link(base, run_id)
        except DeepLinkError:
            log.debug("no run link for %r", run_id)
    return result


def share_links_component(service: StudioService) -> gr.HTML:
    """The "Copy share link" control and the deep-link opener of the editor page."""
    head = asset_tags(SHARE_ASSETS)
    return gr.HTML(value="", html_template=SHARE_MARKUP, js_on_load=JS_ON_LOAD, head=head,
                   server_functions=[endpoint(sl_open_link, service), endpoint(sl_make_links, service)],
                   elem_id=SHARE_ELEM_ID, apply_default_css=False, padding=False, container=False)


# ------------------------------------------------------------------ ?run=ID on page load


def open_run_from_query(service: StudioService, query: dict[str, str],
                        visitor: str | None = None) -> tuple[Any, Any, str]:
    """(tabs update, run picker update, message) for a `?run=ID` page query; in share mode only a run of
    `visitor`'s own opens."""
    raw = query.get(RUN)
    if not raw:
        return gr.update(), gr.update(), ""
    try:
        run_id = check_run_id(raw)
    except DeepLinkError as exc:
        return gr.Tabs(selected=TRACES_TAB), gr.update(), f"**Cannot open the linked run:** {exc}"
    store = service.trace_store
    if store is None:
        return gr.Tabs(selected=TRACES_TAB), gr.update(), "**Cannot open the linked run:** the trace store is " \
                                                          f"unavailable ({service.trace_error})"
    try:
        record = store.get_run(run_id) if service.owns_run(run_id, visitor) else None
    except Exception:
        record = None
    if not record:
        return (gr.Tabs(selected=TRACES_TAB), gr.update(),
                f"**Cannot open the linked run:** there is no run `{run_id}` in this app's trace history")
    run = record.get("run", {})
    label = f"{run_id} · {run.get('workflow', '')} · {run.get('status', '')}"
    return gr.Tabs(selected=TRACES_TAB), gr.update(choices=[(label, run_id)], value=run_id), ""


def wire_run_links(demo: gr.Blocks, service: StudioService, tabs: gr.Tabs, traces: TracesTab | None) -> None:
    """On page load, a `?run=ID` query opens that run in the Traces tab (call inside the Blocks context)."""
    if traces is None:
        log.warning("the Traces tab has no run picker; ?run= links will not open runs")
        return

    def on_load(request: gr.Request) -> tuple[Any, Any, str]:
        query = dict(request.query_params) if request else {}
        return open_run_from_query(service, query, visitor_for(service, request))

    demo.load(on_load, None, [tabs, traces.run_pick, traces.message])
