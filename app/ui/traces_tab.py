"""The Traces tab: run history from the trace store, every visualisation of a run, open in editor, compare."""

from __future__ import annotations

import html
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr

from app import viz
from app.platform.scratch import ScratchFolder, scratch_file_name
from app.run.scheduler import SUBWORKFLOWS_NOTE
from app.run.status import END_STATUSES, INTERRUPTED, RUNNING
from app.service.studio import StudioService
from app.share.deeplink import DeepLinkError, check_link_children
from app.ui.endpoints import visitor_for
from app.ui.trace_replay import ReplayRow, replay_controls, wire_replay
from app.ui.version_info import run_version_html

log = logging.getLogger(__name__)

ALL = "(all)"
STATUSES = (ALL, *END_STATUSES, RUNNING, INTERRUPTED)
RUN_COLUMNS = ["run", "workflow", "status", "started", "seconds", "LM calls", "tokens", "cached prompt tokens"]
EDITOR_TAB = "editor"
COLLAPSE_ELEM_ID = "mg-trace-collapse"


def _message(text: str) -> str:
    return f'<div class="mg-muted" style="padding:8px">{html.escape(text)}</div>'


def _as_html(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return f"<pre>{html.escape(str(value))}</pre>"


def _safe(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a viz function; a failure becomes a message instead of breaking the tab."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        log.exception("viz %s failed", fn.__name__)
        return _message(f"could not draw this view ({type(exc).__name__}: {exc})")


def _split(value: Any) -> tuple[Any, str]:
    """(plotly figure or None, html) from a viz result that may be either."""
    if value is None or isinstance(value, str):
        return None, _as_html(value)
    return value, ""


def run_rows(service: StudioService, workflow: str | None, status: str | None,
             visitor: str | None = None) -> tuple[list[list[Any]], list[str]]:
    """Table rows (newest first) and the workflow names seen, from the trace store. In share mode only the
    runs `visitor` started in this app session (the owner, in local mode, sees all)."""
    store = service.trace_store
    if store is None:
        return [], []
    mine = service.visitor_run_ids(visitor)
    runs = store.list_runs(workflow=None if workflow in (None, "", ALL) else workflow,
                           status=None if status in (None, "", ALL) else status, limit=200)
    every = store.list_runs(limit=500)
    if mine is not None:
        runs = [r for r in runs if r["id"] in mine]
        every = [r for r in every if r["id"] in mine]
    rows = []
    for r in runs:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.get("started_at") or 0))
        tokens = (r.get("prompt_tokens_evaluated") or 0) + (r.get("completion_tokens") or 0)
        wall = r.get("wall_s")
        rows.append([r["id"], r.get("workflow", ""), r.get("status", ""), started,
                     round(wall, 2) if isinstance(wall, int | float) else None, r.get("lm_calls", 0), tokens,
                     r.get("prompt_tokens_cached", 0)])
    names = sorted({r.get("workflow", "") for r in every} - {""})
    return rows, names


def visitor_record(service: StudioService, run_id: str, visitor: str | None) -> dict[str, Any]:
    """A run's trace record, if `visitor` may see it (share mode: only its own runs); else 'no such run'."""
    if not service.owns_run(run_id, visitor):
        raise LookupError(f"no run {run_id!r} in the trace database")
    return service.trace_store.get_run(run_id)


def run_choice(row: list[Any]) -> tuple[str, str]:
    return f"{row[0]} · {row[1]} · {row[2]} · {row[3]}", str(row[0])


def call_choices(record: dict[str, Any]) -> list[str]:
    """LM calls for the token view: those with logprobs first (they colour by probability), then the rest."""
    with_logprobs = [str(c) for c in (_safe(viz.calls_with_logprobs, record) or [])]
    rest = [str(c["call_id"]) for c in record.get("lm_calls", []) if c.get("call_id")]
    return list(dict.fromkeys(with_logprobs + rest))[:500]


def collapsed_timeline(service: StudioService, run_id: str | None, collapsed: list[str] | None,
                       visitor: str | None) -> Any:
    """The run's timeline with the nodes inside the `collapsed` workflow nodes hidden (None without a run)."""
    if not run_id:
        return None
    try:
        record = visitor_record(service, run_id, visitor)
    except Exception:
        log.debug("no timeline for run %r", run_id, exc_info=True)
        return None
    return _safe(viz.timeline_figure, record, collapsed=[str(c) for c in collapsed or []])


