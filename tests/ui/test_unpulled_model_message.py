"""A Hub model that cannot be pulled names the workflow's model key, the repo and the quant, and what to do
(issue 43 §2.7), instead of the Hub's bare "cannot reach the Hub … Name or service not known"."""

from __future__ import annotations

from pathlib import Path

import pytest

import app.service.model_pull as model_pull
from app.service.errors import UserError


def test_an_unreachable_hub_names_the_model_and_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(ref: str, **kwargs: object) -> None:
        raise UserError("cannot reach the Hub at https://huggingface.co for the file list: Name or service not known",
                        code="network")

    monkeypatch.setattr(model_pull, "pull_model", offline)
    models = {"main": {"source": "hub", "repo": "bartowski/Qwen2.5-0.5B-Instruct-GGUF", "quant": "Q4_K_M"}}
    with pytest.raises(UserError) as caught:
        model_pull.pull_needed_models(models, models_dir=tmp_path)
    text = str(caught.value)
    assert caught.value.code == "network"
    assert "model 'main' (bartowski/Qwen2.5-0.5B-Instruct-GGUF, quant Q4_K_M) could not be pulled" in text
    assert "Name or service not known" in text and text.count("cannot reach the Hub") == 1
    assert "metagen models pull bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M" in text
    assert f"put its GGUF file into the models folder {tmp_path}" in text


HUB_WORKFLOW = """version: 1
name: hub-model
models:
  main: {source: hub, repo: bartowski/Qwen2.5-0.5B-Instruct-GGUF, quant: Q4_K_M}
inputs:
  question: {type: text, default: 'What is 2 + 2?'}
nodes:
- id: answer
  kind: generator
  model: main
  params: {prompt: '{question}', max_tokens: 8}
  inputs: {question: inputs.question}
outputs: {answer: answer.text}
"""


def test_a_workflow_whose_model_is_not_pulled_warns_in_problems_when_opened(tmp_path: Path) -> None:
    from tests.ui.test_ui_service import make_service

    service = make_service(tmp_path)
    try:
        issues = service.parse_yaml(HUB_WORKFLOW)["issues"]
        found = [i for i in issues if i["code"] == "model_not_pulled"]
        assert len(found) == 1 and found[0]["severity"] == "warning"
        assert "model 'main' needs bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M" in found[0]["message"]
        assert all(i["severity"] != "error" for i in issues)  # a warning: Run still offers to pull it
    finally:
        service.close()
