"""The Evaluate tab's form and readouts without Gradio components: workflow and dataset choices, the sweep
lines, the request sent to the evaluation service, and the HTML of the estimate and the progress."""

from __future__ import annotations

import html
import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from app.eval.sweep import numeric_params
from app.run.status import CANCELLED, FAILED, SUCCEEDED
from app.service.errors import UserError
from app.service.studio import StudioService
from app.ui.models_tab import human_size
from app.viz.common import wrap_section
from app.workflow.spec import Workflow, load_workflow_text
from app.workflow.subworkflows import descendants
from app.workflow.validation import check

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
           ("math (LaTeX equivalence, math-verify)", "math"), ("choice (the option letter)", "choice"),
           ("regex (pattern below; empty: the reference is the pattern)", "regex"),
           ("python file (its name below)", "python"), ("a workflow output (its name below)", "output")]
TESTS_METRIC = ("tests (the code's unit tests run)", "tests")
"""Offered where the app allows code execution (not a shared app's default)."""
METRICS_WITH_ARGUMENT = {"python": "the metric file's name, e.g. instructions_metric.py",
                         "output": "the workflow output that holds the grade, e.g. passed"}
PAST_COLUMNS = ["id", "name", "status", "runs", "dataset", "created"]
FINISHED = (SUCCEEDED, FAILED, CANCELLED)
NO_DEFAULT = ""
"""The mapping dropdowns' value for "leave the input to its default"."""
COUNT_LIKE = ("n", "samples", "beam_width", "expand_k", "max_depth", "min_samples", "batch_size", "max_iters",
              "subtrees", "particles", "simulations", "think_budget", "think_min")
READ_EDITOR_JS = """() => {
  const ui = window.MetagenUI;
  if (ui && ui.currentYaml) return ui.currentYaml();
  const pane = document.querySelector('[data-testid=yaml-editor]');
  return pane ? pane.value : '';
}"""


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
            out.append({"name": f"{current.name} (editor)", "yaml": text, "origin": "editor"})
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


def sweepable(service: StudioService, wf: Workflow) -> list[tuple[str, Workflow, str, str, Any]]:
    """(key, the workflow holding the node, node id, param, current value) of every numeric param of the workflow
    and of its sub-workflows (keyed NODE/CHILD_NODE.param), children that do not load left out."""
    found = [(f"{n}.{p}", wf, n, p, v) for n, p, v in numeric_params(wf, service.registry)]
    try:
        checked = check(wf, service.registry, service.scheduler.children)
    except Exception:  # a broken child is reported when the evaluation is checked; here it offers nothing
        log.debug("no sub-workflow params for %s", wf.name, exc_info=True)
        return found
    for path, child in descendants(checked):
        found += [(f"{path}/{n}.{p}", child.workflow, n, p, v)
                  for n, p, v in numeric_params(child.workflow, service.registry)]
    return found


def sweep_options(service: StudioService, workflows: list[Workflow]) -> tuple[list[tuple[str, str]], str]:
    """(choices "node.param" with their current value, a suggested sweep line: the first sampler's n)."""
    choices: dict[str, str] = {}
    suggestion = ""
    for top in workflows:
        for key, wf, node_id, param, current in sweepable(service, top):
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
    for top in workflows:
        for found, wf, nid, name, current in sweepable(service, top):
            if found == key:
                lines.append(sweep_line(key, suggest_values(service, wf, nid, name, current)))
                return "\n".join(lines), ""
    return text or "", f"None of the picked workflows has {key}."


