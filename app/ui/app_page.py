"""The app page of one workflow (`?app=NAME`, `metagen ui --app NAME`): title, typed inputs, Run / Cancel with
progress, the outputs and "How it was decided"; no editor, no tabs. JS and CSS in static/app_page.*."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import gradio as gr

from app.service.errors import UserError
from app.service.studio import StudioService, issues_summary
from app.ui.app_links import APP_ROUTE
from app.ui.app_target import AppTarget, resolve_target
from app.ui.assets import asset_tags
from app.ui.editor_page import mg_run
from app.ui.endpoints import VISITOR_KEY, ServiceCall, endpoint
from app.viz.decision import decision_html
from app.workflow.problems import errors

log = logging.getLogger(__name__)

APP_PAGE_TITLE = "Metagen app"
APP_ELEM_ID = "mg-app-page"
APP_ASSETS = ("app_page.css", "app_page.js")

# Static markup; static/app_page.js fills it. No `$` or backticks: Gradio reads this as a JS template.
APP_MARKUP = """
<main class="ap-page" data-testid="app-page">
  <header class="ap-head">
    <h1 class="ap-title" data-testid="app-title">Loading…</h1>
    <a class="ap-studio" data-testid="studio-link" hidden>Open in the full studio</a>
  </header>
  <div class="ap-desc" data-testid="app-description"></div>
  <div class="ap-error" data-testid="app-error" role="alert" hidden></div>
  <form class="ap-form" data-testid="app-form" novalidate hidden>
    <div class="ap-inputs" data-testid="app-inputs"></div>
    <div class="ap-actions">
      <button type="submit" class="ap-btn ap-primary" data-testid="app-run">Run</button>
      <button type="button" class="ap-btn" data-testid="app-cancel" disabled>Cancel</button>
    </div>
  </form>
  <div class="ap-run" data-testid="app-run-box" hidden>
    <div class="ap-progress" role="progressbar" aria-valuemin="0" aria-valuemax="100" data-testid="app-progress">
      <div class="ap-bar"></div></div>
    <div class="ap-status" data-testid="app-status" role="status" aria-live="polite"></div>
  </div>
  <section class="ap-outputs" data-testid="app-outputs" aria-label="Outputs"></section>
  <details class="ap-decided" data-testid="app-decided" hidden>
    <summary>How it was decided</summary>
    <div class="ap-decided-body" data-testid="app-decided-body">Loading…</div>
  </details>
  <div class="ap-foot" data-testid="app-policy"></div>
</main>
"""

JS_ON_LOAD = "window.MetagenApp.start(element, server);"


def _query(payload: dict[str, Any]) -> dict[str, Any]:
    query = payload.get("query")
    return query if isinstance(query, dict) else {}


def _inputs(target: AppTarget) -> list[dict[str, Any]]:
    """The form's fields: an input without a default is required."""
    return [{"name": name, "type": spec.type, "default": spec.default, "description": spec.description,
             "required": spec.default is None} for name, spec in target.workflow.inputs.items()]


def _problems(service: StudioService, target: AppTarget) -> str | None:
    """Why this workflow cannot run here (validation and the share policy), in one sentence; None when it can."""
    linked = dict(target.children)
    loader = service.child_loader(trusted=target.trusted, linked=linked) if linked or not target.trusted else None
    found = errors(service.check(target.workflow, loader))
    return f"This workflow cannot run here: {issues_summary(found)}" if found else None


def app_info(service: StudioService, target: AppTarget, standalone: bool) -> dict[str, Any]:
    """What the page shows before a run."""
    wf = target.workflow
    return {
        "name": target.name, "title": wf.name, "description": wf.description, "source": target.source,
        "inputs": _inputs(target), "outputs": list(wf.outputs), "problem": _problems(service, target),
        "studio_url": None if standalone else target.studio_url(),
        "policy": service.policy.describe() + (" · dry run (fake model)" if service.dry_run else ""),
    }


def missing_required(target: AppTarget, values: dict[str, Any]) -> list[str]:
    """Required inputs (no default) left empty."""
    return [name for name, spec in target.workflow.inputs.items()
            if spec.default is None and (values.get(name) is None or str(values.get(name)).strip() == "")]


def start_app_run(service: StudioService, target: AppTarget, payload: dict[str, Any]) -> dict[str, Any]:
    """Start the page's workflow with the form's values, through the editor's run path (its consent, pull and
    share-policy checks); the workflow is the server's own reading of the link, never one the browser sends."""
    values = payload.get("inputs") if isinstance(payload.get("inputs"), dict) else {}
    missing = missing_required(target, values)
    if missing:
        return {"error": "Fill in " + ", ".join(missing) + (" (required)." if len(missing) == 1 else
                                                           " (required fields)."), "fields": missing}
    return mg_run(service, {
        "workflow": target.workflow.to_dict(), "inputs": values, "seed": payload.get("seed", 0) or 0,
        "origin": "file" if target.trusted else "link", "confirmed_python": bool(payload.get("confirmed_python")),
        "children": dict(target.children), VISITOR_KEY: payload.get(VISITOR_KEY)})


def ap_decided(service: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
    """"How it was decided" for a finished run of this visitor's."""
    run_id = str(payload.get("run_id", ""))
    if not service.owns_run(run_id, payload.get(VISITOR_KEY)):
        raise UserError(f"no run {run_id!r} of yours in this app")
    return {"html": decision_html(service.trace_record(run_id))}


def server_functions(service: StudioService, fixed: str | None) -> list[Callable[[Any], Any]]:
    """The page's calls; `fixed` pins the page to one workflow (metagen ui --app NAME)."""

    def ap_open(svc: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
        return app_info(svc, resolve_target(svc, _query(payload), fixed), fixed is not None)

    def ap_run(svc: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
        return start_app_run(svc, resolve_target(svc, _query(payload), fixed), payload)

    def ap_status(svc: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
        return svc.run_status(str(payload.get("run_id", "")), visitor=payload.get(VISITOR_KEY))

    def ap_cancel(svc: StudioService, payload: dict[str, Any]) -> dict[str, Any]:
        return svc.cancel_run(str(payload.get("run_id", "")), visitor=payload.get(VISITOR_KEY))

    calls: tuple[ServiceCall, ...] = (ap_open, ap_run, ap_status, ap_cancel, ap_decided)
    return [endpoint(fn, service) for fn in calls]


def app_page(service: StudioService, fixed: str | None = None) -> gr.HTML:
    """The page's one component (inside a Blocks context)."""
    return gr.HTML(value="", html_template=APP_MARKUP, js_on_load=JS_ON_LOAD, head=asset_tags(APP_ASSETS),
                   server_functions=server_functions(service, fixed), elem_id=APP_ELEM_ID,
                   apply_default_css=False, padding=False, container=False)


def mount_app_page(demo: gr.Blocks, service: StudioService) -> None:
    """Add the app page to the studio's Blocks as its page `/app` (outside the Blocks context): same service,
    queue, login and share policy; Gradio serves that page's component alone, not the editor's."""
    with demo.route("App", f"/{APP_ROUTE}", show_in_navbar=False):
        app_page(service)

