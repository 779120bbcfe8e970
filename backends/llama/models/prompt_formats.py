"""How chat messages become a prompt for a GGUF: its own chat template, else its architecture's turn format, else
plain text for a base model (decided from the file's metadata alone, so listings and the engine agree)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_SYSTEM_INTO_FIRST_USER = (
    "{% if messages and messages[0]['role'] == 'system' %}{% set prefix = messages[0]['content'] + '\n\n' %}"
    "{% set rest = messages[1:] %}{% else %}{% set prefix = '' %}{% set rest = messages %}{% endif %}"
)
"""Formats without a system turn (Gemma, Mistral) put the system message at the head of the first user turn."""

CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
GEMMA = (
    "{{ bos_token }}" + _SYSTEM_INTO_FIRST_USER +
    "{% for m in rest %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else 'user' }}\n"
    "{{ (prefix if loop.first else '') + m['content'] }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
LLAMA3 = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
    "{{ m['content'] }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
PHI3 = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
MISTRAL = (
    "{{ bos_token }}" + _SYSTEM_INTO_FIRST_USER +
    "{% for m in rest %}{% if m['role'] == 'user' %}[INST] {{ (prefix if loop.first else '') + m['content'] }} "
    "[/INST]{% else %}{{ m['content'] }}{{ eos_token }}{% endif %}{% endfor %}"
)
PLAIN_TEXT = (  # newlines as expressions: llama-cpp-python's formatter trims the newline after a block tag
    "{% for m in messages %}{{ m['content'] }}{% if not loop.last %}{{ '\\n\\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '\\n' }}{% endif %}"
)
"""A base model continues text: the messages' contents one after another, no roles, no special tokens."""

TURN_FORMATS: dict[str, str] = {"gemma": GEMMA, "llama3": LLAMA3, "chatml": CHATML, "phi3": PHI3, "mistral": MISTRAL}
"""The turn formats known by name: each family's own, as its instruction-tuned models were trained on."""

_ARCHITECTURE_FORMATS = {
    "gemma": "gemma", "gemma2": "gemma", "gemma3": "gemma", "gemma3n": "gemma",
    "qwen": "chatml", "qwen2": "chatml", "qwen2moe": "chatml", "qwen3": "chatml", "qwen3moe": "chatml",
    "phi3": "phi3", "phimoe": "phi3", "mistral3": "mistral",
}
_LLAMA3_PRE_TOKENIZERS = {"llama-bpe", "llama3", "smaug-bpe"}
_INSTRUCT_MARKERS = re.compile(r"(?:^|[\s_\-.])(instruct|it|chat|sft|dpo|rlhf|orpo|assistant)(?:$|[\s_\-.\d])",
                               re.IGNORECASE)

TEMPLATE = "template"
ARCHITECTURE = "architecture"
BASE_MODEL = "base model"
FALLBACK = "fallback"


@dataclass(frozen=True)
class PromptFormat:
    """Which way a model's chat messages are rendered, and why."""

    name: str
    """"chat template" (the file's own), a TURN_FORMATS name, or "plain text"."""
    source: str
    """TEMPLATE, ARCHITECTURE, BASE_MODEL or FALLBACK."""
    template: str

    def describe(self) -> str:
        """One phrase for the Models tab, `models list` and the trace."""
        return {
            TEMPLATE: "the model's own chat template",
            ARCHITECTURE: f"{self.name} turns (no chat template in the file; the architecture's own format)",
            BASE_MODEL: "plain text (a base model: no chat template, no instruction tuning; messages are joined "
                        "as text)",
            FALLBACK: "ChatML (no chat template and an architecture of unknown format)",
        }[self.source]

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "source": self.source, "description": self.describe()}


def _turn_format(metadata: Mapping[str, Any]) -> str | None:
    arch = str(metadata.get("general.architecture") or "").lower()
    if arch in _ARCHITECTURE_FORMATS:
        return _ARCHITECTURE_FORMATS[arch]
    if arch == "llama":
        if str(metadata.get("tokenizer.ggml.pre") or "") in _LLAMA3_PRE_TOKENIZERS:
            return "llama3"
        names = " ".join(str(metadata.get(k) or "") for k in ("general.name", "general.basename")).lower()
        if "mistral" in names or "mixtral" in names:
            return "mistral"
    return None


def is_instruction_tuned(metadata: Mapping[str, Any]) -> bool:
    """Whether the file says it is a fine-tune for chat (its `general.finetune`, name or tags: instruct, it,
    chat, sft, dpo...); a file that says nothing of the kind is a base model."""
    tags = metadata.get("general.tags")
    texts = [str(metadata.get(k) or "") for k in ("general.finetune", "general.name", "general.basename")]
    texts += [str(t) for t in tags] if isinstance(tags, list) else []
    return any(_INSTRUCT_MARKERS.search(text) for text in texts if text)


def prompt_format(metadata: Mapping[str, Any]) -> PromptFormat:
    """The file's own chat template when it has one; else its architecture's turn format for an instruction-tuned
    model, plain text for a base model, and ChatML for an instruction-tuned model of unknown format."""
    template = metadata.get("tokenizer.chat_template")
    if isinstance(template, str) and template.strip():
        return PromptFormat("chat template", TEMPLATE, template)
    if not is_instruction_tuned(metadata):
        return PromptFormat("plain text", BASE_MODEL, PLAIN_TEXT)
    name = _turn_format(metadata)
    if name is None:
        return PromptFormat("chatml", FALLBACK, CHATML)
    return PromptFormat(name, ARCHITECTURE, TURN_FORMATS[name])

