"""Pulling a model for the CLI, the Python API and the Models tab: the models folder, the progress sink, and
HubErrors turned into UserErrors; the transfer itself is backends/llama/models/hub.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.service.errors import UserError


def default_models_dir() -> Path:
    from app.platform.paths import models_dir

    return models_dir()


def tqdm_progress() -> Any:
    """A tqdm bar for one file of a pull (the CLI's and the Python API's progress)."""
    import sys

    from backends.llama.models.hub_progress import TqdmProgress

    return TqdmProgress(file=sys.stderr)


def pull_model(ref: str, *, file: str | None = None, revision: str | None = None,
               models_dir: str | Path | None = None, progress: Callable[[], Any] | None = None,
               cancel: Callable[[], bool] | None = None, verify: bool = True) -> Any:
    """Pull `USER/REPO[:QUANT]` into the models folder; returns backends.llama.models.hub.PullResult. UserError (with
    the HubError's `code`) on anything the user can fix. `verify=False` takes a file with no size or sha256 listed."""
    from app.workflow.model_refs import HubNeed, record_pull
    from backends.llama.models.hub import pull
    from backends.llama.models.hub_files import HubError, parse_ref

    folder = Path(models_dir) if models_dir else default_models_dir()
    try:
        result = pull(ref, folder, filename=file, revision=revision, progress=progress, cancel=cancel, verify=verify)
        repo, quant = parse_ref(ref)
    except HubError as exc:
        raise UserError(str(exc), code=exc.code) from None
    if result.path.parent == folder:
        record_pull(folder, HubNeed("", repo, quant.upper() if quant else None, file), result.path.name)
    return result


def pull_needed_models(models: dict[str, Any], *, models_dir: str | Path | None = None,
                       progress: Callable[[], Any] | None = None, cancel: Callable[[], bool] | None = None,
                       ask: Callable[[str], bool] | None = None) -> list[Any]:
    """Pull the `source: hub` models of a `models:` section that are not in the models folder yet (each after
    `ask(message)` says yes, when given); the PullResults. UserError when one is refused or fails."""
    from app.workflow.model_refs import hub_needs

    folder = Path(models_dir) if models_dir else default_models_dir()
    pulled = []
    for need in hub_needs(models, folder):
        if ask is not None and not ask(f"This workflow needs {need.label()} from {need.repo}. Pull it now?"):
            raise UserError(need.message(), code="model_not_pulled")
        try:
            pulled.append(pull_model(need.ref, file=need.file, models_dir=folder, progress=progress, cancel=cancel))
        except UserError as exc:
            raise UserError(unpulled_message(need, str(exc), folder), code=exc.code) from None
    return pulled


def unpulled_message(need: Any, reason: str, folder: Path) -> str:
    """Why model `need` (a HubNeed) could not be pulled, naming its key, repo and quant or file, and what to do."""
    what = f"quant {need.quant}" if need.quant else (f"file {need.file}" if need.file else "its default quant")
    return (f"model {need.alias!r} ({need.repo}, {what}) could not be pulled: {reason.rstrip('.')}. Pull it later "
            f"(the Models tab, or `{need.pull_command()}`), or put its GGUF file into the models folder {folder}")


def search_models(query: str, limit: int = 20) -> list[dict[str, Any]]:
    from backends.llama.models.hub_api import search
    from backends.llama.models.hub_files import HubError

    if not str(query or "").strip():
        raise UserError("type a few letters of a model's name to search, such as qwen3 or llama")
    try:
        return search(str(query).strip(), limit=limit)
    except HubError as exc:
        raise UserError(str(exc), code=exc.code) from None


def remove_model(name: str, models_dir: str | Path | None = None) -> list[Path]:
    """Delete a model of the models folder by file name (every shard of a split one; its partial download too).
    Never a path outside the folder, never the bundled model."""
    from backends.llama.models.hub_files import shard_group

    folder = Path(models_dir) if models_dir else default_models_dir()
    clean = str(name or "").strip()
    if not clean or "/" in clean or "\\" in clean or clean in (".", ".."):
        raise UserError(f"{name!r} is not a model file name; give a name `metagen models list` shows",
                        code="bad_name")
    stem = shard_group(clean if clean.endswith(".gguf") else clean + ".gguf")
    found = [p for p in folder.glob("*.gguf*") if shard_group(p.name.removesuffix(".part")) == stem
             or p.name in (clean, clean + ".gguf", clean + ".part", clean + ".gguf.part")]
    if not found:
        raise UserError(f"no model {clean!r} in {folder}; `metagen models list` shows the models there",
                        code="unknown_model")
    for path in found:
        path.unlink()
    return found


def describe_needed_models(models: dict[str, Any], models_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """The `source: hub` models not in the models folder yet, each with the file and its size when the Hub says
    (what the studio shows before it offers to pull: "this workflow needs X (397 MB)")."""
    from app.workflow.model_refs import hub_needs
    from backends.llama.models.hub_api import repo_files
    from backends.llama.models.hub_files import HubError, select_files

    folder = Path(models_dir) if models_dir else default_models_dir()
    described = []
    for need in hub_needs(models, folder):
        row: dict[str, Any] = {"alias": need.alias, "repo": need.repo, "ref": need.ref, "file": need.file,
                               "label": need.label(), "size_bytes": None}
        try:
            files, _ = repo_files(need.repo)
            chosen = select_files(need.repo, files, need.quant, need.file)
            row["label"] = chosen[0].name
            sizes = [f.size for f in chosen]
            row["size_bytes"] = sum(sizes) if all(s is not None for s in sizes) else None  # type: ignore[misc]
        except HubError as exc:  # offline, or the repo is gone: the pull itself will say so
            row["problem"] = str(exc)
        described.append(row)
    return described
