"""The Evaluate tab's handlers in share mode: Gradio hands them the event's request after the form's dict, and
each visitor (its session) sees only its own uploads and evaluations."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gradio as gr
import pytest
from gradio.helpers import special_args

from app.service.studio import StudioService
from app.share.policy import SharePolicy
from app.ui.evaluate_form import EDITOR
from app.ui.evaluate_tab import EvaluateTab, evaluate_tab
from backends.fake import FakeBackend

WF = """version: 1
name: echo-eval
inputs:
  question: {type: text}
nodes:
- id: answer
  kind: generator
  params: {prompt: '{question}', max_tokens: 8}
  inputs: {question: inputs.question}
outputs: {answer: answer.text}
"""
ROWS = [{"question": "What is 1 + 1?", "answer": "2"}]
HANDLERS = ("on_select", "on_workflows", "on_dataset", "on_upload", "on_mapping", "on_estimate", "on_start",
            "on_cancel", "on_poll", "on_past", "on_refresh_past")


@pytest.fixture
def tab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("METAGEN_DATASETS", str(tmp_path / "datasets"))
    monkeypatch.setenv("METAGEN_HOME", str(tmp_path / "home"))
    models = tmp_path / "models"
    models.mkdir()
    policy = SharePolicy.for_serving("127.0.0.1", force_share_mode=True, models_folder=models)
    backend = FakeBackend(replies=["2"])
    service = StudioService(policy=policy, provider=lambda spec: backend, dry_run=True,
                            workflows_dir=tmp_path / "wf", examples_dir=tmp_path / "no-examples",
                            models_dir=models, trace_db=tmp_path / "traces.db")
    with gr.Blocks():
        with gr.Tabs() as tabs:
            with gr.Tab("Evaluate") as page:
                built = evaluate_tab(service, tabs, page)
    assert built is not None
    yield built
    service.close()


def _as(visitor: str) -> Any:
    return SimpleNamespace(session_hash=visitor)


def _choices(update: dict[str, Any]) -> list[str]:
    return [c[1] if isinstance(c, list | tuple) else c for c in update["choices"]]


def test_gradio_passes_the_request_after_the_form(tab: EvaluateTab) -> None:
    request = _as("alice")
    for name in HANDLERS:
        form = {tab.view.dataset: None}
        args, *_ = special_args(getattr(tab.handlers, name), [form], request)  # type: ignore[arg-type]
        assert args == [form, request], name


def test_each_visitor_sees_its_own_uploads_and_evaluations(tab: EvaluateTab, tmp_path: Path) -> None:
    v, h = tab.view, tab.handlers
    data = tmp_path / "alice_set.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    form: dict[Any, Any] = {c: getattr(c, "value", None) for c in v.form}
    form[v.editor_yaml] = WF
    form[v.workflows] = [EDITOR]
    alice, bob = _as("alice"), _as("bob")

    uploaded = h.on_upload({**form, v.upload: str(data)}, alice)
    assert "Uploaded alice_set.jsonl" in uploaded[v.message]
    assert "All 1 rows" in uploaded[v.check]
    started = h.on_start({**form, v.dataset: "alice_set.jsonl"}, alice)
    assert "Started evaluation" in started[v.message], started[v.message]
    eval_id = started[v.past]["value"]

    mine = h.on_select(form, alice)
    assert "alice_set.jsonl" in _choices(mine[v.dataset]) and eval_id in _choices(mine[v.past])
    theirs = h.on_select(form, bob)
    assert "alice_set.jsonl" not in _choices(theirs[v.dataset]) and _choices(theirs[v.past]) == []
    assert theirs[v.past_table]["value"] == []
    assert "there is no dataset named" in h.on_dataset({**form, v.dataset: "alice_set.jsonl"}, bob)[v.check]
    for handler in (h.on_past, h.on_poll, h.on_cancel):
        assert "no evaluation" in handler({**form, v.past: eval_id}, bob)[v.message]
