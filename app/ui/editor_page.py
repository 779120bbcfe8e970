"""The editor page: one gr.HTML hosting the node-graph editor, YAML pane, files and run panel (JS in static/)."""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from typing import Any

import gradio as gr

from app.service.errors import UserError
from app.service.model_pull import describe_needed_models, pull_needed_models
from app.service.studio import StudioService
from app.share.consent import UNTRUSTED_ORIGINS
from app.share.deeplink import DeepLinkError, check_link_children
from app.share.policy import python_code
from app.ui.endpoints import VISITOR_KEY, endpoint
from app.ui.history_panel import HISTORY_FUNCTIONS
from app.workflow.child_files import ChildLoader
from nodes.registry import graph_rules

log = logging.getLogger(__name__)

EDITOR_ELEM_ID = "mg-editor-page"

# Static markup; static/ui_bridge.js wires it up. No `$` or backticks: Gradio reads this as a JS template.
PAGE_MARKUP = """
<div class="mg-page" data-testid="editor-page">
  <div class="mg-toolbar" role="toolbar" aria-label="Workflow files">
    <span class="mg-title" data-testid="wf-title">untitled</span>
    <span class="mg-dirty" data-testid="dirty-flag" hidden>● unsaved</span>
    <select class="mg-open" data-testid="open-select" aria-label="Open a saved workflow">
      <option value="">Open…</option>
    </select>
    <button class="mg-btn" data-action="gallery" data-testid="example-btn"
            title="Pick a strategy from the gallery of examples">New from example…</button>
    <button class="mg-btn" data-action="new" data-testid="new-btn" title="New empty workflow">New</button>
    <button class="mg-btn mg-primary" data-action="save" data-testid="save-btn" title="Save (Ctrl+S)">Save</button>
    <button class="mg-btn" data-action="save-as" data-testid="save-as-btn">Save as…</button>
    <label class="mg-btn mg-upload" title="Open a YAML file from your computer">Upload
      <input type="file" accept=".yaml,.yml,text/yaml" data-testid="upload-input" hidden>
    </label>
    <button class="mg-btn" data-action="download" data-testid="download-btn">Download</button>
    <button class="mg-btn" data-action="history" data-testid="history-btn"
            title="The saved versions of this workflow: preview, compare, restore, name, publish">History</button>
    <span class="mg-spacer"></span>
    <span class="mg-notice" data-testid="notice" role="status" aria-live="polite"></span>
  </div>
  <div class="mg-draft" data-testid="draft-banner" hidden>
    <span class="mg-draft-text"></span>
    <button class="mg-btn" data-action="discard-draft" data-testid="discard-draft">Discard draft</button>
  </div>
  <div class="mg-version-banner" data-testid="version-banner" role="status" hidden>
    <span class="mg-version-text" data-testid="version-banner-text"></span>
    <button class="mg-btn" data-action="version-back" data-testid="version-back">Back to current</button>
    <button class="mg-btn mg-primary" data-action="version-restore" data-testid="version-restore">Restore</button>
  </div>
  <div class="mg-main">
    <div class="mg-gallery" data-testid="gallery" role="region" aria-label="Strategy gallery" hidden>
      <div class="mg-gallery-head">
        <strong>Start from a strategy</strong>
        <span class="mg-gallery-sub">Each card is an example workflow: open one, then run or change it.</span>
        <span class="mg-spacer"></span>
        <button class="mg-btn" data-action="gallery-close" data-testid="gallery-close"
                title="Back to the canvas (empty on a first visit: drag nodes in from the palette)">Close</button>
      </div>
      <div class="mg-gallery-cards" data-testid="gallery-cards"></div>
    </div>
    <div class="mg-canvas-host" data-testid="canvas-host"></div>
    <div class="mg-side">
      <div class="mg-history" data-testid="history-panel" role="region" aria-label="Versions" hidden>
        <div class="mg-history-head">
          <strong>History</strong>
          <span class="mg-spacer"></span>
          <button class="mg-btn" data-action="history-diff" data-testid="history-diff"
                  title="Compare the two ticked versions (one ticked: against the current file)">Compare</button>
          <button class="mg-btn" data-action="history" data-testid="history-close">Close</button>
        </div>
        <div class="mg-history-error" data-testid="history-error" role="alert" hidden></div>
        <ol class="mg-history-list" data-testid="history-list"></ol>
        <div class="mg-history-diff" data-testid="history-diff-list" hidden></div>
      </div>
      <div class="mg-yaml-head">
        <strong>YAML</strong>
        <span class="mg-yaml-status" data-testid="yaml-status">in sync</span>
      </div>
      <div class="mg-yaml-error" data-testid="yaml-error" role="alert" hidden></div>
      <div class="mg-yaml-wrap">
        <pre class="mg-gutter" aria-hidden="true"></pre>
        <textarea class="mg-yaml" data-testid="yaml-editor" spellcheck="false" wrap="off"
                  aria-label="Workflow YAML"></textarea>
      </div>
      <div class="mg-issues-head"><strong>Problems</strong> <span class="mg-issue-count"
           data-testid="issue-count">0</span></div>
      <ul class="mg-issues" data-testid="issues"></ul>
    </div>
  </div>
  <div class="mg-run">
    <div class="mg-run-form">
      <strong>Run</strong>
      <div class="mg-inputs" data-testid="run-inputs"></div>
      <label class="mg-field mg-seed">Seed <input type="number" step="1" value="0" data-testid="seed-input"></label>
      <button class="mg-btn mg-primary" data-action="run" data-testid="run-btn">▶ Run</button>
      <button class="mg-btn mg-danger" data-action="cancel" data-testid="cancel-btn" disabled>■ Cancel</button>
    </div>
    <div class="mg-run-status">
      <div class="mg-progress" role="progressbar" aria-valuemin="0" aria-valuemax="100" data-testid="run-progress">
        <div class="mg-progress-bar"></div>
      </div>
      <span class="mg-run-text" data-testid="run-status">No run yet.</span>
    </div>
    <div class="mg-runs" data-testid="run-list"></div>
    <div class="mg-results">
      <div class="mg-outputs" data-testid="run-outputs"></div>
      <div class="mg-node-outputs" data-testid="node-outputs"></div>
    </div>
  </div>
</div>
"""

