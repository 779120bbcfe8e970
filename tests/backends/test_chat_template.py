"""A GGUF's chat template and BOS / EOS texts read from its header alone (the bundled model's), cached per file."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.base import ModelFileError
from backends.llama.models.bundled import bundled_model_path
from backends.llama.models.chat_template import chat_template_of
from backends.llama.models.gguf import read_gguf_metadata, read_token_texts


def test_the_bundled_model_s_own_template_and_its_bos_and_eos_texts() -> None:
    chat = chat_template_of(bundled_model_path())
    meta = read_gguf_metadata(bundled_model_path())
    assert chat.own and chat.template == meta["tokenizer.chat_template"]
    assert (chat.bos_token, chat.eos_token) == ("<|im_start|>", "<|im_end|>")
    assert chat_template_of(str(bundled_model_path())) is chat  # cached per file


def test_token_texts_are_read_by_id() -> None:
    texts = read_token_texts(bundled_model_path(), {0, 1, 2, 10**9})
    assert texts[1] == "<|im_start|>" and texts[2] == "<|im_end|>" and 0 in texts and 10**9 not in texts


def test_a_file_that_is_not_a_gguf_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"not a model")
    with pytest.raises(ModelFileError, match="not a GGUF"):
        chat_template_of(bad)
