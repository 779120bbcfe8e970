"""The Tune tab: which strategy, with which N, for this dataset, model and budget? The race live (one row per
candidate, dropped ones greyed with the reason), the held-out Pareto plot and table, the recommended workflow opened
in the editor, the difficulty-adaptive policy when asked (its section of the report, and the policy opened in the
editor), and the report exported as offline HTML. The tuner is `StudioService.tune` (app/eval/tune)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from app.eval.tune.api import TuneOptions
from app.platform.scratch import ScratchFolder, scratch_file_name
from app.service.errors import UserError
from app.service.studio import StudioService
from app.service.tune_jobs import RUNNING
from app.ui.endpoints import visitor_for
from app.ui.evaluate_form import POLL_S, dataset_choices, message_html
from app.ui.version_info import tune_version_html
from app.viz.tune_adaptive import adaptive_html
from app.viz.tune_race import held_out_html, race_html
from app.workflow.problems import WorkflowError
from app.workflow.spec import Workflow, load_workflow
from app.workflow.subworkflows import CHILD_KINDS, workflow_texts
from app.workflow.validation import check as check_tree

log = logging.getLogger(__name__)

TUNE_TAB = "tune"
EDITOR_TAB = "editor"
"""The editor's tab id (app.ui.app)."""
METRIC_CHOICES = [("the dataset's own (its .meta.yaml, or the task preset's)", ""), ("exact match", "exact"),
                  ("number (numeric equality)", "number"), ("contains the reference", "contains"),
                  ("math (LaTeX equivalence)", "math"), ("choice (the option letter)", "choice"),
                  ("tests (run the code against the dataset's tests)", "tests")]
DEFAULT_BUDGET_TOKENS = 2000
DEFAULT_LIMIT = 40
INTRO = ("**Which strategy, with which N, for your data, your model and your budget?** The tune splits the items "
         "into a *dev* set, where the candidates race (each round the slice doubles and those significantly worse "
         "than the leader, or over budget, are dropped), and a *test* set used once at the end for the figures "
         "below: a choice read on the items it was made on would overstate the winner.")
REPORTS = ScratchFolder("metagen-tune-reports", keep=16)
"""The reports the export button serves: a private folder of at most 16, removed when the app exits."""

OPEN_IN_EDITOR_JS = """(text, name, extra) => {
  if (!text || !window.MetagenUI) return;
  let linked = {};
  try { linked = extra ? JSON.parse(extra) : {}; } catch (e) { linked = {}; }
  window.MetagenUI.openYaml(text, name || "the recommended workflow", "file", null, false, linked.children || {},
                            linked.ports || {});
}"""
"""Opens the recommended workflow (or the adaptive policy) in the editor: a file the tuner wrote into the owner's
workflows folder (trusted, and no unsaved change). The policy's branch workflows lie beside it (in `tuned/`, where
the editor, which looks up children by name in the folder, would not find them), so they travel with it as a
traced run's children do."""
ADAPTIVE_INFO = ("also fix, on dev, a policy that routes each item by a cheap difficulty probe (agreement among 4 "
                 "samples) to the strategy chosen for its difficulty bin, written as a workflow and reported on test "
                 "against the best single strategy at equal tokens")


@dataclass(frozen=True)
class TuneView:
    """Every component of the tab."""

    dataset: gr.Dropdown
    metric: gr.Dropdown
    model: gr.Textbox
    budget: gr.Number
    limit: gr.Number
    candidates: gr.Dropdown
    axes: gr.Textbox
    adaptive: gr.Checkbox
    start: gr.Button
    cancel: gr.Button
    message: gr.HTML
    race: gr.HTML
    plot: gr.Plot
    result: gr.HTML
    adaptive_result: gr.HTML
    open_btn: gr.Button
    open_policy_btn: gr.Button
    export_btn: gr.DownloadButton
    job: gr.State
    timer: gr.Timer
    yaml_box: gr.Textbox
    name_box: gr.Textbox
    children_box: gr.Textbox
    tabs: gr.Tabs

    @property
    def shown(self) -> list[Any]:
        """What every poll updates."""
        return [self.race, self.plot, self.result, self.adaptive_result, self.open_btn, self.open_policy_btn,
                self.export_btn, self.timer, self.message, self.start, self.cancel]