def _sample_views(record: dict[str, Any], node_id: str | None) -> tuple[Any, str]:
    """(plot update, html) of the sample view: the vote histogram + table figure, and the full texts below."""
    fig, text = _split(_safe(viz.sample_view, record, node_id=node_id))
    full = _safe(viz.samples_html, record, node_id=node_id)
    return gr.update(value=fig, visible=fig is not None), text + _as_html(full)


@dataclass(frozen=True)
class TracesTab:
    """The Traces tab's components that other parts of the page drive (a `?run=ID` link opens a run)."""

    run_pick: gr.Dropdown
    message: gr.Markdown


@dataclass
class _Views:
    """The tab's components (built by `_build_views`, wired by the `_wire_*` functions)."""

    wf_filter: gr.Dropdown
    status_filter: gr.Dropdown
    refresh: gr.Button
    runs_df: gr.Dataframe
    run_pick: gr.Dropdown
    open_btn: gr.Button
    export_btn: gr.DownloadButton
    version: gr.HTML
    summary: gr.HTML
    collapse: gr.CheckboxGroup
    timeline: gr.Plot
    sample_node: gr.Dropdown
    samples_plot: gr.Plot
    samples_html: gr.HTML
    tree_plot: gr.Plot
    tree_html: gr.HTML
    refine_html: gr.HTML
    call_pick: gr.Dropdown
    tokens_html: gr.HTML
    compare_a: gr.Dropdown
    compare_b: gr.Dropdown
    compare_btn: gr.Button
    compare_html: gr.HTML
    yaml_box: gr.Textbox
    children_box: gr.Textbox
    message: gr.Markdown
    replay_row: ReplayRow

    def run_views(self) -> list[Any]:
        """What showing a run fills (in `_run_view_values`' keys)."""
        return [self.version, self.summary, self.timeline, self.collapse, self.sample_node, self.samples_plot,
                self.samples_html, self.tree_plot, self.tree_html, self.refine_html, self.call_pick, self.tokens_html,
                self.export_btn, self.message]


def traces_tab(service: StudioService, tabs: gr.Tabs, tab: gr.Tab) -> TracesTab | None:
    """Build the tab's components and events inside the current Blocks context (None without a trace store)."""
    if service.trace_store is None:
        gr.Markdown(f"The trace store cannot be opened: {service.trace_error or 'unknown error'}. Runs still work; "
                    "fix the database path (--db) to see their traces.")
        return None
    views = _build_views()
    _wire_list(service, views, tab)
    _wire_run_views(service, views)
    _wire_compare(service, views)
    _wire_open(service, views, tabs)
    wire_replay(service, views.run_pick, views.replay_row)
    return TracesTab(run_pick=views.run_pick, message=views.message)


KEPT: dict[str, Any] = {"allow_custom_value": True}
"""For the dropdowns whose choices a handler fills: the server keeps those choices per session, so after a studio
restart the open page's value is not among the new server's (empty) choices and Gradio refused every event that
reads it ("Value: … is not in the list of choices"); the handlers check the value themselves."""


