"""Chat messages for a model without a chat template: its architecture's turns when it is instruction-tuned, plain
text for a base model (Gemma 3 270M, the second real model), ChatML only for an unknown architecture; what the
Models tab, `models list --json` and the trace say about it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backends.base import ModelSpec, SamplingParams
from backends.llama.models.bundled import bundled_model_path
from backends.llama.models.gguf import model_file_info
from backends.llama.models.prompt_formats import TURN_FORMATS, is_instruction_tuned, prompt_format
from tests.second_model import gemma_model_path

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]


def _render(template: str, messages: list[dict[str, str]] = MESSAGES) -> str:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    formatter = Jinja2ChatFormatter(template=template, eos_token="</s>", bos_token="<s>", add_generation_prompt=True)
    return str(formatter(messages=messages).prompt)


@pytest.mark.parametrize(("metadata", "name", "source"), [
    ({"general.architecture": "gemma3", "general.finetune": "it"}, "gemma", "architecture"),
    ({"general.architecture": "qwen2", "general.name": "Qwen2.5 1.5B Instruct"}, "chatml", "architecture"),
    ({"general.architecture": "llama", "tokenizer.ggml.pre": "llama-bpe", "general.finetune": "Instruct"}, "llama3",
     "architecture"),
    ({"general.architecture": "llama", "general.name": "Mistral 7B Instruct v0.3"}, "mistral", "architecture"),
    ({"general.architecture": "phi3", "general.name": "Phi 3.5 mini instruct"}, "phi3", "architecture"),
    ({"general.architecture": "granite", "general.finetune": "instruct"}, "chatml", "fallback"),
    ({"general.architecture": "gemma3", "general.name": "Gemma 3 270m", "general.tags": ["text-generation"]},
     "plain text", "base model"),
    ({"general.architecture": "llama", "tokenizer.chat_template": "{{ messages }}"}, "chat template", "template"),
])
def test_the_format_follows_the_file(metadata: dict[str, Any], name: str, source: str) -> None:
    fmt = prompt_format(metadata)
    assert (fmt.name, fmt.source) == (name, source)
    assert fmt.describe()


def test_instruction_markers_are_words_not_letters() -> None:
    assert is_instruction_tuned({"general.name": "gemma-3-270m-it"})
    assert not is_instruction_tuned({"general.name": "Smith with Italics"})  # "it" inside words is no marker
    assert not is_instruction_tuned({"general.name": "Gemma 3 270m"})


def test_each_turn_format_renders_the_system_and_the_generation_prompt() -> None:
    expected_tail = {"gemma": "<start_of_turn>model\n", "llama3": "<|start_header_id|>assistant<|end_header_id|>\n\n",
                     "chatml": "<|im_start|>assistant\n", "phi3": "<|assistant|>\n", "mistral": "[/INST]"}
    for name, template in TURN_FORMATS.items():
        text = _render(template)
        assert "Be brief." in text and "Hi?" in text, name
        assert text.endswith(expected_tail[name]), (name, text)
    assert _render(TURN_FORMATS["gemma"]) == ("<s><start_of_turn>user\nBe brief.\n\nHi?<end_of_turn>\n"
                                             "<start_of_turn>model\n")


def test_a_base_model_gets_plain_text() -> None:
    fmt = prompt_format({"general.architecture": "gemma3"})
    assert _render(fmt.template) == "Be brief.\n\nHi?\n"


@pytest.mark.model
def test_gemma_base_model_file_says_plain_text_and_smollm_its_template() -> None:
    gemma = model_file_info(gemma_model_path())
    assert gemma.architecture == "gemma3" and gemma.chat_template is None
    assert gemma.prompt_format is not None and gemma.prompt_format["source"] == "base model"
    smol = model_file_info(bundled_model_path())
    assert smol.prompt_format is not None and smol.prompt_format["source"] == "template"


@pytest.mark.model
def test_gemma_renders_chat_messages_as_plain_text_and_completes_them() -> None:
    from backends.llama.worker.llama_backend import LlamaBackend

    backend = LlamaBackend(gemma_model_path(), ModelSpec(device="cpu", n_ctx=512,
                                                         options=(("kv_size", 1024), ("n_seq_max", 4))))
    try:
        assert backend.info()["architecture"]["prompt_format"]["source"] == "base model"
        result = backend.generate([{"role": "user", "content": "The capital of France is"}],
                                  SamplingParams(max_tokens=6, temperature=0.0), n=1)
        assert "<start_of_turn>" not in result.prompt_text and "<|im_start|>" not in result.prompt_text
        assert result.prompt_text.endswith("The capital of France is\n")
        assert result.completions[0].completion_tokens > 0
    finally:
        backend.close()


@pytest.mark.model
def test_models_list_json_names_the_prompt_format(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    from app.cli.main import main

    folder = tmp_path / "models"
    folder.mkdir()
    shutil.copy(gemma_model_path(), folder / "gemma.gguf")
    assert main(["models", "list", "--json", "--models-dir", str(folder)]) == 0
    rows = json.loads(capsys.readouterr().out)
    rows = rows["models"] if isinstance(rows, dict) else rows
    by_file = {r["file"]: r for r in rows}
    assert by_file["gemma.gguf"]["prompt_format"]["source"] == "base model"
    assert by_file[bundled_model_path().name]["prompt_format"]["source"] == "template"