def options_from_form(dataset: Any, metric: Any, model: Any, budget: Any, limit: Any, candidates: Any,
                      axes: Any = "", adaptive: Any = False) -> TuneOptions:
    """The form as TuneOptions; UserError saying what to fix."""
    if not dataset:
        raise UserError("pick a dataset (or a task preset) to tune on")
    try:
        budget_tokens = int(budget) if budget not in (None, "") else None
        items = int(limit) if limit not in (None, "") else None
    except (TypeError, ValueError):
        raise UserError("the budget and the number of items are whole numbers") from None
    if budget_tokens is not None and budget_tokens <= 0:
        raise UserError("the budget is the mean tokens per item the chosen strategy may spend: a positive number")
    if items is not None and items < 4:
        raise UserError("tune on at least 4 items (half are held out for the reported figures)")
    return TuneOptions(data=str(dataset), metric=str(metric) or None, model=str(model or "").strip() or None,
                       budget_tokens=budget_tokens, limit=items, candidates=[str(c) for c in candidates or []],
                       axes=[a.strip() for a in str(axes or "").split(";") if a.strip()], adaptive=bool(adaptive))


def _figure(result: Any) -> Any:
    try:
        return gr.update(value=result.figure(), visible=True)
    except Exception:  # the table and the report still show the figures
        log.exception("the tune's Pareto figure could not be drawn")
        return gr.update(value=None, visible=False)


def _export(result: Any) -> str | None:
    try:
        text = result.html()
    except Exception:
        log.exception("the tune's report could not be written")
        return None
    return str(REPORTS.write_text(scratch_file_name(f"tune-{result.tune_id}", ".html"), text))