def parse_sweeps(text: str | None) -> list[str]:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if len(lines) > MAX_AXES:
        raise UserError(f"{len(lines)} sweep lines; at most {MAX_AXES} axes (one NODE.PARAM=v1,v2,... a line)")
    return lines


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
                  limit: Any = 0, shuffle: bool = False, seed: Any = 0, sweeps: str | None = "",
                  share_samples: bool = False, bootstrap: Any = 0, repeats: Any = 1,
                  baseline: str | None = "", task: str | None = "") -> dict[str, Any]:
    """The service's evaluation request from the form's values (UserError for what the form itself can tell). A
    `task` preset picked beside a file dataset makes that file's prompts and references (a local copy of the
    preset's Hub dataset)."""
    if not dataset and not task:
        raise UserError("pick a dataset or a task preset, upload one (.jsonl, .csv, .json or .parquet), or type a "
                        "Hub dataset hf:OWNER/NAME[:CONFIG][@SPLIT]")
    graded = (output or "").strip()
    try:
        limit_n = int(limit or 0)
        seed_n = int(seed or 0)
    except (TypeError, ValueError):
        raise UserError("limit and seed must be whole numbers") from None
    if limit_n < 0:
        raise UserError("limit must be 0 (all rows) or more")
    return {
        "workflows": selected_workflows(service, picked, editor_yaml), "dataset": dataset or None,
        "task": (task or "").strip().removeprefix("task:") or None,
        "metric": metric_spec(metric, metric_arg),
        # `answer` is also the plan's default, which falls back to a workflow's only output when it has no answer
        "output": None if graded in ("", DEFAULT_OUTPUT) else graded,
        "sweeps": parse_sweeps(sweeps), "mapping": {k: v for k, v in (mapping or {}).items() if v},
        "reference": reference or None, "limit": limit_n or None, "shuffle": bool(shuffle), "seed": seed_n,
        # checked by the service's plan (apply_options), which names the allowed range
        "share_samples": bool(share_samples), "bootstrap": 0 if bootstrap is None else bootstrap,
        "repeats": 1 if repeats is None else repeats,
        "baseline": (baseline or "").strip() or None,
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
                         + (f" ({est['speed_source']})" if est.get("speed_source")
                            else "" if est.get("calibrated") else " (not measured here yet)")),
    ]
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{v}</td></tr>" for k, v in rows)
    note = (f'<p class="mg-muted">Assumptions: {html.escape(str(est["assumptions"]))}</p>'
            if est.get("assumptions") else "")
    return wrap_section(f'<h3>Estimate</h3><table id="mg-eval-estimate-table">{body}</table>{note}')


def _taken_against_estimate(summary: dict[str, Any]) -> str:
    """' · took 3 min 19 s (estimated 3 min 30 s)': the time an evaluation took beside its one pre-run estimate."""
    taken = summary.get("elapsed_s")
    if taken is None:
        return ""
    expected = (summary.get("estimate") or {}).get("expected_s")
    return f" · took {duration(taken)}" + (f" (estimated {duration(expected)})" if expected is not None else "")


def progress_html(status: dict[str, Any]) -> str:
    """The progress line: runs done of all, % correct so far, ETA; data-state is running or done."""
    summary = status.get("summary") or {}
    done, total = int(status.get("done") or 0), int(status.get("total") or 0)
    points = summary.get("points") or []
    graded = sum(int(p.get("total") or 0) for p in points)
    correct = sum(int(p.get("correct") or 0) for p in points)
    share = f"{100 * correct / graded:.0f}% correct" if graded else "nothing graded yet"
    ungraded = sum(int(p.get("ungraded") or 0) for p in points)
    if ungraded:
        share += f" · {ungraded} ungraded (the grader could not run)"
    pct = f" ({100 * done / total:.0f}%)" if total else ""
    running = bool(status.get("running"))
    name = summary.get("name") or status.get("eval_id")
    if running:
        eta = status.get("eta_s")
        expected = (summary.get("estimate") or {}).get("expected_s")
        text = f"Running {name}: {done} of {total} runs done{pct} · {share} so far"
        if eta is not None:
            text += f" · about {duration(eta)} left"
        elif expected is not None:  # past its estimate with nothing finished to tell the pace by
            text += f" · taking longer than its estimate of {duration(expected)}"
    else:
        word = "Done" if status.get("status") in FINISHED else "Not running here"  # e.g. interrupted
        text = f"{word} ({status.get('status')}): {name}: {done} of {total} runs{pct} · {share}"
        text += _taken_against_estimate(summary)
        if summary.get("error"):
            text += f" · {summary['error']}"
    state = "running" if running else "done"
    bar = f'<progress value="{done}" max="{max(total, 1)}" style="width:100%"></progress>'
    return (f'<div class="mg-eval-progress" data-state="{state}" data-status="{html.escape(str(status.get("status")))}"'
            f' data-eval="{html.escape(str(status.get("eval_id")))}">{bar}<div>{html.escape(text)}</div></div>')


