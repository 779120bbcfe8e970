"""A model file's tool-calling prompt in the studio's process: its chat template and BOS / EOS read from the GGUF's
header (chat_template.py), the conversation rendered with the tools (backends/tools/render.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from backends.llama.models.chat_template import chat_template_of
from backends.tools.render import render_tool_prompt
from backends.tools.types import ToolRequest


def file_tool_prompt(path: str | Path, messages: Sequence[Mapping[str, Any]], request: ToolRequest,
                     add_generation_prompt: bool = True) -> tuple[str, str]:
    """(prompt text, call family) of a conversation with tools for the GGUF at `path`."""
    template = chat_template_of(path)
    rendered = render_tool_prompt(template.template, [dict(m) for m in messages], request,
                                  bos_token=template.bos_token, eos_token=template.eos_token,
                                  add_generation_prompt=add_generation_prompt)
    return rendered.text, rendered.family