class TuneHandlers:
    """The tab's event handlers over one StudioService (each returns a dict of component updates)."""

    def __init__(self, service: StudioService, view: TuneView) -> None:
        self.service = service
        self.v = view

    def on_select(self, request: gr.Request) -> dict[Any, Any]:
        v = self.v
        try:
            datasets = dataset_choices(self.service, visitor_for(self.service, request))
        except UserError as exc:
            return {v.message: message_html(str(exc), "error")}
        names = [name for _, name in datasets]
        preferred = next((n for n in ("arithmetic", *names) if n in names), None)
        return {v.dataset: gr.update(choices=datasets, value=preferred), v.candidates: gr.update(
            choices=self.service.list_examples())}

    def on_start(self, dataset: Any, metric: Any, model: Any, budget: Any, limit: Any, candidates: Any, axes: Any,
                 adaptive: Any, request: gr.Request) -> dict[Any, Any]:
        v = self.v
        try:
            options = options_from_form(dataset, metric, model, budget, limit, candidates, axes, adaptive)
            job = self.service.tune_jobs.start(options, owner=visitor_for(self.service, request))
        except UserError as exc:
            return {v.message: message_html(str(exc), "error")}
        return {v.job: job.job_id, v.race: race_html(None), v.result: "", v.plot: gr.update(value=None, visible=False),
                v.adaptive_result: "", v.open_btn: gr.update(visible=False),
                v.open_policy_btn: gr.update(visible=False), v.export_btn: gr.update(value=None, visible=False),
                v.timer: gr.Timer(active=True), v.message: message_html("The tune started.", "ok"),
                v.start: gr.update(interactive=False), v.cancel: gr.update(interactive=True)}

    def on_cancel(self, job_id: Any, request: gr.Request) -> dict[Any, Any]:
        try:
            self.service.tune_jobs.cancel(str(job_id or ""), owner=visitor_for(self.service, request))
        except UserError as exc:
            return {self.v.message: message_html(str(exc), "error")}
        return {self.v.message: message_html("Cancelling the tune…")}

    def on_poll(self, job_id: Any, request: gr.Request) -> dict[Any, Any]:
        v = self.v
        if not job_id:
            return {v.timer: gr.Timer(active=False)}
        try:
            job = self.service.tune_jobs.get(str(job_id), owner=visitor_for(self.service, request))
        except UserError as exc:
            return {v.timer: gr.Timer(active=False), v.message: message_html(str(exc), "error"),
                    v.start: gr.update(interactive=True), v.cancel: gr.update(interactive=False)}
        snap = job.snapshot()
        if job.state == RUNNING:
            return {v.race: race_html(snap["progress"], job.state)}
        out: dict[Any, Any] = {v.race: race_html(snap["race"] or snap["progress"], job.state, snap["result"])}
        out.update({v.timer: gr.Timer(active=False), v.start: gr.update(interactive=True),
                    v.cancel: gr.update(interactive=False)})
        if job.result is None:
            out[v.message] = message_html(job.error or f"The tune ended ({job.state}).", "error")
            return out
        result = job.result
        out.update({v.result: held_out_html(snap["result"]) + tune_version_html(self.service, result.recommended),
                    v.plot: _figure(result),
                    v.adaptive_result: adaptive_html(snap["result"]),
                    v.open_btn: gr.update(visible=bool(result.recommended.get("path"))),
                    v.open_policy_btn: gr.update(visible=_policy_path_of(result) is not None),
                    v.export_btn: gr.update(value=_export(result), visible=True),
                    v.message: message_html(f"The tune finished ({job.state}).", "ok")})
        return out

    def on_open(self, job_id: Any, request: gr.Request) -> dict[Any, Any]:
        """The recommended workflow's text for the editor (then the Editor tab)."""
        return self._open(job_id, request, "the recommended workflow",
                          lambda result: result.recommended.get("path") if result is not None else None)

    def on_open_policy(self, job_id: Any, request: gr.Request) -> dict[Any, Any]:
        """The adaptive policy's text (the probe, then the route over its branch workflows) for the editor."""
        return self._open(job_id, request, "the adaptive policy", _policy_path_of)

    def _open(self, job_id: Any, request: gr.Request, what: str, path_of: Callable[[Any], Any]) -> dict[Any, Any]:
        v = self.v
        try:
            job = self.service.tune_jobs.get(str(job_id or ""), owner=visitor_for(self.service, request))
            path = self._written_path(path_of(job.result), what)
            wf = load_workflow(path)  # bounded read, checked before the editor gets it
            text = path.read_text(encoding="utf-8")
            children = self._children(wf)
        except UserError as exc:
            return {v.message: message_html(str(exc), "error")}
        except (WorkflowError, OSError) as exc:
            return {v.message: message_html(f"{what} cannot be opened: {exc}", "error")}
        return {v.yaml_box: text, v.name_box: path.stem, v.children_box: json.dumps(children),
                v.tabs: gr.Tabs(selected=EDITOR_TAB), v.message: ""}

    def _children(self, wf: Workflow) -> dict[str, Any]:
        """The sub-workflows (a route's branches) found beside the file, by the name it uses, and their ports."""
        if not any(node.kind in CHILD_KINDS for node in wf.nodes):
            return {}
        texts = workflow_texts(wf, check_tree(wf, self.service.registry, self.service.child_loader()))
        return {"children": texts, "ports": self.service.linked_workflow_ports(texts)}

    def _written_path(self, written: Any, what: str) -> Path:
        if not written:
            raise UserError(f"this tune wrote no {what.removeprefix('the ')}")
        path = Path(str(written)).expanduser()
        return path if path.is_absolute() else self.service.workflows_dir / path


def _policy_path_of(result: Any) -> str | None:
    """Where the tune wrote its adaptive policy (None: not asked, or none built)."""
    adaptive = getattr(result, "adaptive", None)
    if not isinstance(adaptive, dict) or adaptive.get("status") != "built":
        return None
    return adaptive.get("path") or None