JS_ON_LOAD = "window.MetagenUI.start(element, server);"


_saved_by: weakref.WeakKeyDictionary[StudioService, dict[str, set[str]]] = weakref.WeakKeyDictionary()
_saved_lock = threading.Lock()


def _visitor(payload: dict[str, Any]) -> str | None:
    """The visitor the endpoint wrapper found for this call (None outside a browser request)."""
    value = payload.get(VISITOR_KEY)
    return str(value) if value else None


def _visitor_saves(service: StudioService, visitor: str | None) -> set[str]:
    """The workflow names this visitor saved in this app session (the only ones it may overwrite)."""
    with _saved_lock:
        return _saved_by.setdefault(service, {}).setdefault(visitor or "", set())


def mg_init(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema": service.schema(),
        "rules": graph_rules(),
        "workflows": service.list_workflows(),
        "workflow_ports": service.workflow_ports(),
        "examples": service.list_examples(),
        "share_mode": service.policy.share_mode,
        "policy": service.policy.describe(),
        "dry_run": service.dry_run,
        "active_runs": service.active_runs(visitor=_visitor(payload)),
    }


def mg_list(service: StudioService, _payload: dict[str, Any]) -> dict[str, Any]:
    return {"workflows": service.list_workflows(), "examples": service.list_examples(),
            "workflow_ports": service.workflow_ports()}