def _build_views() -> _Views:
    with gr.Row():
        wf_filter = gr.Dropdown([ALL], value=ALL, label="Workflow", elem_id="mg-traces-workflow", scale=2, **KEPT)
        status_filter = gr.Dropdown(list(STATUSES), value=ALL, label="Status", elem_id="mg-traces-status", scale=1)
        refresh = gr.Button("Refresh", elem_id="mg-traces-refresh", scale=0)
    runs_df = gr.Dataframe(headers=RUN_COLUMNS, interactive=False, elem_id="mg-traces-runs", wrap=True,
                           max_height=260)
    with gr.Row():
        run_pick = gr.Dropdown([], label="Run", elem_id="mg-traces-run", scale=3, **KEPT)
        open_btn = gr.Button("Open this run's workflow in the editor", elem_id="mg-traces-open", scale=1)
        export_btn = gr.DownloadButton("Export HTML report", elem_id="mg-traces-export", scale=1)
    run_link_controls(run_pick)
    replay_row = replay_controls()
    version = gr.HTML(elem_id="mg-trace-version")  # which version the run ran, and the link that opens it
    summary = gr.HTML(elem_id="mg-trace-summary")
    with gr.Tabs():
        with gr.Tab("Timeline", elem_id="mg-trace-timeline-tab"):
            collapse = gr.CheckboxGroup([], value=[], label="Collapse sub-workflows", elem_id=COLLAPSE_ELEM_ID,
                                        info="hide the nodes inside these workflow nodes", visible=False)
            timeline = gr.Plot(label="Timeline", elem_id="mg-trace-timeline")
        with gr.Tab("Samples", elem_id="mg-trace-samples-tab"):
            sample_node = gr.Dropdown([], label="Node (empty: the last candidate set of the run)",
                                      elem_id="mg-trace-sample-node", **KEPT)
            samples_plot = gr.Plot(label="Samples", elem_id="mg-trace-samples-plot", visible=False)
            samples_html = gr.HTML(elem_id="mg-trace-samples")
        with gr.Tab("Search tree", elem_id="mg-trace-tree-tab"):
            tree_plot = gr.Plot(label="Search tree", elem_id="mg-trace-tree", visible=False)
            tree_html = gr.HTML(elem_id="mg-trace-tree-html")
        with gr.Tab("Refinement", elem_id="mg-trace-refine-tab"):
            refine_html = gr.HTML(elem_id="mg-trace-refine")
        with gr.Tab("Tokens", elem_id="mg-trace-tokens-tab"):
            call_pick = gr.Dropdown([], label="LM call", elem_id="mg-trace-call", **KEPT)
            tokens_html = gr.HTML(elem_id="mg-trace-tokens")
        with gr.Tab("Compare", elem_id="mg-trace-compare-tab"):
            with gr.Row():
                compare_a = gr.Dropdown([], label="Run A", elem_id="mg-compare-a", **KEPT)
                compare_b = gr.Dropdown([], label="Run B", elem_id="mg-compare-b", **KEPT)
                compare_btn = gr.Button("Compare", elem_id="mg-compare-btn", scale=0)
            compare_html = gr.HTML(elem_id="mg-compare")
    yaml_box = gr.Textbox(visible="hidden", elem_id="mg-traces-yaml")
    children_box = gr.Textbox(visible="hidden", elem_id="mg-traces-children")
    message = gr.Markdown(elem_id="mg-traces-message")
    return _Views(wf_filter, status_filter, refresh, runs_df, run_pick, open_btn, export_btn, version, summary,
                  collapse, timeline, sample_node, samples_plot, samples_html, tree_plot, tree_html, refine_html,
                  call_pick, tokens_html, compare_a, compare_b, compare_btn, compare_html, yaml_box, children_box,
                  message, replay_row)


def _wire_list(service: StudioService, v: _Views, tab: gr.Tab) -> None:
    """The run list and its filters, refreshed when the tab opens."""

    newest = gr.State(None)  # the newest run of the last listing: a pick that was it follows the next newest

    def load_list(workflow: str, status: str, picked: str | None = None, newest_before: str | None = None,
                  request: gr.Request = None) -> tuple[Any, ...]:  # type: ignore[assignment]
        rows, names = run_rows(service, workflow, status, visitor_for(service, request))
        choices = [run_choice(r) for r in rows]
        keys = [key for _, key in choices]
        current = followed_run(picked, keys, newest_before)
        return (gr.update(value=rows), gr.update(choices=[ALL, *names]), gr.update(choices=choices, value=current),
                gr.update(choices=choices), gr.update(choices=choices), keys[0] if keys else None)

    list_outputs = [v.runs_df, v.wf_filter, v.run_pick, v.compare_a, v.compare_b, newest]
    for trigger in (v.refresh.click, tab.select, v.wf_filter.input, v.status_filter.input):
        trigger(load_list, [v.wf_filter, v.status_filter, v.run_pick, newest], list_outputs)
    v.runs_df.select(row_run, None, [v.run_pick])  # a click on a row opens that run


def followed_run(picked: str | None, keys: list[str], newest_before: str | None) -> str | None:
    """The run the tab shows after a listing: one the user picked (or a ?run= link opened) stays; none, or the
    newest of the last listing, follows the newest now (the run just started)."""
    if picked in keys and picked != newest_before:
        return picked
    return keys[0] if keys else None


