"""The Evaluate tab: pick workflows (the editor's one included) and a dataset, map columns to inputs, choose a
metric and a sweep, see the cost estimate, run the evaluation with live progress, and look at past ones."""

from __future__ import annotations

import html
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import gradio as gr

from app import viz
from app.eval.sweep import numeric_params
from app.service.errors import UserError
from app.service.studio import StudioService
from app.ui.models_tab import human_size
from app.viz.common import wrap_section
from app.workflow.spec import Workflow, load_workflow_text

log = logging.getLogger(__name__)

EDITOR = "editor"
"""The multiselect value of the editor's current workflow (saved files are `saved:NAME`, examples `example:NAME`)."""
SAVED, EXAMPLE = "saved:", "example:"
MAX_MAPPED_INPUTS = 6
"""Column dropdowns shown for the first workflow's inputs; further inputs take the column of their own name."""
MAX_AXES = 3
DEFAULT_OUTPUT = "answer"
POLL_S = 1.0
METRICS = [("exact match", "exact"), ("number (numeric equality)", "number"), ("contains the reference", "contains"),
           ("regex (pattern below; empty: the reference is the pattern)", "regex"),
           ("python file (its name below)", "python"), ("a workflow output (its name below)", "output")]
METRICS_WITH_ARGUMENT = {"python": "the metric file's name, e.g. instructions_metric.py",
                         "output": "the workflow output that holds the grade, e.g. passed"}
PAST_COLUMNS = ["id", "name", "status", "runs", "dataset", "created"]
FINISHED = ("succeeded", "failed", "cancelled")
NO_DEFAULT = ""
"""The mapping dropdowns' value for "leave the input to its default"."""
COUNT_LIKE = ("n", "samples", "beam_width", "expand_k", "max_depth", "min_samples", "batch_size", "max_iters")

READ_EDITOR_JS = """() => {
  const ui = window.MetagenUI;
  if (ui && ui.currentYaml) return ui.currentYaml();
  const pane = document.querySelector('[data-testid=yaml-editor]');
  return pane ? pane.value : '';
}"""


# ------------------------------------------------------------------ small helpers


def message_html(text: str, kind: str = "info") -> str:
    """A message box (kind: info, ok, error); the text is escaped and keeps its line breaks."""
    if not text:
        return ""
    color = {"error": "#b91c1c", "ok": "#047857"}.get(kind, "inherit")
    return (f'<div class="mg-eval-msg mg-eval-{kind}" style="white-space:pre-wrap;color:{color};padding:4px 0">'
            f"{html.escape(text, quote=False)}</div>")


