"""Local models as `metagen models list` and `metagen.models()` describe them: the bundled model and the models
folder's GGUFs, each with what it can do and the `models:` entry to paste into a workflow; and which llama.cpp
build runs them."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def model_entry(source: str, info: Any) -> dict[str, Any]:
    """The `models:` entry that runs this file (a rank head needs `pooling: rank`)."""
    entry: dict[str, Any] = {"source": "bundled"} if source == "bundled" else {"source": "path", "path": info.path}
    if info.rank_head:
        entry["pooling"] = "rank"
    return entry


def describe(source: str, info: Any) -> dict[str, Any]:
    """One model's row: file, size, quant, architecture, context, templates, rank head, entry."""
    return {"file": Path(info.path).name, "name": info.name, "source": source, "path": info.path,
            "size_bytes": info.size_bytes, "quantization": info.quantization, "quant": info.quantization,
            "architecture": info.architecture, "context_length": info.context_length,
            "chat_template": bool(info.chat_template), "thinking_template": info.thinking,
            "rank_head": info.rank_head, "prompt_format": info.prompt_format, "entry": model_entry(source, info)}


def local_models(models_dir: str | Path, skipped: list[tuple[str, str]] | None = None) -> list[dict[str, Any]]:
    """The bundled model, then every readable GGUF under `models_dir` (partial downloads are not models); files that
    cannot be read are left out, and listed in `skipped` as (path, reason)."""
    from backends.llama.models.gguf import model_file_info, scan_models

    rows = []
    try:
        from backends.llama.models.bundled import bundled_model_path

        rows.append(describe("bundled", model_file_info(bundled_model_path())))
    except Exception as exc:  # the bundled package missing is not a reason to hide the folder's models
        log.warning("bundled model unavailable: %s", exc)
    seen = {r["path"] for r in rows}
    for info in scan_models(models_dir, skipped):
        if info.path not in seen:
            rows.append(describe("models folder", info))
    return rows


def build_description() -> dict[str, Any]:
    """Which llama.cpp build runs here (CPU, CUDA, Vulkan, Metal) and its devices; {"build": "unavailable"}
    with the reason when llama-cpp-python cannot be imported."""
    try:
        from backends.llama.devices import build_info

        info = build_info()
    except Exception as exc:
        return {"build": "unavailable", "error": str(exc), "devices": []}
    kinds = [name.upper() if name != "metal" else "Metal" for name in ("cuda", "vulkan", "metal") if info.get(name)]
    kinds = [k if k != "VULKAN" else "Vulkan" for k in kinds]
    build = "+".join(kinds) if info.get("gpu_offload") and kinds else "CPU"
    devices = [d.get("description") or d.get("name", "") for d in info.get("devices", [])]
    return {"build": build, "gpu_offload": bool(info.get("gpu_offload")), "devices": devices,
            "llama_cpp_python": info.get("llama_cpp_python")}


def build_line() -> str:
    b = build_description()
    if b["build"] == "unavailable":
        return f"llama.cpp build: unavailable ({b['error']})"
    return (f"llama.cpp build: {b['build']} (llama-cpp-python {b['llama_cpp_python']}); devices: "
            f"{', '.join(b['devices']) or 'CPU'}")
