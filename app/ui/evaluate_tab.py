"""The Evaluate tab's Gradio components and handlers: workflows (the editor's one included) and a dataset,
column mapping, metric and sweep, the cost estimate, the evaluation with live progress, and past ones; each
event's visitor (its Gradio session) sees only its own evaluations and uploads in share mode."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from app import viz
from app.service.errors import UserError
from app.service.evaluations import read_upload
from app.service.studio import StudioService
from app.ui.endpoints import visitor_for
from app.ui.evaluate_form import (
    DEFAULT_OUTPUT,
    EDITOR,
    MAX_AXES,
    MAX_MAPPED_INPUTS,
    METRICS,
    NO_DEFAULT,
    PAST_COLUMNS,
    POLL_S,
    READ_EDITOR_JS,
    TESTS_METRIC,
    _cell,
    _safe,
    _try_selected,
    add_axis,
    build_request,
    dataset_choices,
    editor_workflow,
    estimate_html,
    gold_check_html,
    message_html,
    past_rows,
    picked_task,
    progress_html,
    run_link,
    selected_workflows,
    sweep_options,
    task_choices,
    task_metric,
    workflow_choices,
)
from app.ui.version_info import with_version_links
from app.workflow.spec import Workflow

log = logging.getLogger(__name__)


# ------------------------------------------------------------------ the tab


@dataclass(frozen=True)
class EvaluateView:
    """Every component of the tab (the handlers read and update them by component)."""

    editor_yaml: gr.Textbox
    workflows: gr.Dropdown
    refresh: gr.Button
    dataset: gr.Dropdown
    task: gr.Dropdown
    check_grader: gr.Button
    upload: gr.File
    dataset_info: gr.Markdown
    preview: gr.Dataframe
    columns: gr.State
    map_names: gr.State
    map_slots: tuple[gr.Dropdown, ...]
    reference: gr.Dropdown
    check: gr.HTML
    metric: gr.Dropdown
    metric_arg: gr.Textbox
    output: gr.Textbox
    limit: gr.Number
    shuffle: gr.Checkbox
    seed: gr.Number
    share_samples: gr.Checkbox
    bootstrap: gr.Number
    repeats: gr.Number
    baseline: gr.Textbox
    sweep_param: gr.Dropdown
    sweep_add: gr.Button
    sweeps: gr.Textbox
    sweep_suggested: gr.State
    estimate_btn: gr.Button
    start_btn: gr.Button
    cancel_btn: gr.Button
    estimate: gr.HTML
    message: gr.HTML
    past: gr.Dropdown
    past_refresh: gr.Button
    past_table: gr.Dataframe
    progress: gr.HTML
    curve: gr.Plot
    tokens: gr.Plot
    pass_at_k: gr.Plot
    summary: gr.HTML
    items: gr.HTML
    timer: gr.Timer

    @property
    def form(self) -> set[Any]:
        """Every input a handler may read (Gradio passes them as one dict keyed by component)."""
        return {self.editor_yaml, self.workflows, self.dataset, self.task, self.upload, self.columns, self.map_names,
                *self.map_slots, self.reference, self.metric, self.metric_arg, self.output, self.limit, self.shuffle,
                self.seed, self.share_samples, self.bootstrap, self.repeats, self.baseline, self.sweep_param,
                self.sweeps, self.sweep_suggested, self.past}

    @property
    def results(self) -> list[Any]:
        return [self.progress, self.curve, self.tokens, self.pass_at_k, self.summary, self.items, self.cancel_btn]

    @property
    def mapping_outputs(self) -> list[Any]:
        return [self.map_names, *self.map_slots, self.reference, self.check]


@dataclass(frozen=True)
class EvaluateTab:
    """What other parts of the page (and tests) use: the components and the handlers behind them."""

    view: EvaluateView
    handlers: EvaluateHandlers


class EvaluateHandlers:
    """The tab's event handlers: each takes the form as {component: value} and returns {component: update}.
    Gradio also passes the event's request (by the `gr.Request` annotation, after the form's dict); its session
    is the visitor every evaluation call is made for. Called directly (tests), there is no request: the app."""

    def __init__(self, service: StudioService, view: EvaluateView) -> None:
        self.service = service
        self.v = view

    def _visitor(self, request: gr.Request | None) -> str | None:
        """The visitor behind an event, by the rule of every browser call (`endpoints.visitor_for`)."""
        if request is None:  # called directly (tests): the app itself
            return None
        return visitor_for(self.service, request)

    # ---------------------------------------------------------------- reading the form

    def _picked(self, d: dict[Any, Any]) -> list[str]:
        value = d.get(self.v.workflows)
        return [value] if isinstance(value, str) else list(value or [])

    def _mapping(self, d: dict[Any, Any]) -> dict[str, str]:
        names = list(d.get(self.v.map_names) or [])
        return {name: d.get(slot) for name, slot in zip(names, self.v.map_slots, strict=False) if d.get(slot)}

    def request(self, d: dict[Any, Any]) -> dict[str, Any]:
        v = self.v
        return build_request(self.service, picked=self._picked(d), editor_yaml=d.get(v.editor_yaml),
                             dataset=d.get(v.dataset), mapping=self._mapping(d), reference=d.get(v.reference),
                             metric=d.get(v.metric), metric_arg=d.get(v.metric_arg), output=d.get(v.output),
                             limit=d.get(v.limit), shuffle=d.get(v.shuffle), seed=d.get(v.seed),
                             sweeps=d.get(v.sweeps), share_samples=d.get(v.share_samples),
                             bootstrap=d.get(v.bootstrap), repeats=d.get(v.repeats), baseline=d.get(v.baseline),
                             task=d.get(v.task))

    @staticmethod
    def _error(exc: Exception, doing: str) -> str:
        if isinstance(exc, UserError | ValueError):
            return message_html(str(exc), "error")
        log.exception("%s failed", doing)
        return message_html(f"Could not {doing} ({type(exc).__name__}); see the app log for details.", "error")

    # ---------------------------------------------------------------- workflows, dataset, mapping

    def _mapping_updates(self, workflows: list[Workflow], columns: list[str], reference: str | None = None,
                         keep: dict[str, str] | None = None) -> dict[Any, Any]:
        """One column dropdown per input of the first workflow (default: the same-named column)."""
        v = self.v
        inputs = dict(workflows[0].inputs) if workflows else {}
        names = list(inputs)[:MAX_MAPPED_INPUTS]
        out: dict[Any, Any] = {v.map_names: names}
        keep = keep or {}
        for i, slot in enumerate(v.map_slots):
            if i >= len(names):
                out[slot] = gr.update(visible=False, value=None, choices=[])
                continue
            name = names[i]
            has_default = getattr(inputs[name], "default", None) is not None
            choices = [(c, c) for c in columns] + ([("(none: the input's default)", NO_DEFAULT)] if has_default else [])
            if keep.get(name) in columns:
                value = keep[name]
            else:
                value = name if name in columns else (NO_DEFAULT if has_default else None)
            out[slot] = gr.update(visible=True, choices=choices, value=value, label=f"input '{name}' ← column")
        ref_choices = [("(none)", "")] + [(c, c) for c in columns]
        ref = reference if reference in columns else ("answer" if "answer" in columns else "")
        out[v.reference] = gr.update(choices=ref_choices, value=ref)
        return out

    def _check(self, d: dict[Any, Any], mapping: dict[str, str] | None = None, reference: str | None = None,
               visitor: str | None = None) -> str:
        """Whether every row fills the picked workflows' inputs (the plan check, without the sweep)."""
        task, dataset = picked_task(d.get(self.v.dataset), d.get(self.v.task))
        if not (dataset or task) or not self._picked(d):
            return ""
        try:
            workflows = selected_workflows(self.service, self._picked(d), d.get(self.v.editor_yaml))
            plan = self.service.evaluations.plan({"workflows": workflows, "dataset": dataset, "task": task,
                                                  "metric": "exact",
                                                  "mapping": mapping if mapping is not None else self._mapping(d),
                                                  "reference": reference if reference is not None
                                                  else d.get(self.v.reference) or None}, visitor=visitor)
        except Exception as exc:
            return self._error(exc, "check the dataset")
        rows = len(plan.dataset.rows)
        return message_html(f"All {rows} rows fill the inputs of {len(plan.workflows)} workflow"
                            f"{'s' if len(plan.workflows) != 1 else ''}.", "ok")

    def _workflow_updates(self, d: dict[Any, Any], picked: list[str], visitor: str | None) -> dict[Any, Any]:
        """Mapping, sweep params and the suggested sweep for the picked workflows."""
        v = self.v
        loaded = _try_selected(self.service, picked, d.get(v.editor_yaml))
        columns = list(d.get(v.columns) or [])
        out = self._mapping_updates(loaded, columns, d.get(v.reference), self._mapping(d))
        choices, suggestion = sweep_options(self.service, loaded)
        out[v.sweep_param] = gr.update(choices=choices, value=choices[0][1] if choices else None)
        text = (d.get(v.sweeps) or "").strip()
        if not text or text == (d.get(v.sweep_suggested) or ""):
            out[v.sweeps] = suggestion
            out[v.sweep_suggested] = suggestion
        mapping = {name: out[slot]["value"] for name, slot in zip(out[v.map_names], v.map_slots, strict=False)
                   if out[slot].get("value")}
        out[v.check] = self._check({**d, v.workflows: picked}, mapping, out[v.reference]["value"] or None,
                                   visitor)
        return out

    def on_select(self, d: dict[Any, Any], request: gr.Request = None) -> dict[Any, Any]:  # type: ignore[assignment]
        """The tab was opened: fresh lists of workflows, datasets and past evaluations."""
        v = self.v
        visitor = self._visitor(request)
        editor = d.get(v.editor_yaml)
        choices = workflow_choices(self.service, editor)
        values = {value for _, value in choices}
        picked = [p for p in self._picked(d) if p in values]
        if EDITOR in picked and editor_workflow(editor) is None:
            picked.remove(EDITOR)  # an empty editor is nothing to evaluate
        out: dict[Any, Any] = {v.workflows: gr.update(choices=choices, value=picked), v.message: ""}
        problems = []
        try:
            datasets = dataset_choices(self.service, visitor)
            names = [value for _, value in datasets]
            kept = d.get(v.dataset) in names or str(d.get(v.dataset) or "").startswith("hf:")  # typed Hub names stay
            out[v.dataset] = gr.update(choices=datasets, value=d.get(v.dataset) if kept else None)
            tasks = task_choices(self.service)
            out[v.task] = gr.update(choices=tasks, value=d.get(v.task) if d.get(v.task) in
                                    {value for _, value in tasks} else "")
        except Exception as exc:
            problems.append(self._error(exc, "list the datasets"))
        try:
            out.update(self._past_updates(d.get(v.past), visitor))
        except Exception as exc:
            problems.append(self._error(exc, "list the past evaluations"))
        out.update(self._workflow_updates(d, picked, visitor))
        if problems:
            out[v.message] = "".join(problems)
        return out

    def on_workflows(self, d: dict[Any, Any], request: gr.Request = None) -> dict[Any, Any]:  # type: ignore[assignment]
        return {**self._workflow_updates(d, self._picked(d), self._visitor(request)), self.v.message: ""}

    def _dataset_updates(self, d: dict[Any, Any], name: str | None, visitor: str | None,
                         preview: dict[str, Any] | None = None) -> dict[Any, Any]:
        v = self.v
        if not name:
            return {v.preview: gr.update(value=None), v.dataset_info: "", v.columns: [], v.check: "",
                    **self._mapping_updates(_try_selected(self.service, self._picked(d), d.get(v.editor_yaml)), [])}
        try:
            preview = preview or self.service.evaluations.preview(name, visitor=visitor)
        except Exception as exc:
            return {v.preview: gr.update(value=None), v.dataset_info: "", v.columns: [],
                    v.check: self._error(exc, "read the dataset")}
        columns = list(preview["columns"])
        rows = [[_cell(r.get(c)) for c in columns] for r in preview["rows"]]
        shown = len(rows)
        out: dict[Any, Any] = {
            v.preview: gr.update(value={"headers": columns, "data": rows}),
            v.dataset_info: f"**{name}**: {preview['count']} rows · columns: {', '.join(columns)}"
                            + (f" · the first {shown} shown" if shown < preview["count"] else ""),
            v.columns: columns,
        }
        loaded = _try_selected(self.service, self._picked(d), d.get(v.editor_yaml))
        out.update(self._mapping_updates(loaded, columns))
        mapping = {n: out[slot]["value"] for n, slot in zip(out[v.map_names], v.map_slots, strict=False)
                   if out[slot].get("value")}
        out[v.check] = self._check({**d, v.dataset: name}, mapping, out[v.reference]["value"] or None, visitor)
        return out

    def on_dataset(self, d: dict[Any, Any], request: gr.Request = None) -> dict[Any, Any]:  # type: ignore[assignment]
        """A dataset was picked: its preview and mapping, and its metric when a preset or its meta file names one."""
        visitor = self._visitor(request)
        name = d.get(self.v.dataset)
        out = {**self._dataset_updates(d, name, visitor), self.v.message: ""}
        metric = task_metric(self.service, name) or self.service.evaluations.dataset_metric(name, visitor=visitor)
        # the preset's metric or the one the dataset's meta file declares
        if metric is not None and metric in {value for _, value in (*METRICS, TESTS_METRIC)}:
            out[self.v.metric] = gr.update(value=metric)
        return out

    def on_task(self, d: dict[Any, Any], request: gr.Request = None) -> dict[Any, Any]:  # type: ignore[assignment]
        """A task preset was picked beside the dataset: its metric, and whether the file's rows fill its prompts."""
        v = self.v
        task, _ = picked_task(d.get(v.dataset), d.get(v.task))
        out: dict[Any, Any] = {v.check: self._check(d, visitor=self._visitor(request)), v.message: ""}
        metric = task_metric(self.service, f"task:{task}") if task else None
        if metric is not None and metric in {value for _, value in (*METRICS, TESTS_METRIC)}:
            out[v.metric] = gr.update(value=metric)
        return out

    def on_upload(self, d: dict[Any, Any], request: gr.Request = None) -> dict[Any, Any]:  # type: ignore[assignment]
        v = self.v
        visitor = self._visitor(request)
        path = d.get(v.upload)
        if not path:
            return {}
        path = getattr(path, "name", path)  # a file object from older Gradio versions
        try:
            data = read_upload(Path(path))  # refused by its size before it is read
            added = self.service.evaluations.upload_dataset(Path(path).name, data, visitor=visitor)
        except Exception as exc:
            return {v.message: self._error(exc, "upload the dataset")}
        out = {v.dataset: gr.update(choices=dataset_choices(self.service, visitor), value=added["name"])}
        out.update(self._dataset_updates({**d, v.dataset: added["name"]}, added["name"], visitor, added))
        out[v.message] = message_html(f"Uploaded {added['name']} ({added['count']} rows).", "ok")
        return out

    def on_mapping(self, d: dict[Any, Any], request: gr.Request = None) -> dict[Any, Any]:  # type: ignore[assignment]
        return {self.v.check: self._check(d, visitor=self._visitor(request))}

    def on_add_axis(self, d: dict[Any, Any]) -> dict[Any, Any]:
        v = self.v
        loaded = _try_selected(self.service, self._picked(d), d.get(v.editor_yaml))
        text, note = add_axis(self.service, loaded, d.get(v.sweep_param), d.get(v.sweeps))
        return {v.sweeps: text, v.message: message_html(note, "error") if note else ""}

    # ---------------------------------------------------------------- estimate, start, cancel, progress

    def on_check_grader(self, d: dict[Any, Any],
                        request: gr.Request = None) -> dict[Any, Any]:  # type: ignore[assignment]
        """Grade the picked task preset's own gold answers (its first `limit` rows) with its metric."""
        v = self.v
        task, dataset = picked_task(d.get(v.dataset), d.get(v.task))
        if not task:
            return {v.check: "", v.message: message_html(
                "Pick a task preset in the Task preset list (its rows: the picked dataset file, else the preset's "
                "own Hub dataset): the grader is checked on the rows' gold answers.", "error")}
        try:
            result = self.service.evaluations.check_gold(task, dataset=dataset,
                                                         limit=int(d.get(v.limit) or 0) or None,
                                                         visitor=self._visitor(request))
        except Exception as exc:
            return {v.check: "", v.message: self._error(exc, "check the grader")}
        return {v.check: gold_check_html(result), v.message: ""}

    def on_estimate(self, d: dict[Any, Any], request: gr.Request = None) -> dict[Any, Any]:  # type: ignore[assignment]
        v = self.v
        try:
            result = self.service.evaluations.estimate(self.request(d), visitor=self._visitor(request))
        except Exception as exc:
            return {v.estimate: "", v.message: self._error(exc, "estimate the evaluation")}
        return {v.estimate: estimate_html(result), v.message: ""}

    def _views(self, status: dict[str, Any]) -> dict[Any, Any]:
        """Progress line, the three plots, the summary and the items table of one status; Cancel is active only
        while that evaluation runs (it looked clickable with nothing running)."""
        v = self.v
        summary = with_version_links(self.service, status.get("summary") or {})  # the version column's links
        return {
            v.cancel_btn: gr.update(interactive=bool(status.get("running"))),
            v.progress: progress_html(status),
            v.curve: _figure(_safe(viz.accuracy_curve_figure, summary)),
            v.tokens: _figure(_safe(viz.accuracy_tokens_figure, summary)),
            v.pass_at_k: _figure(_safe(viz.pass_at_k_figure, summary)),
            v.summary: _safe(viz.evaluation_summary_html, summary) or "",
            v.items: _safe(viz.items_table_html, summary, run_link=run_link) or "",
        }

    def _past_updates(self, current: str | None, visitor: str | None) -> dict[Any, Any]:
        rows, choices = past_rows(self.service, visitor)
        return {self.v.past_table: gr.update(value=rows), self.v.past: gr.update(choices=choices, value=current)}

    def on_start(self, d: dict[Any, Any], request: gr.Request = None) -> dict[Any, Any]:  # type: ignore[assignment]
        v = self.v
        visitor = self._visitor(request)
        try:
            status = self.service.evaluations.start(self.request(d), visitor=visitor)
        except Exception as exc:
            return {v.message: self._error(exc, "start the evaluation")}
        out = {**self._views(status), **self._past_updates(status["eval_id"], visitor)}
        out[v.timer] = gr.Timer(active=bool(status.get("running")))
        out[v.message] = message_html(f"Started evaluation {status['eval_id']}: {status.get('total', 0)} runs.", "ok")
        out[v.estimate] = ""  # the summary shows the estimate beside the actual cost from now on
        return out

    def on_cancel(self, d: dict[Any, Any], request: gr.Request = None) -> dict[Any, Any]:  # type: ignore[assignment]
        v = self.v
        visitor = self._visitor(request)
        eval_id = d.get(v.past)
        if not eval_id:
            return {v.message: message_html("No evaluation is picked.", "error")}
        try:
            status = self.service.evaluations.status(eval_id, visitor=visitor)
            if not status.get("running"):
                return {v.message: message_html(f"Evaluation {eval_id} is not running ({status.get('status')}).")}
            status = self.service.evaluations.cancel(eval_id, visitor=visitor)
        except Exception as exc:
            return {v.message: self._error(exc, "cancel the evaluation")}
        return {**self._views(status), v.timer: gr.Timer(active=True),
                v.message: message_html(f"Cancelling {eval_id}: runs in flight stop, finished items are kept.")}

    def on_poll(self, d: dict[Any, Any], request: gr.Request = None) -> dict[Any, Any]:  # type: ignore[assignment]
        """The timer: the picked evaluation's progress; the timer stops once it is not running."""
        v = self.v
        visitor = self._visitor(request)
        eval_id = d.get(v.past)
        if not eval_id:
            return {v.timer: gr.Timer(active=False)}
        try:
            status = self.service.evaluations.status(eval_id, visitor=visitor)
        except Exception as exc:
            return {v.timer: gr.Timer(active=False), v.message: self._error(exc, "read the evaluation's progress")}
        out = self._views(status)
        if not status.get("running"):
            out[v.timer] = gr.Timer(active=False)
            out.update(self._past_updates(eval_id, visitor))
        return out

    def on_past(self, d: dict[Any, Any], request: gr.Request = None) -> dict[Any, Any]:  # type: ignore[assignment]
        """Show a past (or running) evaluation in the same views."""
        v = self.v
        eval_id = d.get(v.past)
        if not eval_id:
            return {v.timer: gr.Timer(active=False), v.cancel_btn: gr.update(interactive=False)}
        try:
            status = self.service.evaluations.status(eval_id, visitor=self._visitor(request))
        except Exception as exc:
            return {v.message: self._error(exc, "open the evaluation"), v.timer: gr.Timer(active=False)}
        return {**self._views(status), v.timer: gr.Timer(active=bool(status.get("running"))), v.message: "",
                v.estimate: ""}  # the form's estimate is not this evaluation's: its summary has its own

    def on_refresh_past(self, d: dict[Any, Any],
                        request: gr.Request = None) -> dict[Any, Any]:  # type: ignore[assignment]
        try:
            return {**self._past_updates(d.get(self.v.past), self._visitor(request)), self.v.message: ""}
        except Exception as exc:
            return {self.v.message: self._error(exc, "list the evaluations")}


