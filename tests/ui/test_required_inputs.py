"""An input without a default is required (issue 43 §2.9): a run with it empty is refused, naming the input,
before anything runs; inputs with a default still run on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.service.errors import UserError
from tests.ui.test_ui_service import editor_json, make_service

ASK = """version: 1
name: ask
inputs:
  question: {type: text}
  context: {type: text}
  style: {type: text, default: ''}
nodes:
- id: answer
  kind: generator
  params: {prompt: '{style}{context}{question}', max_tokens: 8}
  inputs: {question: inputs.question, context: inputs.context, style: inputs.style}
outputs: {answer: answer.text}
"""


def test_an_empty_required_input_is_refused_naming_it(tmp_path: Path) -> None:
    service = make_service(tmp_path)
    try:
        for given in ({"question": "", "context": "x"}, {"question": "   \n", "context": "x"}, {"context": "x"}):
            with pytest.raises(UserError, match=r"input 'question' is required \(no default\) and empty"):
                service.start_run(editor_json(ASK), given)
        with pytest.raises(UserError, match="input 'question', 'context' are required"):
            service.start_run(editor_json(ASK), {"question": "", "context": ""})
        assert service.active_runs() == []  # refused before anything was queued
        run = service.start_run(editor_json(ASK), {"question": "What is 2 + 2?", "context": "sums", "style": ""})
        assert service.wait_run(run["run_id"], timeout=30)["status"] == "succeeded"
    finally:
        service.close()