def _agree_to_own(service: StudioService, opened: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """A workflow file of the owner's folder or an example is a trusted origin: its remote servers need no
    confirmation in this browser (the Evaluate tab's evaluation of the editor's workflow included)."""
    if not service.share_mode and not opened.get("error") and opened.get("workflow"):
        with contextlib.suppress(UserError):
            service.consent.agree(service.workflow_from_json(opened["workflow"]), _visitor(payload))
    return opened


def mg_gallery(service: StudioService, _payload: dict[str, Any]) -> dict[str, Any]:
    """The strategy gallery's cards (app.service.gallery): the examples with their gist, tags, cost, measured figure
    and graph picture."""
    return {"cards": service.gallery.cards()}


def mg_open(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    return _agree_to_own(service, service.open_workflow(str(payload.get("name", ""))), payload)


def mg_example(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    return _agree_to_own(service, service.open_example(str(payload.get("name", ""))), payload)


def mg_save(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    """Save the editor's workflow with the sub-workflows its link or traced run carried (`children`). The service
    refuses, before anything is written, what its policy refuses (in share mode the checks a run gets, over every
    workflow written); a visitor may overwrite only the workflows it saved in this session (the owner's files are
    read-only)."""
    name = str(payload.get("name", ""))
    overwrite = bool(payload.get("overwrite", True))
    mine = _visitor_saves(service, _visitor(payload))
    if service.share_mode:
        path = service.path_for(name)
        if path.exists() and path.stem not in mine:
            raise UserError(f"a workflow named {path.stem!r} already exists and is not yours to change; "
                            "use Save as… with another name")
    message = payload.get("message")  # the version's message (every save records a version)
    saved = service.save_workflow(name, payload.get("workflow"), overwrite=overwrite,
                                  linked=linked_children(payload),  # a link's sub-workflows go with it
                                  message=message[:500] if isinstance(message, str) else "")
    if service.share_mode:
        with _saved_lock:
            mine.update([saved["name"], *saved["children_saved"]])
    return {**saved, "workflows": service.list_workflows(), "workflow_ports": service.workflow_ports()}


def mg_delete_made(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    """Delete the workflow file Make sub-workflow wrote, when it is still exactly the text written (`yaml`): the undo
    of Make sub-workflow offers it. A changed or missing file is kept ({deleted: false, reason}); in share mode a
    visitor may delete only a workflow it saved in this session."""
    name, written = str(payload.get("name", "")), payload.get("yaml")
    path = service.path_for(name)
    mine = _visitor_saves(service, _visitor(payload))
    if service.share_mode and path.stem not in mine:
        raise UserError(f"the workflow {path.stem!r} is not yours to delete")
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {"deleted": False, "reason": "gone"}
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path.name}: {exc}") from None
    if not isinstance(written, str) or current != written:
        return {"deleted": False, "reason": "changed"}
    try:
        path.unlink()
    except OSError as exc:
        raise UserError(f"cannot delete {path.name}: {exc.strerror or exc}") from None
    with _saved_lock:
        mine.discard(path.stem)
    log.info("deleted workflow %s (undo of Make sub-workflow)", path)
    return {"deleted": True, "name": path.stem, "workflows": service.list_workflows(),
            "workflow_ports": service.workflow_ports()}


def linked_children(payload: dict[str, Any]) -> dict[str, str]:
    """The sub-workflows a share link carried, sent back by its page with each check, run or canvas sync
    (names only, capped like the link; never stored): they stand in for the folder's for that workflow."""
    children = payload.get("children")
    if not children:
        return {}
    try:
        return check_link_children(children)
    except DeepLinkError as exc:
        raise UserError(str(exc)) from None


def _loader(service: StudioService, payload: dict[str, Any]) -> ChildLoader | None:
    linked = linked_children(payload)
    return service.child_loader(trusted=False, linked=linked) if linked else None


def mg_from_editor(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    return service.from_editor(payload.get("workflow"), _loader(service, payload))


def mg_parse_yaml(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    return service.parse_yaml(str(payload.get("text", "")), _loader(service, payload))


def mg_run(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    inputs = payload.get("inputs") or {}
    if not isinstance(inputs, dict):
        raise UserError("the run form sent bad inputs; reload the page")
    # a workflow from a link or an upload that runs python here (where python is off, the run is refused anyway)
    # or sends prompts, and maybe an API key from this machine's environment, to another server: show it and ask
    origin, confirmed = str(payload.get("origin", "")), bool(payload.get("confirmed_python"))
    wf = service.workflow_from_json(payload.get("workflow"))
    if origin in UNTRUSTED_ORIGINS and not confirmed:
        code = python_code(wf) if service.policy.allow_python else []
        remote = [] if service.share_mode else service.consent.missing(wf, _visitor(payload))  # share: refused
        if code or remote:
            return {"needs_confirmation": True, "code": code, **({"remote": remote} if remote else {})}
    if not service.share_mode:  # the one consent check (also the Evaluate tab's): remembers what was agreed
        service.consent.require(wf, _visitor(payload), origin=origin, confirmed=confirmed)
        needs = describe_needed_models(wf.models or {}, service.models_dir)
        if needs:  # a `source: hub` model not pulled yet: the page offers to pull it (share mode refuses such models)
            return {"needs_pull": needs}
    return service.start_run(payload.get("workflow"), inputs, payload.get("seed", 0) or 0,
                             visitor=_visitor(payload), trusted=origin not in UNTRUSTED_ORIGINS,
                             linked=linked_children(payload))


def mg_pull_needed(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    """Pull the open workflow's Hub models that are not here yet (the owner's studio only)."""
    if service.share_mode:
        raise UserError("a shared app never pulls models; use one of its models")
    wf = service.workflow_from_json(payload.get("workflow"))
    pulled = pull_needed_models(wf.models or {}, models_dir=service.models_dir)
    return {"pulled": [{"repo": r.repo, "file": r.path.name, "how": r.how} for r in pulled]}


def mg_status(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    return service.run_status(str(payload.get("run_id", "")), visitor=_visitor(payload))


def mg_cancel(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    return service.cancel_run(str(payload.get("run_id", "")), visitor=_visitor(payload))


def mg_node_outputs(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    return service.node_outputs(str(payload.get("run_id", "")), str(payload.get("node_id", "")),
                                visitor=_visitor(payload))


SERVER_FUNCTIONS = (mg_init, mg_list, mg_gallery, mg_open, mg_example, mg_save, mg_from_editor, mg_parse_yaml,
                    mg_run, mg_pull_needed, mg_status, mg_cancel, mg_node_outputs, mg_delete_made,
                    *HISTORY_FUNCTIONS)


def editor_page(service: StudioService, head: str) -> gr.HTML:
    """The editor page component; `head` loads the static JS/CSS before `js_on_load` runs."""
    return gr.HTML(
        value="",
        html_template=PAGE_MARKUP,
        js_on_load=JS_ON_LOAD,
        head=head,
        server_functions=[endpoint(fn, service) for fn in SERVER_FUNCTIONS],
        elem_id=EDITOR_ELEM_ID,
        apply_default_css=False,
        padding=False,
        container=False,
    )