def evaluate_tab(service: StudioService, tabs: gr.Tabs, tab: gr.Tab) -> EvaluateTab | None:
    """Build the tab's components and events inside the current Blocks context (None without a trace store:
    evaluations are stored next to the runs)."""
    if service.trace_store is None:
        gr.Markdown(f"The trace store cannot be opened: {service.trace_error or 'unknown error'}. Evaluations "
                    "are stored in it; fix the database path (--db) to run them.")
        return None
    parts: dict[str, Any] = {"editor_yaml": gr.Textbox(visible="hidden", elem_id="mg-eval-editor-yaml")}
    parts.update(_dataset_section())
    parts.update(_metric_section(service))
    parts.update(_options_row())
    parts.update(_sweep_row())
    parts.update(_actions_row())
    parts.update(_results_section())
    view = EvaluateView(**parts)
    h = EvaluateHandlers(service, view)
    _wire_form(view, h, tab)
    _wire_runs(view, h)
    return EvaluateTab(view=view, handlers=h)


def _dataset_section() -> dict[str, Any]:
    """Section 1: the workflows, the dataset (picked, typed or uploaded), its preview and the column mapping."""
    gr.Markdown("### 1 · Workflows and dataset")
    with gr.Row():
        workflows = gr.Dropdown([("(current editor workflow)", EDITOR)], value=[EDITOR], multiselect=True,
                                label="Workflows to evaluate", elem_id="mg-eval-workflows", scale=4)
        refresh = gr.Button("Refresh lists", elem_id="mg-eval-refresh", scale=0)
    with gr.Row():
        dataset = gr.Dropdown([], label="Dataset (a file, a task preset, or type hf:OWNER/NAME[:CONFIG][@SPLIT])",
                              elem_id="mg-eval-dataset", scale=3, allow_custom_value=True)
        task = gr.Dropdown([("(none)", "")], value="", label="Task preset (makes a file's prompts and references)",
                           elem_id="mg-eval-task", scale=2)
        check_grader = gr.Button("Check the grader", elem_id="mg-eval-check-grader", scale=0, min_width=120)
        upload = gr.File(label="…or upload one (.jsonl, .csv)", file_types=[".jsonl", ".csv"], type="filepath",
                         elem_id="mg-eval-upload", height=140, scale=2)
    dataset_info = gr.Markdown(elem_id="mg-eval-dataset-info")
    preview = gr.Dataframe(interactive=False, elem_id="mg-eval-preview", wrap=True, max_height=220)
    with gr.Row():
        map_slots = tuple(gr.Dropdown([], label=f"input {i + 1}", visible=False, elem_id=f"mg-eval-map-{i}",
                                      min_width=160) for i in range(MAX_MAPPED_INPUTS))
        reference = gr.Dropdown([("(none)", "")], value="", label="Reference column", elem_id="mg-eval-reference",
                                min_width=160)
    check = gr.HTML(elem_id="mg-eval-check")
    return {"workflows": workflows, "refresh": refresh, "dataset": dataset, "task": task, "check_grader": check_grader,
            "upload": upload, "dataset_info": dataset_info, "preview": preview, "columns": gr.State([]),
            "map_names": gr.State([]), "map_slots": map_slots, "reference": reference, "check": check}


