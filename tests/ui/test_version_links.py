"""Every figure names its version (issue 50 §2, the UI side): the Traces tab says which version a run ran with
"Open the version this ran" (`?workflow=NAME@HASH`), or plainly that no save recorded it; the Evaluate table has
a version column with the same link and notes rows named alike that ran different versions; the Tune tab names
the recommended workflow's version (dry-run service, fake model, the tabs' own handlers without a browser)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from app.eval.tune.api import TuneOptions
from app.service.studio import StudioService
from app.service.tune_jobs import RUNNING, TuneJobs
from app.ui.evaluate_form import EDITOR, SAVED, build_request
from app.ui.evaluate_tab import evaluate_tab
from app.ui.traces_tab import traces_tab
from app.ui.tune_tab import TuneHandlers, tune_tab
from app.ui.version_info import run_version_html
from app.viz.evaluation import evaluation_summary_html
from app.viz.version_links import OPEN_RAN, short_version, version_href
from app.workflow.spec import load_workflow_text
from tests.studio_fixtures import studio_service
from tests.ui.test_tune_tab import result as tune_result

VOTE = """version: 1
name: sc
inputs:
  question: {type: text}
nodes:
- id: think
  kind: sampler
  params: {prompt: '{question}', n: 2, max_tokens: 16, extract: last_number}
  inputs: {question: inputs.question}
- id: vote
  kind: voter
  params: {method: majority, extract: last_number}
  inputs: {candidates: think.candidates}
outputs: {answer: vote.answer}
"""
OTHER = VOTE.replace("n: 2", "n: 3")  # the same YAML name, another version


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("versionlinks")
    svc = studio_service(root, reply=lambda prompt, i: "Answer: 2")
    svc.save_workflow("sc", load_workflow_text(VOTE).to_dict(), message="first try")
    svc.save_workflow("sc2", load_workflow_text(OTHER).to_dict())
    yield svc
    svc.close()


def _hash(service: StudioService, name: str) -> str:
    return service.version_panel.workflow_history(name)[0]["version"]


def _by_elem(outputs: dict[Any, Any], elem_id: str) -> Any:
    return next(value for component, value in outputs.items() if getattr(component, "elem_id", None) == elem_id)


def _show_run(service: StudioService) -> Any:
    """The Traces tab's handler of picking a run (what fills every view)."""
    with gr.Blocks() as demo:
        with gr.Tabs() as tabs:
            with gr.Tab("Traces") as tab:
                built = traces_tab(service, tabs, tab)
    assert built is not None
    run_pick = built.run_pick._id
    return next(f.fn for f in demo.fns.values() if (run_pick, "change") in [tuple(t) for t in f.targets])


def test_the_traces_tab_links_the_version_a_run_ran_or_says_no_save_recorded_it(service: StudioService) -> None:
    saved = service.run_workflow(load_workflow_text(service.read_workflow_text("sc")), {"question": "1+1?"}, seed=1)
    unsaved = service.run_workflow(load_workflow_text(VOTE.replace("n: 2", "n: 5")), {"question": "1+1?"}, seed=1)
    assert service.trace_store.flush()
    show_run = _show_run(service)
    version = _hash(service, "sc")

    shown = _by_elem(show_run(saved.run_id), "mg-trace-version")
    assert f'href="{version_href("sc", version)}"' in shown and f"?workflow=sc@{version}" in shown
    assert OPEN_RAN in shown and short_version(version) in shown and "first try" in shown and "<b>sc</b>" in shown

    other = _by_elem(show_run(unsaved.run_id), "mg-trace-version")
    run_hash = service.trace_store.get_run(unsaved.run_id)["run"]["workflow_hash"]
    assert short_version(run_hash) in other and "not in the version store" in other
    assert "href" not in other and OPEN_RAN not in other  # nothing to open, so no link that would break
    assert _by_elem(show_run(None), "mg-trace-version") == ""
    old = run_version_html(service, {"run": {"id": "old", "workflow": "sc"}})  # a run from before hashes
    assert "no recorded version" in old and "href" not in old


def test_the_evaluate_table_has_a_version_column_and_notes_rows_named_alike_that_ran_different_versions(
        service: StudioService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAGEN_DATASETS", str(tmp_path))
    (tmp_path / "one.jsonl").write_text(json.dumps({"question": "1+1?", "answer": "2"}) + "\n", encoding="utf-8")
    with gr.Blocks():
        with gr.Tabs() as tabs:
            with gr.Tab("Evaluate") as tab:
                built = evaluate_tab(service, tabs, tab)
    assert built is not None
    editor = VOTE.replace("n: 2", "n: 7")  # the editor's workflow, never saved: no version to open
    request = build_request(service, picked=[SAVED + "sc", SAVED + "sc2", EDITOR], editor_yaml=editor,
                            dataset="one.jsonl", metric="number", mapping={"question": "question"},
                            reference="answer")
    eval_id = service.evaluations.start(request)["eval_id"]
    deadline = time.monotonic() + 60
    while service.evaluations.status(eval_id)["running"]:
        assert time.monotonic() < deadline, "the evaluation did not finish"
        time.sleep(0.1)

    summary = built.handlers.on_past({built.view.past: eval_id})[built.view.summary]
    first, second = _hash(service, "sc"), _hash(service, "sc2")
    assert first != second
    assert ">version</th>" in summary
    for name, version in (("sc", first), ("sc2", second)):
        assert f'href="{version_href(name, version)}"' in summary and f">{short_version(version)}</code>" in summary
    assert "mg-eval-version-note" in summary and "rows named &#x27;sc&#x27; ran different versions" in summary
    unsaved = load_workflow_text(editor).semantic_hash()
    assert f'title="not in the version store: {unsaved}"><code' in summary
    assert version_href("sc", unsaved) not in summary

    offline = evaluation_summary_html(service.evaluations.status(eval_id)["summary"])  # the report: not looked up
    assert f">{short_version(first)}</code>" in offline and "mg-version-link" not in offline
    assert "not in the version store" not in offline and "mg-eval-version-note" in offline


def test_the_tune_tab_names_the_recommended_workflows_version(service: StudioService) -> None:
    path = service.workflows_dir / "tuned" / "arithmetic-bundled.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(VOTE.replace("name: sc", "name: tuned"), encoding="utf-8")

    def tuner(options: TuneOptions, *, on_progress: Any, cancel: Any) -> Any:
        done = tune_result()  # as StudioService.tune records it (app.service.tunes)
        done.recommended["path"] = str(path)
        done.recommended["version"] = service.versions.record_file(path, message="metagen tune t1").version
        return done

    service.tune_jobs.close()
    service.tune_jobs = TuneJobs(tuner)
    with gr.Blocks():
        with gr.Tabs() as tabs:
            with gr.Tab("Tune") as tab:
                view = tune_tab(service, tabs, tab)
    handlers = TuneHandlers(service, view)
    job = service.tune_jobs.start(TuneOptions(data="arithmetic"))
    deadline = time.monotonic() + 10
    while service.tune_jobs.get(job.job_id).state == RUNNING:
        assert time.monotonic() < deadline, "the tune did not end"
        time.sleep(0.01)
    shown = handlers.on_poll(job.job_id, None)[view.result]
    version = service.versions.of_run(service.tune_jobs.get(job.job_id).result.recommended["version"]).version
    assert "The recommended workflow is version" in shown and "metagen tune t1" in shown
    assert f'href="{version_href("arithmetic-bundled", version)}"' in shown and "Open this version" in shown
