"""A GGUF's chat template and its BOS / EOS texts read from the file's header (no llama.cpp), for rendering tool
prompts (backends/tools/render.py) outside the engine; cached per file."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from backends.llama.models.gguf import read_gguf_header, read_token_texts
from backends.llama.models.prompt_formats import TEMPLATE, prompt_format


@dataclass(frozen=True)
class ChatTemplate:
    """The jinja template messages are rendered with (the file's own; for a file without one, its architecture's
    turns or plain text, as the engine renders it: prompt_formats.py), and the texts of its BOS and EOS tokens
    ("" when the file names none).

    The engine tokenizes a prompt text with `add_special` and adds no BOS when the text already begins with the
    BOS text (LlamaModel.tokenize), so a prompt rendered with this `bos_token` gets exactly one BOS."""

    template: str | None
    bos_token: str
    eos_token: str
    own: bool = True
    """Whether the template is the file's own (False: the architecture's turns or plain text)."""


def chat_template_of(path: str | Path) -> ChatTemplate:
    """The chat template of a GGUF file (ModelFileError when it is not a readable GGUF)."""
    resolved = Path(path).expanduser().resolve()
    stat = resolved.stat() if resolved.exists() else None
    return _cached(str(resolved), stat.st_mtime_ns if stat else 0, stat.st_size if stat else 0)


@functools.lru_cache(maxsize=64)
def _cached(path: str, mtime_ns: int, size: int) -> ChatTemplate:
    del mtime_ns, size  # part of the cache key: a file replaced in place is read again
    metadata = read_gguf_header(path).metadata
    fmt = prompt_format(metadata)
    ids = {int(metadata[k]) for k in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id")
           if isinstance(metadata.get(k), int) and metadata[k] >= 0}
    texts = read_token_texts(path, ids) if ids else {}

    def text_of(key: str) -> str:
        value = metadata.get(key)
        return texts.get(value, "") if isinstance(value, int) else ""

    return ChatTemplate(fmt.template or None, text_of("tokenizer.ggml.bos_token_id"),
                        text_of("tokenizer.ggml.eos_token_id"), fmt.source == TEMPLATE)