def _metric_section(service: StudioService) -> dict[str, Any]:
    """Section 2's first row: the metric (python only where the app allows it), graded output, limit, seed."""
    gr.Markdown("### 2 · Metric and sweep")
    with gr.Row():
        metrics = [m for m in METRICS if m[1] != "python" or service.policy.allow_python]
        if service.policy.allow_code_execution:  # code presets (HumanEval, MBPP) grade with their unit tests
            metrics.append(TESTS_METRIC)
        metric = gr.Dropdown(metrics, value="exact", label="Metric", elem_id="mg-eval-metric", scale=2)
        metric_arg = gr.Textbox(label="Metric argument", elem_id="mg-eval-metric-arg", scale=2,
                                placeholder="regex pattern, python file name or output name")
        output = gr.Textbox(value=DEFAULT_OUTPUT, label="Graded output", elem_id="mg-eval-output", scale=1,
                            info="answer: or the workflow's only output")
        limit = gr.Number(value=0, precision=0, minimum=0, label="Limit (0: all rows)", elem_id="mg-eval-limit",
                          scale=1)
        shuffle = gr.Checkbox(value=False, label="Shuffle", elem_id="mg-eval-shuffle", scale=0, min_width=90)
        seed = gr.Number(value=0, precision=0, label="Seed", elem_id="mg-eval-seed", scale=1)
    return {"metric": metric, "metric_arg": metric_arg, "output": output, "limit": limit, "shuffle": shuffle,
            "seed": seed}