def _safe(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a viz function; a failure becomes a message instead of breaking the tab."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        log.exception("viz %s failed", getattr(fn, "__name__", fn))
        return message_html(f"could not draw this view ({type(exc).__name__}: {exc})", "error")


def _figure(value: Any) -> dict[str, Any]:
    """A gr.Plot update: the figure, hidden when there is none (or the view failed)."""
    if value is None or isinstance(value, str):
        return gr.update(value=None, visible=False)
    return gr.update(value=value, visible=True)


def run_link(run_id: str) -> str:
    """A link that opens the run in the Traces tab (app/ui/share_links.py reads `?run=` on page load)."""
    return "?run=" + quote(str(run_id), safe="")


def duration(seconds: Any) -> str:
    if not isinstance(seconds, int | float) or not math.isfinite(seconds):
        return "-"
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _number(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return html.escape(str(value))


def _cell(value: Any) -> Any:
    """A dataset cell for the preview table (lists and objects as JSON text)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    import json

    return json.dumps(value, ensure_ascii=False)


# ------------------------------------------------------------------ workflows


def editor_workflow(editor_yaml: str | None) -> Workflow | None:
    """The editor's workflow when its YAML loads and has nodes, else None."""
    if not (editor_yaml or "").strip():
        return None
    try:
        wf = load_workflow_text(editor_yaml or "")
    except Exception:
        return None
    return wf if wf.nodes else None


def workflow_choices(service: StudioService, editor_yaml: str | None) -> list[tuple[str, str]]:
    """(label, value) of the editor's workflow, the saved workflows and the examples not saved under their name."""
    current = editor_workflow(editor_yaml)
    label = "(current editor workflow" + (f": {current.name})" if current is not None else ")")
    saved = service.list_workflows()
    choices = [(label, EDITOR)] + [(name, SAVED + name) for name in saved]
    choices += [(f"{name} (example)", EXAMPLE + name) for name in service.list_examples() if name not in saved]
    return choices


def selected_workflows(service: StudioService, picked: list[str] | None,
                       editor_yaml: str | None) -> list[dict[str, str]]:
    """The request's [{name, yaml}] for the picked choices; UserError when one cannot be read."""
    chosen = [p for p in (picked or []) if p]
    if not chosen:
        raise UserError("pick at least one workflow to evaluate")
    out = []
    for value in chosen:
        if value == EDITOR:
            text = editor_yaml or ""
            current = editor_workflow(text)
            if current is None:
                raise UserError("the editor has no workflow to evaluate (it is empty or its YAML does not load); "
                                "open one in the Editor tab or pick a saved workflow or example")
            out.append({"name": f"{current.name} (editor)", "yaml": text})
        elif value.startswith(SAVED):
            name = value[len(SAVED):]
            out.append({"name": name, "yaml": service.read_workflow_text(name)})
        elif value.startswith(EXAMPLE):
            name = value[len(EXAMPLE):]
            out.append({"name": f"{name} (example)", "yaml": service.read_example_text(name)})
        else:
            raise UserError(f"unknown workflow choice {value!r}; refresh the list")
    return out


def _loaded(workflows: list[dict[str, str]]) -> list[Workflow]:
    """The workflows that load (the others are reported by the plan check)."""
    found = []
    for w in workflows:
        try:
            found.append(load_workflow_text(w["yaml"]))
        except Exception:
            log.debug("workflow %s does not load", w.get("name"))
    return found


def _try_selected(service: StudioService, picked: list[str] | None, editor_yaml: str | None) -> list[Workflow]:
    try:
        return _loaded(selected_workflows(service, picked, editor_yaml))
    except UserError:
        return []


# ------------------------------------------------------------------ sweeps


def suggest_values(service: StudioService, workflow: Workflow, node_id: str, param: str, current: Any) -> list[Any]:
    """A few values worth trying for a numeric param (accepted by the param's own range check)."""
    node = workflow.node(node_id)
    cls = service.registry.get(node.kind) if node is not None else None
    spec = cls.param(param) if cls is not None else None
    is_int = spec is not None and spec.type == "int"
    values: list[Any]
    if is_int or isinstance(current, int):
        v = int(current) if isinstance(current, int | float) and not isinstance(current, bool) else 1
        if param in COUNT_LIKE:
            top = max(v, 8 if param == "n" else 4)
            values = [2 ** k for k in range(0, 10) if 2 ** k <= top]
            values = values[-5:] if len(values) > 5 else values
        else:
            values = sorted({max(1, v // 2), max(v, 1), max(v, 1) * 2})
    else:
        v = float(current) if isinstance(current, int | float) and not isinstance(current, bool) else 1.0
        values = sorted({round(v * f, 3) for f in (0.5, 1.0, 1.5)}) if v else [0.0, 0.5, 1.0]
    if spec is not None:
        values = [x for x in values if spec.check(x) is None] or [current]
    return values


def sweep_line(key: str, values: list[Any]) -> str:
    return f"{key}=" + ",".join(str(v) for v in values)


def sweep_options(service: StudioService, workflows: list[Workflow]) -> tuple[list[tuple[str, str]], str]:
    """(choices "node.param" with their current value, a suggested sweep line: the first sampler's n)."""
    choices: dict[str, str] = {}
    suggestion = ""
    for wf in workflows:
        for node_id, param, current in numeric_params(wf, service.registry):
            key = f"{node_id}.{param}"
            choices.setdefault(key, f"{key} (now {current})")
            node = wf.node(node_id)
            if not suggestion and param == "n" and node is not None and node.kind == "sampler":
                suggestion = sweep_line(key, suggest_values(service, wf, node_id, param, current))
    return [(label, key) for key, label in choices.items()], suggestion


def add_axis(service: StudioService, workflows: list[Workflow], key: str | None, text: str | None) -> tuple[str, str]:
    """(new sweep text, message) after adding an axis for `key` with suggested values."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not key:
        return text or "", "Pick a numeric param to sweep first."
    if any(line.partition("=")[0].strip() == key for line in lines):
        return text or "", f"{key} is swept already; edit its values in the box."
    if len(lines) >= MAX_AXES:
        return text or "", f"At most {MAX_AXES} sweep axes; remove one first."
    node_id, _, param = key.partition(".")
    for wf in workflows:
        for nid, name, current in numeric_params(wf, service.registry):
            if nid == node_id and name == param:
                lines.append(sweep_line(key, suggest_values(service, wf, nid, name, current)))
                return "\n".join(lines), ""
    return text or "", f"None of the picked workflows has {key}."


def parse_sweeps(text: str | None) -> list[str]:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if len(lines) > MAX_AXES:
        raise UserError(f"{len(lines)} sweep lines; at most {MAX_AXES} axes (one NODE.PARAM=v1,v2,... a line)")
    return lines


# ------------------------------------------------------------------ request, estimate, progress


def metric_spec(kind: str | None, argument: str | None) -> str:
    kind = (kind or "exact").strip()
    arg = (argument or "").strip()
    if kind in METRICS_WITH_ARGUMENT:
        if not arg:
            raise UserError(f"the {kind} metric needs an argument: {METRICS_WITH_ARGUMENT[kind]}")
        return f"{kind}:{arg}"
    if kind == "regex" and arg:
        return f"regex:{arg}"
    return kind


def build_request(service: StudioService, *, picked: list[str] | None, editor_yaml: str | None,
                  dataset: str | None, mapping: dict[str, str] | None = None, reference: str | None = None,
                  metric: str | None = "exact", metric_arg: str | None = "", output: str | None = DEFAULT_OUTPUT,
                  limit: Any = 0, shuffle: bool = False, seed: Any = 0, sweeps: str | None = "") -> dict[str, Any]:
    """The service's evaluation request from the form's values (UserError for what the form itself can tell)."""
    if not dataset:
        raise UserError("pick a dataset or upload one (.jsonl or .csv)")
    graded = (output or "").strip()
    try:
        limit_n = int(limit or 0)
        seed_n = int(seed or 0)
    except (TypeError, ValueError):
        raise UserError("limit and seed must be whole numbers") from None
    if limit_n < 0:
        raise UserError("limit must be 0 (all rows) or more")
    return {
        "workflows": selected_workflows(service, picked, editor_yaml), "dataset": dataset,
        "metric": metric_spec(metric, metric_arg),
        # `answer` is also the plan's default, which falls back to a workflow's only output when it has no answer
        "output": None if graded in ("", DEFAULT_OUTPUT) else graded,
        "sweeps": parse_sweeps(sweeps), "mapping": {k: v for k, v in (mapping or {}).items() if v},
        "reference": reference or None, "limit": limit_n or None, "shuffle": bool(shuffle), "seed": seed_n,
    }


def estimate_html(result: dict[str, Any]) -> str:
    """The estimate as a small table: runs, LM calls, completion tokens, time, and its assumptions."""
    est = result.get("estimate") or {}
    rows = [
        ("runs", f"{_number(result.get('tasks'))} ({_number(est.get('items'))} items × sweep points × workflows)"),
        ("LM calls (at most)", _number(est.get("lm_calls"))),
        ("completion tokens", f"expected {_number(est.get('expected_completion_tokens'))} · "
                              f"at most {_number(est.get('max_completion_tokens'))}"),
        ("prompt tokens", _number(est.get("prompt_tokens"))),
        ("time on this machine", f"expected {duration(est.get('expected_s'))} · at most {duration(est.get('max_s'))}"),
        ("decode speed", f"{_number(est.get('decode_tokens_per_s'))} tokens/s at batch {_number(est.get('batch'))}"
                         + ("" if est.get("calibrated") else " (not measured here yet)")),
    ]
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{v}</td></tr>" for k, v in rows)
    note = (f'<p class="mg-muted">Assumptions: {html.escape(str(est["assumptions"]))}</p>'
            if est.get("assumptions") else "")
    return wrap_section(f'<h3>Estimate</h3><table id="mg-eval-estimate-table">{body}</table>{note}')


def progress_html(status: dict[str, Any]) -> str:
    """The progress line: runs done of all, % correct so far, ETA; data-state is running or done."""
    summary = status.get("summary") or {}
    done, total = int(status.get("done") or 0), int(status.get("total") or 0)
    points = summary.get("points") or []
    graded = sum(int(p.get("total") or 0) for p in points)
    correct = sum(int(p.get("correct") or 0) for p in points)
    share = f"{100 * correct / graded:.0f}% correct" if graded else "nothing graded yet"
    pct = f" ({100 * done / total:.0f}%)" if total else ""
    running = bool(status.get("running"))
    name = summary.get("name") or status.get("eval_id")
    if running:
        eta = status.get("eta_s")
        text = (f"Running {name}: {done} of {total} runs done{pct} · {share} so far"
                + (f" · about {duration(eta)} left" if eta is not None else ""))
    else:
        word = "Done" if status.get("status") in FINISHED else "Not running here"  # e.g. interrupted
        text = f"{word} ({status.get('status')}): {name}: {done} of {total} runs{pct} · {share}"
        if summary.get("error"):
            text += f" · {summary['error']}"
    state = "running" if running else "done"
    bar = f'<progress value="{done}" max="{max(total, 1)}" style="width:100%"></progress>'
    return (f'<div class="mg-eval-progress" data-state="{state}" data-status="{html.escape(str(status.get("status")))}"'
            f' data-eval="{html.escape(str(status.get("eval_id")))}">{bar}<div>{html.escape(text)}</div></div>')


def past_rows(service: StudioService) -> tuple[list[list[Any]], list[tuple[str, str]]]:
    """Rows of the past-evaluations table (newest first) and the picker's (label, id) choices."""
    rows, choices = [], []
    for e in service.evaluations.list():
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.get("created_at") or 0))
        runs = f"{e.get('done', 0)}/{e.get('total', 0)}"
        rows.append([e["id"], e.get("name", ""), e.get("status", ""), runs, e.get("dataset", ""), created])
        choices.append((f"{e['id']} · {e.get('name', '')} · {e.get('status', '')} · {runs} · {created}", e["id"]))
    return rows, choices


def dataset_choices(service: StudioService) -> list[tuple[str, str]]:
    out = []
    for d in service.evaluations.list_datasets():
        folder = d.get("folder") or ""
        where = folder if folder == "uploads" else Path(folder).name or folder
        out.append((f"{d['name']} ({where}, {human_size(d.get('size_bytes'))})", d["name"]))
    return out


# ------------------------------------------------------------------ the tab


@dataclass(frozen=True)
class EvaluateView:
    """Every component of the tab (the handlers read and update them by component)."""

    editor_yaml: gr.Textbox
    workflows: gr.Dropdown
    refresh: gr.Button
    dataset: gr.Dropdown
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
        return {self.editor_yaml, self.workflows, self.dataset, self.upload, self.columns, self.map_names,
                *self.map_slots, self.reference, self.metric, self.metric_arg, self.output, self.limit, self.shuffle,
                self.seed, self.sweep_param, self.sweeps, self.sweep_suggested, self.past}

    @property
    def results(self) -> list[Any]:
        return [self.progress, self.curve, self.tokens, self.pass_at_k, self.summary, self.items]

    @property
    def mapping_outputs(self) -> list[Any]:
        return [self.map_names, *self.map_slots, self.reference, self.check]


@dataclass(frozen=True)
class EvaluateTab:
    """What other parts of the page (and tests) use: the components and the handlers behind them."""

    view: EvaluateView
    handlers: EvaluateHandlers


class EvaluateHandlers:
    """The tab's event handlers: each takes the form as {component: value} and returns {component: update}."""

    def __init__(self, service: StudioService, view: EvaluateView) -> None:
        self.service = service
        self.v = view

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
                             sweeps=d.get(v.sweeps))

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

    def _check(self, d: dict[Any, Any], mapping: dict[str, str] | None = None,
               reference: str | None = None) -> str:
        """Whether every row fills the picked workflows' inputs (the plan check, without the sweep)."""
        dataset = d.get(self.v.dataset)
        if not dataset or not self._picked(d):
            return ""
        try:
            workflows = selected_workflows(self.service, self._picked(d), d.get(self.v.editor_yaml))
            plan = self.service.evaluations.plan({"workflows": workflows, "dataset": dataset, "metric": "exact",
                                                  "mapping": mapping if mapping is not None else self._mapping(d),
                                                  "reference": reference if reference is not None
                                                  else d.get(self.v.reference) or None})
        except Exception as exc:
            return self._error(exc, "check the dataset")
        rows = len(plan.dataset.rows)
        return message_html(f"All {rows} rows fill the inputs of {len(plan.workflows)} workflow"
                            f"{'s' if len(plan.workflows) != 1 else ''}.", "ok")

    def _workflow_updates(self, d: dict[Any, Any], picked: list[str]) -> dict[Any, Any]:
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
        out[v.check] = self._check({**d, v.workflows: picked}, mapping, out[v.reference]["value"] or None)
        return out

    def on_select(self, d: dict[Any, Any]) -> dict[Any, Any]:
        """The tab was opened: fresh lists of workflows, datasets and past evaluations."""
        v = self.v
        editor = d.get(v.editor_yaml)
        choices = workflow_choices(self.service, editor)
        values = {value for _, value in choices}
        picked = [p for p in self._picked(d) if p in values]
        if EDITOR in picked and editor_workflow(editor) is None:
            picked.remove(EDITOR)  # an empty editor is nothing to evaluate
        out: dict[Any, Any] = {v.workflows: gr.update(choices=choices, value=picked), v.message: ""}
        problems = []
        try:
            datasets = dataset_choices(self.service)
            names = [value for _, value in datasets]
            out[v.dataset] = gr.update(choices=datasets, value=d.get(v.dataset) if d.get(v.dataset) in names else None)
        except Exception as exc:
            problems.append(self._error(exc, "list the datasets"))
        try:
            out.update(self._past_updates(d.get(v.past)))
        except Exception as exc:
            problems.append(self._error(exc, "list the past evaluations"))
        out.update(self._workflow_updates(d, picked))
        if problems:
            out[v.message] = "".join(problems)
        return out

    def on_workflows(self, d: dict[Any, Any]) -> dict[Any, Any]:
        return {**self._workflow_updates(d, self._picked(d)), self.v.message: ""}

    def _dataset_updates(self, d: dict[Any, Any], name: str | None,
                         preview: dict[str, Any] | None = None) -> dict[Any, Any]:
        v = self.v
        if not name:
            return {v.preview: gr.update(value=None), v.dataset_info: "", v.columns: [], v.check: "",
                    **self._mapping_updates(_try_selected(self.service, self._picked(d), d.get(v.editor_yaml)), [])}
        try:
            preview = preview or self.service.evaluations.preview(name)
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
        out[v.check] = self._check({**d, v.dataset: name}, mapping, out[v.reference]["value"] or None)
        return out

    def on_dataset(self, d: dict[Any, Any]) -> dict[Any, Any]:
        return {**self._dataset_updates(d, d.get(self.v.dataset)), self.v.message: ""}

    def on_upload(self, d: dict[Any, Any]) -> dict[Any, Any]:
        v = self.v
        path = d.get(v.upload)
        if not path:
            return {}
        path = getattr(path, "name", path)  # a file object from older Gradio versions
        try:
            data = Path(path).read_bytes()
            added = self.service.evaluations.upload_dataset(Path(path).name, data)
        except Exception as exc:
            return {v.message: self._error(exc, "upload the dataset")}
        out = {v.dataset: gr.update(choices=dataset_choices(self.service), value=added["name"])}
        out.update(self._dataset_updates({**d, v.dataset: added["name"]}, added["name"], added))
        out[v.message] = message_html(f"Uploaded {added['name']} ({added['count']} rows).", "ok")
        return out

    def on_mapping(self, d: dict[Any, Any]) -> dict[Any, Any]:
        return {self.v.check: self._check(d)}

    def on_add_axis(self, d: dict[Any, Any]) -> dict[Any, Any]:
        v = self.v
        loaded = _try_selected(self.service, self._picked(d), d.get(v.editor_yaml))
        text, note = add_axis(self.service, loaded, d.get(v.sweep_param), d.get(v.sweeps))
        return {v.sweeps: text, v.message: message_html(note, "error") if note else ""}

    # ---------------------------------------------------------------- estimate, start, cancel, progress

    def on_estimate(self, d: dict[Any, Any]) -> dict[Any, Any]:
        v = self.v
        try:
            result = self.service.evaluations.estimate(self.request(d))
        except Exception as exc:
            return {v.estimate: "", v.message: self._error(exc, "estimate the evaluation")}
        return {v.estimate: estimate_html(result), v.message: ""}

    def _views(self, status: dict[str, Any]) -> dict[Any, Any]:
        """Progress line, the three plots, the summary and the items table of one status."""
        v = self.v
        summary = status.get("summary") or {}
        return {
            v.progress: progress_html(status),
            v.curve: _figure(_safe(viz.accuracy_curve_figure, summary)),
            v.tokens: _figure(_safe(viz.accuracy_tokens_figure, summary)),
            v.pass_at_k: _figure(_safe(viz.pass_at_k_figure, summary)),
            v.summary: _safe(viz.evaluation_summary_html, summary) or "",
            v.items: _safe(viz.items_table_html, summary, run_link=run_link) or "",
        }

    def _past_updates(self, current: str | None) -> dict[Any, Any]:
        rows, choices = past_rows(self.service)
        return {self.v.past_table: gr.update(value=rows), self.v.past: gr.update(choices=choices, value=current)}

    def on_start(self, d: dict[Any, Any]) -> dict[Any, Any]:
        v = self.v
        try:
            status = self.service.evaluations.start(self.request(d))
        except Exception as exc:
            return {v.message: self._error(exc, "start the evaluation")}
        out = {**self._views(status), **self._past_updates(status["eval_id"])}
        out[v.timer] = gr.Timer(active=bool(status.get("running")))
        out[v.message] = message_html(f"Started evaluation {status['eval_id']}: {status.get('total', 0)} runs.", "ok")
        return out

    def on_cancel(self, d: dict[Any, Any]) -> dict[Any, Any]:
        v = self.v
        eval_id = d.get(v.past)
        if not eval_id:
            return {v.message: message_html("No evaluation is picked.", "error")}
        try:
            status = self.service.evaluations.status(eval_id)
            if not status.get("running"):
                return {v.message: message_html(f"Evaluation {eval_id} is not running ({status.get('status')}).")}
            status = self.service.evaluations.cancel(eval_id)
        except Exception as exc:
            return {v.message: self._error(exc, "cancel the evaluation")}
        return {**self._views(status), v.timer: gr.Timer(active=True),
                v.message: message_html(f"Cancelling {eval_id}: runs in flight stop, finished items are kept.")}

    def on_poll(self, d: dict[Any, Any]) -> dict[Any, Any]:
        """The timer: the picked evaluation's progress; the timer stops once it is not running."""
        v = self.v
        eval_id = d.get(v.past)
        if not eval_id:
            return {v.timer: gr.Timer(active=False)}
        try:
            status = self.service.evaluations.status(eval_id)
        except Exception as exc:
            return {v.timer: gr.Timer(active=False), v.message: self._error(exc, "read the evaluation's progress")}
        out = self._views(status)
        if not status.get("running"):
            out[v.timer] = gr.Timer(active=False)
            out.update(self._past_updates(eval_id))
        return out

    def on_past(self, d: dict[Any, Any]) -> dict[Any, Any]:
        """Show a past (or running) evaluation in the same views."""
        v = self.v
        eval_id = d.get(v.past)
        if not eval_id:
            return {v.timer: gr.Timer(active=False)}
        try:
            status = self.service.evaluations.status(eval_id)
        except Exception as exc:
            return {v.message: self._error(exc, "open the evaluation"), v.timer: gr.Timer(active=False)}
        return {**self._views(status), v.timer: gr.Timer(active=bool(status.get("running"))), v.message: ""}

    def on_refresh_past(self, d: dict[Any, Any]) -> dict[Any, Any]:
        try:
            return {**self._past_updates(d.get(self.v.past)), self.v.message: ""}
        except Exception as exc:
            return {self.v.message: self._error(exc, "list the evaluations")}


def evaluate_tab(service: StudioService, tabs: gr.Tabs, tab: gr.Tab) -> EvaluateTab | None:
    """Build the tab's components and events inside the current Blocks context (None without a trace store:
    evaluations are stored next to the runs)."""
    if service.trace_store is None:
        gr.Markdown(f"The trace store cannot be opened: {service.trace_error or 'unknown error'}. Evaluations "
                    "are stored in it; fix the database path (--db) to run them.")
        return None
    editor_yaml = gr.Textbox(visible="hidden", elem_id="mg-eval-editor-yaml")
    gr.Markdown("### 1 · Workflows and dataset")
    with gr.Row():
        workflows = gr.Dropdown([("(current editor workflow)", EDITOR)], value=[EDITOR], multiselect=True,
                                label="Workflows to evaluate", elem_id="mg-eval-workflows", scale=4)
        refresh = gr.Button("Refresh lists", elem_id="mg-eval-refresh", scale=0)
    with gr.Row():
        dataset = gr.Dropdown([], label="Dataset", elem_id="mg-eval-dataset", scale=3)
        upload = gr.File(label="…or upload one (.jsonl, .csv)", file_types=[".jsonl", ".csv"], type="filepath",
                         elem_id="mg-eval-upload", height=90, scale=2)
    dataset_info = gr.Markdown(elem_id="mg-eval-dataset-info")
    preview = gr.Dataframe(interactive=False, elem_id="mg-eval-preview", wrap=True, max_height=220)
    with gr.Row():
        map_slots = tuple(gr.Dropdown([], label=f"input {i + 1}", visible=False, elem_id=f"mg-eval-map-{i}",
                                      min_width=160) for i in range(MAX_MAPPED_INPUTS))
        reference = gr.Dropdown([("(none)", "")], value="", label="Reference column", elem_id="mg-eval-reference",
                                min_width=160)
    check = gr.HTML(elem_id="mg-eval-check")
    gr.Markdown("### 2 · Metric and sweep")
    with gr.Row():
        metrics = [m for m in METRICS if m[1] != "python" or service.policy.allow_python]
        metric = gr.Dropdown(metrics, value="exact", label="Metric", elem_id="mg-eval-metric", scale=2)
        metric_arg = gr.Textbox(label="Metric argument", elem_id="mg-eval-metric-arg", scale=2,
                                placeholder="regex pattern, python file name or output name")
        output = gr.Textbox(value=DEFAULT_OUTPUT, label="Graded output", elem_id="mg-eval-output", scale=1,
                            info="answer: or the workflow's only output")
        limit = gr.Number(value=0, precision=0, minimum=0, label="Limit (0: all rows)", elem_id="mg-eval-limit",
                          scale=1)
        shuffle = gr.Checkbox(value=False, label="Shuffle", elem_id="mg-eval-shuffle", scale=0, min_width=90)
        seed = gr.Number(value=0, precision=0, label="Seed", elem_id="mg-eval-seed", scale=1)
    with gr.Row():
        sweep_param = gr.Dropdown([], label="Numeric param to sweep", elem_id="mg-eval-sweep-param", scale=2)
        sweep_add = gr.Button("Add sweep axis", elem_id="mg-eval-sweep-add", scale=0)
        sweeps = gr.Textbox(label=f"Sweep (one NODE.PARAM=v1,v2,... a line, up to {MAX_AXES}; empty: no sweep)",
                            lines=3, max_lines=MAX_AXES, placeholder="think.n=1,2,4,8", elem_id="mg-eval-sweeps",
                            scale=4)
    with gr.Row():
        estimate_btn = gr.Button("Estimate", elem_id="mg-eval-estimate", scale=0)
        start_btn = gr.Button("Start", variant="primary", elem_id="mg-eval-start", scale=0)
        cancel_btn = gr.Button("Cancel", variant="stop", elem_id="mg-eval-cancel", scale=0)
    message = gr.HTML(elem_id="mg-eval-message")
    estimate = gr.HTML(elem_id="mg-eval-estimate-view")
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
    timer = gr.Timer(POLL_S, active=False)

    view = EvaluateView(
        editor_yaml=editor_yaml, workflows=workflows, refresh=refresh, dataset=dataset, upload=upload,
        dataset_info=dataset_info, preview=preview, columns=gr.State([]), map_names=gr.State([]), map_slots=map_slots,
        reference=reference, check=check, metric=metric, metric_arg=metric_arg, output=output, limit=limit,
        shuffle=shuffle, seed=seed, sweep_param=sweep_param, sweep_add=sweep_add, sweeps=sweeps,
        sweep_suggested=gr.State(""), estimate_btn=estimate_btn, start_btn=start_btn, cancel_btn=cancel_btn,
        estimate=estimate, message=message, past=past, past_refresh=past_refresh, past_table=past_table,
        progress=progress, curve=curve, tokens=tokens, pass_at_k=pass_at_k, summary=summary, items=items, timer=timer)
    h = EvaluateHandlers(service, view)
    _wire(view, h, tab)
    return EvaluateTab(view=view, handlers=h)


def _wire(v: EvaluateView, h: EvaluateHandlers, tab: gr.Tab) -> None:
    form = v.form
    workflow_outputs = [*v.mapping_outputs, v.sweep_param, v.sweeps, v.sweep_suggested, v.message]
    select_outputs = [v.workflows, v.dataset, v.past, v.past_table, *workflow_outputs]
    dataset_outputs = [v.preview, v.dataset_info, v.columns, *v.mapping_outputs, v.message]
    results = v.results
    past_outputs = [v.past, v.past_table]
    # the editor's YAML is read in the browser when the tab opens, then the lists are refreshed
    tab.select(None, None, [v.editor_yaml], js=READ_EDITOR_JS).then(h.on_select, form, select_outputs)
    v.refresh.click(None, None, [v.editor_yaml], js=READ_EDITOR_JS).then(h.on_select, form, select_outputs)
    v.workflows.input(h.on_workflows, form, workflow_outputs)
    v.dataset.input(h.on_dataset, form, dataset_outputs)
    v.upload.upload(h.on_upload, form, [v.dataset, *dataset_outputs])
    for slot in (*v.map_slots, v.reference):
        slot.input(h.on_mapping, form, [v.check])
    v.sweep_add.click(h.on_add_axis, form, [v.sweeps, v.message])
    v.estimate_btn.click(h.on_estimate, form, [v.estimate, v.message])
    v.start_btn.click(h.on_start, form, [*results, *past_outputs, v.timer, v.message])
    v.cancel_btn.click(h.on_cancel, form, [*results, v.timer, v.message])
    v.timer.tick(h.on_poll, form, [*results, *past_outputs, v.timer, v.message], show_progress="hidden")
    v.past.input(h.on_past, form, [*results, v.timer, v.message])
    v.past_refresh.click(h.on_refresh_past, form, [*past_outputs, v.message])