def past_rows(service: StudioService, visitor: str | None = None) -> tuple[list[list[Any]], list[tuple[str, str]]]:
    """Rows of the past-evaluations table (newest first) and the picker's (label, id) choices: the evaluations
    `visitor` may see (its own in share mode)."""
    rows, choices = [], []
    for e in service.evaluations.list(visitor=visitor):
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.get("created_at") or 0))
        runs = f"{e.get('done', 0)}/{e.get('total', 0)}"
        rows.append([e["id"], e.get("name", ""), e.get("status", ""), runs, e.get("dataset", ""), created])
        choices.append((f"{e['id']} · {e.get('name', '')} · {e.get('status', '')} · {runs} · {created}", e["id"]))
    return rows, choices


def dataset_choices(service: StudioService, visitor: str | None = None) -> list[tuple[str, str]]:
    """(label, name) of the datasets `visitor` may pick (in share mode its own uploads, not others'), then the task
    presets (`task:NAME`; not in share mode)."""
    out = []
    for d in service.evaluations.list_datasets(visitor=visitor):
        folder = d.get("folder") or ""
        where = folder if folder == "uploads" else Path(folder).name or folder
        out.append((f"{d['name']} ({where}, {human_size(d.get('size_bytes'))})", d["name"]))
    for t in service.evaluations.tasks():
        out.append((f"task: {t['title']} ({t['metric']}; {t['dataset']})", f"task:{t['name']}"))
    return out


def task_choices(service: StudioService) -> list[tuple[str, str]]:
    """(label, name) of the Task preset list: none, then every preset (none offered in share mode)."""
    return [("(none)", ""), *((f"{t['title']} ({t['metric']})", t["name"]) for t in service.evaluations.tasks())]


def picked_task(dataset: str | None, task: str | None) -> tuple[str | None, str | None]:
    """(task, file dataset) of the form: a `task:NAME` dataset is that preset with its own (Hub) rows; any other
    dataset is a file, whose rows the preset of the Task preset list (if one is picked) makes into prompts."""
    name, task_name = str(dataset or "").strip(), str(task or "").strip().removeprefix("task:")
    if name.startswith("task:"):
        return name[len("task:"):], None
    return task_name or None, name or None


def task_metric(service: StudioService, dataset: str | None) -> str | None:
    """The metric of the task preset picked as the dataset (`task:NAME`), else None."""
    if not str(dataset or "").startswith("task:"):
        return None
    name = str(dataset)[len("task:"):]
    return next((t["metric"] for t in service.evaluations.tasks() if t["name"] == name), None)


def gold_check_html(result: dict[str, Any]) -> str:
    """The gold check's verdict: how many of the dataset's own right answers the metric grades correct, and why
    the others are not (the first ten)."""
    total, correct = int(result.get("total") or 0), int(result.get("correct") or 0)
    ok = total > 0 and correct == total
    head = f"Check the grader · {result.get('task')}: {correct}/{total} gold answers graded correct"
    if result.get("ungraded"):
        head += f" ({result['ungraded']} ungraded: the grader could not run)"
    lines = [f"item {f.get('item')}: {f.get('reason')}" for f in (result.get("failures") or [])[:10]]
    more = len(result.get("failures") or []) - len(lines)
    if more > 0:
        lines.append(f"(and {more} more)")
    body = "".join(f"<li>{html.escape(str(line))}</li>" for line in lines)
    return (f'<div id="mg-eval-gold-check" data-ok="{str(ok).lower()}" data-correct="{correct}" data-total="{total}">'
            + message_html(head, "ok" if ok else "error") + (f"<ul>{body}</ul>" if body else "") + "</div>")