def _options_row() -> dict[str, Any]:
    """Repeats, shared samples, bootstrap resamples and the baseline of the comparisons."""
    with gr.Row():
        repeats = gr.Number(value=1, precision=0, minimum=1, label="Repeats per item", elem_id="mg-eval-repeats",
                            scale=1, info="runs with derived seeds; an item scores the mean")
        share_samples = gr.Checkbox(value=False, label="Share samples across workflows", scale=1,
                                    elem_id="mg-eval-share-samples", info="one draw per prompt for every workflow")
        bootstrap = gr.Number(value=0, precision=0, minimum=0, label="Bootstrap resamples (maj@k, best-of-k)",
                              elem_id="mg-eval-bootstrap", scale=1, info="0: the first k samples")
        baseline = gr.Textbox(label="Baseline (compare every point with it)", elem_id="mg-eval-baseline", scale=2,
                              placeholder="a point label, or a workflow's name or file name; empty: every pair")
    return {"repeats": repeats, "share_samples": share_samples, "bootstrap": bootstrap, "baseline": baseline}


def _sweep_row() -> dict[str, Any]:
    """The sweep: a param picker that adds an axis, and the axes as text."""
    with gr.Row():
        sweep_param = gr.Dropdown([], label="Numeric param to sweep", elem_id="mg-eval-sweep-param", scale=2)
        sweep_add = gr.Button("Add sweep axis", elem_id="mg-eval-sweep-add", scale=0)
        sweeps = gr.Textbox(label=f"Sweep (one NODE.PARAM=v1,v2,... a line, up to {MAX_AXES}; empty: no sweep)",
                            lines=3, max_lines=MAX_AXES, placeholder="think.n=1,2,4,8", elem_id="mg-eval-sweeps",
                            scale=4)
    return {"sweep_param": sweep_param, "sweep_add": sweep_add, "sweeps": sweeps, "sweep_suggested": gr.State("")}


