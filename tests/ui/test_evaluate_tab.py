"""The Evaluate tab without a browser: the app builds with it, and its handlers take a small dataset through
upload, column mapping, estimate, a running evaluation with a sweep, and past results (fake model)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from app.service.errors import UserError
from app.service.studio import StudioService
from app.ui.app import build_app
from app.ui.evaluate_form import EDITOR, SAVED, build_request, metric_spec, parse_sweeps, progress_html, run_link
from app.ui.evaluate_tab import EvaluateTab, evaluate_tab

EXAMPLES = Path(__file__).resolve().parents[2] / "workflows"

VOTE = """version: 1
name: editor-vote
inputs:
  question: {type: text}
nodes:
- id: think
  kind: sampler
  params: {prompt: '{question}', n: 4, max_tokens: 16, extract: last_number}
  inputs: {question: inputs.question}
- id: vote
  kind: voter
  params: {method: majority, extract: last_number}
  inputs: {candidates: think.candidates}
outputs: {answer: vote.answer}
"""

ROWS = [{"question": "What is 1 + 1?", "answer": "2"}, {"question": "What is 2 + 2?", "answer": "4"},
        {"question": "What is 3 + 3?", "answer": "6"}]


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("METAGEN_DATASETS", str(tmp_path / "datasets"))  # uploads go to this test's folder
    svc = StudioService(dry_run=True, workflows_dir=tmp_path / "wf", examples_dir=EXAMPLES,
                        models_dir=tmp_path / "models", trace_db=tmp_path / "traces.db")
    yield svc
    svc.close()


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def build_tab(service: StudioService) -> EvaluateTab:
    with gr.Blocks():
        with gr.Tabs() as tabs:
            with gr.Tab("Evaluate") as tab:
                built = evaluate_tab(service, tabs, tab)
    assert built is not None
    return built


def initial_form(tab: EvaluateTab) -> dict[Any, Any]:
    return {c: getattr(c, "value", None) for c in tab.view.form}


def apply(form: dict[Any, Any], out: dict[Any, Any]) -> None:
    """What the browser would send next time: each returned value or update's value, for the form's inputs."""
    for component, update in out.items():
        if component not in form:
            continue
        if isinstance(update, dict) and update.get("__type__") == "update":
            if "value" in update:
                form[component] = update["value"]
        else:
            form[component] = update


def choices(update: dict[str, Any]) -> list[Any]:
    return [c[1] if isinstance(c, list | tuple) else c for c in update["choices"]]


def test_the_app_builds_with_the_evaluate_tab_between_traces_and_models(service: StudioService) -> None:
    demo = build_app(service)
    tabs = [b.label for b in demo.blocks.values() if isinstance(b, gr.Tab)]
    assert tabs.index("Traces") < tabs.index("Evaluate") < tabs.index("Models")
    ids = {getattr(b, "elem_id", None) for b in demo.blocks.values()}
    assert {"mg-tab-evaluate", "mg-eval-workflows", "mg-eval-dataset", "mg-eval-upload", "mg-eval-sweeps",
            "mg-eval-estimate", "mg-eval-start", "mg-eval-cancel", "mg-eval-progress", "mg-eval-plot-curve",
            "mg-eval-items-view", "mg-eval-past"} <= ids


def test_form_helpers_turn_the_form_into_a_request_or_a_readable_error(service: StudioService) -> None:
    assert metric_spec("number", "") == "number"
    assert metric_spec("regex", r"^\d+$") == r"regex:^\d+$" and metric_spec("regex", "") == "regex"
    assert metric_spec("output", "passed") == "output:passed"
    with pytest.raises(UserError, match="needs an argument"):
        metric_spec("python", " ")
    assert parse_sweeps("think.n=1,2\n\n think.temperature=0.2,0.7 ") == ["think.n=1,2", "think.temperature=0.2,0.7"]
    with pytest.raises(UserError, match="at most 3"):
        parse_sweeps("a.n=1\nb.n=1\nc.n=1\nd.n=1")
    with pytest.raises(UserError, match="pick a dataset"):
        build_request(service, picked=[EDITOR], editor_yaml=VOTE, dataset=None)
    with pytest.raises(UserError, match="the editor has no workflow"):
        build_request(service, picked=[EDITOR], editor_yaml="version: 1\nname: x\nnodes: []\noutputs: {}\n",
                      dataset="d.jsonl")
    request = build_request(service, picked=[EDITOR, SAVED + "self_consistency"], editor_yaml=VOTE,
                            dataset="d.jsonl", mapping={"question": "q", "other": ""}, output="answer", limit=2,
                            sweeps="think.n=1,2")
    assert [w["name"] for w in request["workflows"]] == ["editor-vote (editor)", "self_consistency"]
    assert request["mapping"] == {"question": "q"} and request["output"] is None and request["limit"] == 2
    assert run_link("abc 1") == "?run=abc%201"
    done = progress_html({"eval_id": "e1", "running": False, "status": "succeeded", "done": 4, "total": 4,
                          "summary": {"points": [{"correct": 1, "total": 4}]}})
    assert 'data-state="done"' in done and "4 of 4 runs" in done and "25% correct" in done
    lost = progress_html({"eval_id": "e2", "running": False, "status": "interrupted", "done": 1, "total": 4,
                          "summary": {"points": []}})
    assert "Not running here (interrupted)" in lost and "nothing graded yet" in lost


def test_handlers_take_a_small_dataset_through_an_evaluation(service: StudioService, tmp_path: Path) -> None:
    tab = build_tab(service)
    v, h = tab.view, tab.handlers
    form = initial_form(tab)

    # an empty editor is not preselected; the editor's workflow is, with its name
    empty = h.on_select({**form, v.editor_yaml: "version: 1\nname: untitled\nnodes: []\noutputs: {}\n"})
    assert empty[v.workflows]["value"] == []
    form[v.editor_yaml] = VOTE
    out = h.on_select(form)
    apply(form, out)
    assert out[v.workflows]["value"] == [EDITOR]
    assert "(current editor workflow: editor-vote)" in [c[0] for c in out[v.workflows]["choices"]]
    assert SAVED + "self_consistency" in choices(out[v.workflows])
    assert "arithmetic.jsonl" in choices(out[v.dataset])  # the repository's example datasets
    assert out[v.sweeps] == "think.n=1,2,4,8"  # the sampler's n, suggested
    assert "think.temperature" in choices(out[v.sweep_param])

    # two workflows: the sweep param list covers both
    form[v.workflows] = [EDITOR, SAVED + "self_consistency"]
    apply(form, h.on_workflows(form))
    assert form[v.sweeps] == "think.n=1,2,4,8"

    # a dataset with a row missing its question: the row is named in the message
    bad = write_jsonl(tmp_path / "bad.jsonl", [ROWS[0], {"answer": "3"}])
    out = h.on_upload({**form, v.upload: str(bad)})
    assert "row 2: no value for input 'question'" in out[v.check]

    # the good dataset: preview, column mapping by name, reference `answer`, all rows check out
    good = write_jsonl(tmp_path / "tiny.jsonl", ROWS)
    form[v.upload] = str(good)
    out = h.on_upload(form)
    apply(form, out)
    assert form[v.dataset] == "tiny.jsonl" and "Uploaded tiny.jsonl (3 rows)" in out[v.message]
    assert out[v.preview]["value"]["headers"] == ["question", "answer"]
    assert len(out[v.preview]["value"]["data"]) == 3 and "3 rows" in out[v.dataset_info]
    assert form[v.map_names] == ["question"] and form[v.map_slots[0]] == "question"
    assert out[v.map_slots[0]]["visible"] is True and out[v.map_slots[1]]["visible"] is False
    assert form[v.reference] == "answer"
    assert "All 3 rows fill the inputs of 2 workflows" in out[v.check]

    # a mapping change is checked again (the question from the answer column is odd, but every row has one)
    assert "All 3 rows" in h.on_mapping({**form, v.map_slots[0]: "answer"})[v.check]
    assert "reference column 'nope'" in h.on_mapping({**form, v.reference: "nope"})[v.check]

    # add an axis from the param list, then settle on a small sweep
    added = h.on_add_axis({**form, v.sweep_param: "think.temperature"})
    assert added[v.sweeps].splitlines()[0] == "think.n=1,2,4,8"
    assert added[v.sweeps].splitlines()[1].startswith("think.temperature=")
    form[v.sweeps] = "think.n=1,2"
    form[v.metric] = "number"

    # errors are messages, never tracebacks
    wrong = h.on_estimate({**form, v.sweeps: "think.nope=1,2"})
    assert "'nope'" in wrong[v.message] and "Traceback" not in wrong[v.message]
    assert "needs an argument" in h.on_start({**form, v.metric: "python"})[v.message]

    estimate = h.on_estimate(form)
    assert estimate[v.message] == ""
    assert "12 (3 items" in estimate[v.estimate] and "completion tokens" in estimate[v.estimate]

    started = h.on_start(form)
    assert "Started evaluation" in started[v.message], started[v.message]
    assert started[v.estimate] == ""  # the summary shows the estimate beside the actual cost from now on
    eval_id = started[v.past]["value"]
    assert eval_id in choices(started[v.past])
    form[v.past] = eval_id
    out = started
    deadline = time.monotonic() + 60
    while out.get(v.timer) is None or out[v.timer].active:
        assert time.monotonic() < deadline, "the evaluation did not finish"
        time.sleep(0.2)
        out = h.on_poll(form)
    assert 'data-state="done"' in out[v.progress] and "12 of 12 runs" in out[v.progress]
    assert out[v.curve]["visible"] is True and out[v.curve]["value"] is not None
    assert out[v.tokens]["visible"] is True
    assert out[v.pass_at_k]["visible"] is True  # the samplers are graded per sample
    assert "?run=" in out[v.items] and "mg-eval-items" in out[v.items]
    assert "mg-eval-summary" in out[v.summary]
    assert any(row[0] == eval_id and row[3] == "12/12" for row in out[v.past_table]["value"])

    # a past evaluation shows in the same views; nothing runs, so the timer stays off
    again = h.on_past(form)
    assert again[v.timer].active is False and 'data-status="succeeded"' in again[v.progress]
    assert again[v.estimate] == "" and "busy s (summed over concurrent items)" in again[v.summary]
    assert again[v.cancel_btn]["interactive"] is False  # nothing runs: Cancel does not look clickable
    assert v.cancel_btn.interactive is False  # nor before any evaluation was picked
    assert "not running" in h.on_cancel(form)[v.message]


def test_a_dataset_that_names_its_metric_sets_the_metric(service: StudioService, tmp_path: Path) -> None:
    tab = build_tab(service)
    v, h = tab.view, tab.handlers
    form = {**initial_form(tab), v.editor_yaml: VOTE}
    apply(form, h.on_select(form))
    assert form[v.metric] == "exact"
    out = h.on_dataset({**form, v.dataset: "arithmetic.jsonl"})  # datasets/arithmetic.meta.yaml: metric number
    assert out[v.metric]["value"] == "number"
    assert "All 60 rows" in out[v.check]
    assert v.metric not in h.on_dataset({**form, v.dataset: "instructions.csv"})  # names none: the user's stays
    # the form's empty metric means the dataset's own; a metric picked wins
    request = {"workflows": [{"name": "vote", "yaml": VOTE}], "dataset": "arithmetic.jsonl", "limit": 2}
    assert service.evaluations.plan({**request, "metric": ""}).metric_spec == "number"
    assert service.evaluations.plan({**request, "metric": "contains"}).metric_spec == "contains"


CHAIN = """version: 1
name: slow-chain
inputs:
  question: {type: text}
