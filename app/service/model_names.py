"""Local model names (the bundled model, the models folder's files, their stems and `bundled`): reserved, so that
no workflow can take a model's name over on `/v1`."""

from __future__ import annotations

import logging
from pathlib import Path

from app.share.policy import SharePolicy

log = logging.getLogger(__name__)

BUNDLED_ALIAS = "bundled"


def bundled_path() -> Path | None:
    """The bundled model's file, or None when it is not installed."""
    try:
        from backends.llama.models.bundled import bundled_model_path

        return Path(bundled_model_path())
    except Exception as exc:  # no bundled model installed: the folder's files are still served
        log.warning("bundled model unavailable: %s", exc)
        return None


def folder_model_paths(models_dir: Path, policy: SharePolicy) -> list[Path]:
    """The models folder's files (share mode: the policy's choices)."""
    from backends.llama.models.gguf import find_model_files

    return [Path(p) for p in policy.model_choices] if policy.share_mode else list(find_model_files(models_dir))


def reserved_model_names(models_dir: Path, policy: SharePolicy) -> set[str]:
    """Every name `/v1` resolves to a model file, case-folded (file names, their stems, `bundled`)."""
    paths = [p for p in (bundled_path(), *folder_model_paths(models_dir, policy)) if p is not None]
    names = {BUNDLED_ALIAS}
    for path in paths:
        names |= {path.name, path.stem}
    return {n.casefold() for n in names}


def model_name_problem(name: str, models_dir: Path, policy: SharePolicy) -> str | None:
    """Why a workflow may not be called `name` (it is a model's name), or None."""
    stem = name.strip()
    if stem.lower().endswith((".yaml", ".yml")):
        stem = stem[: stem.rfind(".")]
    if stem.casefold() in reserved_model_names(models_dir, policy):
        return (f"{stem!r} is the name of a model on this studio (model names are reserved, so that /v1 "
                "never mistakes a workflow for the model); choose another name")
    return None