def _actions_row() -> dict[str, Any]:
    """Estimate, Start and Cancel, the message line and the estimate's view."""
    with gr.Row():
        estimate_btn = gr.Button("Estimate", elem_id="mg-eval-estimate", scale=0)
        start_btn = gr.Button("Start", variant="primary", elem_id="mg-eval-start", scale=0)
        cancel_btn = gr.Button("Cancel", variant="stop", elem_id="mg-eval-cancel", scale=0, interactive=False)
    message = gr.HTML(elem_id="mg-eval-message")
    estimate = gr.HTML(elem_id="mg-eval-estimate-view")
    return {"estimate_btn": estimate_btn, "start_btn": start_btn, "cancel_btn": cancel_btn, "message": message,
            "estimate": estimate}


def _results_section() -> dict[str, Any]:
    """Section 3: the evaluation shown (running or past), past ones, progress, plots, summary, items, the timer."""
    gr.Markdown("### 3 · Results")
    with gr.Row():
        past = gr.Dropdown([], label="Evaluation (the running one, or a past one)", elem_id="mg-eval-past", scale=4)
        past_refresh = gr.Button("Refresh", elem_id="mg-eval-past-refresh", scale=0)
    with gr.Accordion("Past evaluations", open=False):
        past_table = gr.Dataframe(headers=PAST_COLUMNS, interactive=False, elem_id="mg-eval-past-table", wrap=True,
                                  max_height=240)
    progress = gr.HTML(elem_id="mg-eval-progress")
    with gr.Row():
        curve = gr.Plot(label="Accuracy", elem_id="mg-eval-plot-curve", visible=False)
        tokens = gr.Plot(label="Accuracy against tokens", elem_id="mg-eval-plot-tokens", visible=False)
    pass_at_k = gr.Plot(label="pass@k", elem_id="mg-eval-plot-pass-at-k", visible=False)
    summary = gr.HTML(elem_id="mg-eval-summary-view")
    items = gr.HTML(elem_id="mg-eval-items-view")
    return {"past": past, "past_refresh": past_refresh, "past_table": past_table, "progress": progress,
            "curve": curve, "tokens": tokens, "pass_at_k": pass_at_k, "summary": summary, "items": items,
            "timer": gr.Timer(POLL_S, active=False)}