nodes:
- id: draft
  kind: generator
  params: {prompt: '{question}', max_tokens: 8}
  inputs: {question: inputs.question}
- id: final
  kind: generator
  params: {prompt: 'Final: {text}', max_tokens: 8}
  inputs: {text: draft.text}
outputs: {answer: final.text}
"""


def test_cancel_stops_a_running_evaluation_and_keeps_what_finished(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAGEN_DATASETS", str(tmp_path / "datasets"))
    service = StudioService(dry_run=True, fake_latency_s=0.5, workflows_dir=tmp_path / "wf", examples_dir=EXAMPLES,
                            models_dir=tmp_path / "models", trace_db=tmp_path / "traces.db")
    try:
        tab = build_tab(service)
        v, h = tab.view, tab.handlers
        form = initial_form(tab)
        form[v.editor_yaml] = CHAIN
        apply(form, h.on_select(form))
        assert form[v.sweeps] == "" and form[v.workflows] == [EDITOR]  # no sampler: no sweep suggested
        form[v.upload] = str(write_jsonl(tmp_path / "tiny.jsonl", ROWS))
        apply(form, h.on_upload(form))
        started = h.on_start({**form, v.sweeps: "draft.max_tokens=8,16"})
        assert started[v.timer].active is True and 'data-state="running"' in started[v.progress]
        assert started[v.cancel_btn]["interactive"] is True  # Cancel is active while the evaluation runs
        form[v.past] = started[v.past]["value"]
        cancelled = h.on_cancel(form)
        assert "Cancelling" in cancelled[v.message] and cancelled[v.timer].active is True
        deadline = time.monotonic() + 60
        out = h.on_poll(form)
        while v.timer not in out or out[v.timer].active:  # polls of a running evaluation leave the timer on
            assert time.monotonic() < deadline, "the evaluation did not stop"
            time.sleep(0.2)
            out = h.on_poll(form)
        assert 'data-status="cancelled"' in out[v.progress] and "Done (cancelled)" in out[v.progress]
        assert out[v.cancel_btn]["interactive"] is False
        assert "of 6 runs" in out[v.progress]
    finally:
        service.close()