def row_run(evt: gr.SelectData) -> Any:
    """The run of the clicked runs-table row (its first cell), as the Run dropdown's value."""
    row = evt.row_value or []
    return gr.update(value=str(row[0])) if row and row[0] else gr.update()


def _empty_views(v: _Views, first_message: str) -> dict[Any, Any]:
    return {v.version: "", v.summary: _message(first_message), v.timeline: None,
            v.collapse: gr.update(choices=[], value=[], visible=False),
            v.sample_node: gr.update(choices=[], value=None),
            v.samples_plot: gr.update(visible=False), v.samples_html: "", v.tree_plot: gr.update(visible=False),
            v.tree_html: "", v.refine_html: "", v.call_pick: gr.update(choices=[], value=None), v.tokens_html: "",
            v.export_btn: gr.update(value=None), v.message: ""}


def _run_view_values(v: _Views, record: dict[str, Any]) -> dict[Any, Any]:
    """Every view of one run's record."""
    samples_fig, samples_text = _sample_views(record, None)
    fig_t, html_t = _split(_safe(viz.search_tree_figure, record))
    calls = call_choices(record)
    collapsible = _safe(viz.collapsible_nodes, record)
    collapsible = collapsible if isinstance(collapsible, list) else []
    summary_value = _safe(viz.summary_html, record)
    if summary_value is None:
        summary_value = _message(f"run {record['run'].get('id')}: {record['run'].get('status')}")
    return {
        v.summary: _as_html(summary_value),
        v.timeline: _safe(viz.timeline_figure, record),
        v.collapse: gr.update(choices=collapsible, value=[], visible=bool(collapsible)),
        v.sample_node: gr.update(choices=list(_safe(viz.candidate_nodes, record) or []), value=None),
        v.samples_plot: samples_fig,
        v.samples_html: samples_text,
        v.tree_plot: gr.update(value=fig_t, visible=fig_t is not None),
        v.tree_html: (html_t + _as_html(_safe(viz.tree_html, record))) or _message("This run has no search tree."),
        v.refine_html: (_as_html(_safe(viz.refinement_html, record))
                        or _message("This run has no refinement steps.")),
        v.call_pick: gr.update(choices=calls, value=calls[0] if calls else None),
        v.tokens_html: (_as_html(_safe(viz.token_view_html, record, calls[0])) if calls
                        else _message("This run made no LM calls.")),
        v.export_btn: gr.update(value=_export_file(record)),
        v.message: "",
    }


def _wire_run_views(service: StudioService, v: _Views) -> None:
    """Picking a run fills every view; the timeline's collapse, the sample node and the LM call redraw one."""

    def show_run(run_id: str | None, request: gr.Request = None) -> dict[Any, Any]:  # type: ignore[assignment]
        if not run_id:
            return _empty_views(v, "Pick a run.")
        try:
            record = visitor_record(service, run_id, visitor_for(service, request))
        except Exception as exc:
            return _empty_views(v, str(exc))
        return {**_run_view_values(v, record), v.version: run_version_html(service, record)}

    v.run_pick.change(show_run, [v.run_pick], v.run_views())

    def redraw_timeline(run_id: str | None, collapsed: list[str] | None,
                        request: gr.Request = None) -> Any:  # type: ignore[assignment]
        return collapsed_timeline(service, run_id, collapsed, visitor_for(service, request))

    v.collapse.input(redraw_timeline, [v.run_pick, v.collapse], [v.timeline])

    def show_samples(run_id: str | None, node_id: str | None,
                     request: gr.Request = None) -> tuple[Any, Any]:  # type: ignore[assignment]
        if not run_id:
            return gr.update(visible=False), ""
        try:
            record = visitor_record(service, run_id, visitor_for(service, request))
        except Exception as exc:
            return gr.update(visible=False), _message(str(exc))
        return _sample_views(record, node_id or None)

    v.sample_node.input(show_samples, [v.run_pick, v.sample_node], [v.samples_plot, v.samples_html])

    def show_tokens(run_id: str | None, call_id: str | None, request: gr.Request = None) -> str:  # type: ignore[assignment]
        if not run_id or not call_id:
            return ""
        try:
            record = visitor_record(service, run_id, visitor_for(service, request))
        except Exception as exc:
            return _message(str(exc))
        return _as_html(_safe(viz.token_view_html, record, call_id))

    v.call_pick.input(show_tokens, [v.run_pick, v.call_pick], [v.tokens_html])