def _wire_form(v: EvaluateView, h: EvaluateHandlers, tab: gr.Tab) -> None:
    """Opening the tab, the lists, workflows, dataset, upload, mapping, the grader check and the sweep."""
    form = v.form
    workflow_outputs = [*v.mapping_outputs, v.sweep_param, v.sweeps, v.sweep_suggested, v.message]
    select_outputs = [v.workflows, v.dataset, v.task, v.past, v.past_table, *workflow_outputs]
    dataset_outputs = [v.preview, v.dataset_info, v.columns, *v.mapping_outputs, v.message, v.metric]
    # the editor's YAML is read in the browser when the tab opens, then the lists are refreshed
    tab.select(None, None, [v.editor_yaml], js=READ_EDITOR_JS).then(h.on_select, form, select_outputs)
    v.refresh.click(None, None, [v.editor_yaml], js=READ_EDITOR_JS).then(h.on_select, form, select_outputs)
    v.workflows.input(h.on_workflows, form, workflow_outputs)
    v.dataset.input(h.on_dataset, form, dataset_outputs)
    v.task.input(h.on_task, form, [v.check, v.message, v.metric])
    v.check_grader.click(h.on_check_grader, form, [v.check, v.message])
    v.upload.upload(h.on_upload, form, [v.dataset, *dataset_outputs])
    for slot in (*v.map_slots, v.reference):
        slot.input(h.on_mapping, form, [v.check])
    v.sweep_add.click(h.on_add_axis, form, [v.sweeps, v.message])


def _wire_runs(v: EvaluateView, h: EvaluateHandlers) -> None:
    """Estimate, start, cancel, the progress timer and the evaluation picked (each result hides the estimate)."""
    form, results = v.form, v.results
    past_outputs = [v.past, v.past_table]
    v.estimate_btn.click(h.on_estimate, form, [v.estimate, v.message])
    v.start_btn.click(h.on_start, form, [*results, *past_outputs, v.timer, v.message, v.estimate])
    v.cancel_btn.click(h.on_cancel, form, [*results, v.timer, v.message])
    v.timer.tick(h.on_poll, form, [*results, *past_outputs, v.timer, v.message], show_progress="hidden")
    v.past.input(h.on_past, form, [*results, v.timer, v.message, v.estimate])
    v.past_refresh.click(h.on_refresh_past, form, [*past_outputs, v.message])


def _figure(value: Any) -> dict[str, Any]:
    """A gr.Plot update: the figure, hidden when there is none (or the view failed)."""
    if value is None or isinstance(value, str):
        return gr.update(value=None, visible=False)
    return gr.update(value=value, visible=True)