def _form(service: StudioService) -> dict[str, Any]:
    gr.Markdown(INTRO, elem_id="mg-tune-intro")
    with gr.Row():
        dataset = gr.Dropdown([], label="Dataset (or a task preset)", elem_id="mg-tune-dataset", scale=3)
        metric = gr.Dropdown(METRIC_CHOICES, value="", label="Metric", allow_custom_value=True,
                             elem_id="mg-tune-metric", scale=2)
        model = gr.Textbox(label="Model", placeholder="each workflow's own (the bundled model); or a .gguf file, a Hub "
                           "repo, an http://…/v1 server", elem_id="mg-tune-model", scale=3)
    with gr.Row():
        budget = gr.Number(DEFAULT_BUDGET_TOKENS, label="Budget: mean tokens per item of the chosen strategy",
                           precision=0, minimum=1, elem_id="mg-tune-budget")
        limit = gr.Number(DEFAULT_LIMIT, label="Items (at most; half are held out)", precision=0, minimum=4,
                          elem_id="mg-tune-limit")
        candidates = gr.Dropdown(service.list_examples(), multiselect=True, label="Candidates (empty: every example "
                                 "that fits the dataset, greedy chain-of-thought always)", elem_id="mg-tune-candidates",
                                 scale=3)
    with gr.Row():
        axes = gr.Textbox(label="Compute axes (optional): NODE.PARAM=v1,v2, several separated by ;  (empty: each "
                          "candidate's natural axis, doubling within the budget)", placeholder="think.n=2,4,8",
                          elem_id="mg-tune-axes", scale=3)
        adaptive = gr.Checkbox(False, label="Adaptive policy (difficulty-routed)", info=ADAPTIVE_INFO,
                               elem_id="mg-tune-adaptive", scale=2)
    with gr.Row():
        start = gr.Button("Tune", variant="primary", elem_id="mg-tune-start", scale=0)
        cancel = gr.Button("Cancel", elem_id="mg-tune-cancel", interactive=False, scale=0)
    return {"dataset": dataset, "metric": metric, "model": model, "budget": budget, "limit": limit,
            "candidates": candidates, "axes": axes, "adaptive": adaptive, "start": start, "cancel": cancel}


def _results() -> dict[str, Any]:
    message = gr.HTML(elem_id="mg-tune-message")
    race = gr.HTML(elem_id="mg-tune-race")
    plot = gr.Plot(label="Held-out accuracy against tokens per item (the Pareto front joined)",
                   elem_id="mg-tune-pareto", visible=False)
    result = gr.HTML(elem_id="mg-tune-result")
    adaptive_result = gr.HTML(elem_id="mg-tune-adaptive-result")
    with gr.Row():
        open_btn = gr.Button("Open the recommended workflow in the editor", elem_id="mg-tune-open", visible=False,
                             min_width=360)
        open_policy_btn = gr.Button("Open the adaptive policy in the editor", elem_id="mg-tune-open-adaptive",
                                    visible=False, min_width=320)
        export_btn = gr.DownloadButton("Export the report (offline HTML)", elem_id="mg-tune-export", visible=False,
                                       min_width=300)
    return {"message": message, "race": race, "plot": plot, "result": result, "adaptive_result": adaptive_result,
            "open_btn": open_btn, "open_policy_btn": open_policy_btn, "export_btn": export_btn, "job": gr.State(""),
            "timer": gr.Timer(POLL_S, active=False),
            "yaml_box": gr.Textbox(visible=False), "name_box": gr.Textbox(visible=False),
            "children_box": gr.Textbox(visible=False)}


def tune_tab(service: StudioService, tabs: gr.Tabs, tab: gr.Tab) -> TuneView:
    """The tab's components and events, inside the current `gr.Tab`."""
    v = TuneView(**_form(service), **_results(), tabs=tabs)
    h = TuneHandlers(service, v)
    form = [v.dataset, v.metric, v.model, v.budget, v.limit, v.candidates, v.axes, v.adaptive]
    tab.select(h.on_select, None, [v.dataset, v.candidates, v.message])
    v.start.click(h.on_start, form, [v.job, *v.shown])
    v.cancel.click(h.on_cancel, [v.job], [v.message])
    v.timer.tick(h.on_poll, [v.job], v.shown, show_progress="hidden")
    for button, handler in ((v.open_btn, h.on_open), (v.open_policy_btn, h.on_open_policy)):
        button.click(handler, [v.job], [v.yaml_box, v.name_box, v.children_box, v.tabs, v.message]).then(
            None, [v.yaml_box, v.name_box, v.children_box], None, js=OPEN_IN_EDITOR_JS)
    return v