def _wire_compare(service: StudioService, v: _Views) -> None:
    def compare(a: str | None, b: str | None, request: gr.Request = None) -> str:  # type: ignore[assignment]
        if not a or not b:
            return _message("Pick two runs to compare.")
        visitor = visitor_for(service, request)
        try:
            return _as_html(_safe(viz.compare_runs_html, visitor_record(service, a, visitor),
                                  visitor_record(service, b, visitor)))
        except Exception as exc:
            return _message(str(exc))

    v.compare_btn.click(compare, [v.compare_a, v.compare_b], [v.compare_html])


def _wire_open(service: StudioService, v: _Views, tabs: gr.Tabs) -> None:
    """"Open this run's workflow in the editor", with the sub-workflows the run recorded."""

    def open_in_editor(run_id: str | None,
                       request: gr.Request = None) -> tuple[Any, Any, Any, str]:  # type: ignore[assignment]
        if not run_id:
            return gr.update(), gr.update(), gr.update(), "Pick a run first."
        try:
            record = visitor_record(service, run_id, visitor_for(service, request))
        except Exception as exc:
            return gr.update(), gr.update(), gr.update(), str(exc)
        text = record["run"].get("workflow_yaml") or ""
        if not text:
            return gr.update(), gr.update(), gr.update(), "This run did not record its workflow."
        children = run_children(record)
        extra = {"children": children, "ports": service.linked_workflow_ports(children)}
        return text, json.dumps(extra), gr.Tabs(selected=EDITOR_TAB), ""

    v.open_btn.click(open_in_editor, [v.run_pick], [v.yaml_box, v.children_box, tabs, v.message]).then(
        None, [v.yaml_box, v.run_pick, v.children_box], None, js=OPEN_RUN_JS)


OPEN_RUN_JS = """(text, run, extra) => {
  if (!text || !window.MetagenUI) return;
  let linked = {};
  try { linked = extra ? JSON.parse(extra) : {}; } catch (e) { linked = {}; }
  window.MetagenUI.openYaml(text, "run " + run, "link", null, true, linked.children || {}, linked.ports || {});
}"""
"""Opens a traced run's workflow with the sub-workflows it ran (as a link's: used instead of the folder's files)."""


def run_children(record: dict[str, Any]) -> dict[str, str]:
    """The sub-workflows' YAML a run recorded as it started (name -> text), as the editor takes a link's children;
    {} when it used none or named one by a path (the editor then finds the children in the folder)."""
    for event in record.get("events", []):
        if event.get("kind") == SUBWORKFLOWS_NOTE:
            texts = (event.get("data") or {}).get("workflows") or {}
            try:
                return check_link_children(texts)
            except DeepLinkError:
                log.info("run %s names a sub-workflow by a path: opened without its recorded children",
                         record["run"].get("id"))
                return {}
    return {}


REPORTS = ScratchFolder("metagen-reports", keep=16)
"""The reports the download button serves: a private folder of at most 16, removed when the app exits (Gradio's
own copies are cleared by the app's `delete_cache`)."""


def _export_file(record: dict[str, Any]) -> str | None:
    """Write the run's standalone HTML report to the reports folder for the download button."""
    text = _safe(viz.export_html, record)
    if not isinstance(text, str) or not text:
        return None
    # an imported run's id is any text (`a/b`, `..`): the file name is made from it, never the id itself
    return str(REPORTS.write_text(scratch_file_name(f"run-{record['run']['id']}", ".html"), text))


COPY_RUN_LINK_JS = """(run) => {
  if (!run) return "";
  const url = new URL(window.location.href);
  url.search = "";
  url.hash = "";
  url.searchParams.set("run", run);
  const link = url.toString();
  if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(link).catch(() => {});
  return link;
}"""


def run_link_controls(run_pick: gr.Dropdown) -> None:
    """A "Copy link to this run" button and the link it made (Traces tab; call inside its layout)."""
    with gr.Row():
        button = gr.Button("Copy link to this run", elem_id="mg-traces-copy-link", scale=0)
        link = gr.Textbox(label="Link to this run (opens its trace)", interactive=False, elem_id="mg-traces-run-link",
                          scale=4)
    button.click(None, [run_pick], [link], js=COPY_RUN_LINK_JS)
