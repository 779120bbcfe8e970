"""`pull`: a GGUF (every shard of a split one) from the Hugging Face Hub into the models folder, reusing an
identical local file, checking free disk, resuming and verifying each file (hub_transfer); never run by a test
against the real Hub (tests point HF_ENDPOINT at a fake one)."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from backends.base import ModelFileError
from backends.llama.models.gguf import model_file_info
from backends.llama.models.hub_api import check_online, file_url, repo_files
from backends.llama.models.hub_files import HubError, HubFile, parse_ref, select_files
from backends.llama.models.hub_transfer import Progress, file_sha256, part_path, transfer

log = logging.getLogger(__name__)

DISK_MARGIN = 256 << 20
"""Free space kept beyond the download itself."""


@dataclass
class PullResult:
    """What a pull left in the models folder: the model's path (its first shard) and how each file got there."""

    repo: str
    path: Path
    files: list[Path] = field(default_factory=list)
    how: dict[str, str] = field(default_factory=dict)
    """file name -> "downloaded", "already here", "from the Hugging Face cache"."""

    def entry(self) -> dict[str, str]:
        return {"source": "path", "path": str(self.path)}


def _same_file(path: Path, want: HubFile) -> bool:
    """Whether `path` holds exactly the Hub file (size, then sha256)."""
    try:
        if want.size is not None and path.stat().st_size != want.size:
            return False
    except OSError:
        return False
    return want.sha256 is None or file_sha256(path).hexdigest() == want.sha256.lower()


def _local_copy(dest_dir: Path, want: HubFile) -> Path | None:
    """A file already in the models folder with the Hub file's bytes (its own name first, then any same-size one)."""
    dest = dest_dir / want.name
    if dest.is_file() and _same_file(dest, want):
        return dest
    if want.size is None or not dest_dir.is_dir():
        return None
    for other in dest_dir.rglob("*.gguf"):
        if other != dest and other.is_file() and _same_file(other, want):
            return other
    return None


def _from_hf_cache(repo: str, want: HubFile, revision: str | None, dest: Path) -> bool:
    """Link (or copy) the file from the user's Hugging Face cache when it is there with the right bytes."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    try:
        cached = try_to_load_from_cache(repo, want.path, revision=revision,
                                        cache_dir=os.environ.get("HF_HUB_CACHE") or None)
    except Exception as exc:  # an odd cache layout is not worth failing a pull over
        log.debug("HF cache lookup failed: %s", exc)
        return False
    if not isinstance(cached, str) or not Path(cached).is_file():
        return False
    blob = Path(cached).resolve()
    if want.sha256 and blob.name != want.sha256 and not _same_file(blob, want):
        return False
    if want.size is not None and blob.stat().st_size != want.size:
        return False
    try:
        os.link(blob, dest)
    except OSError:
        shutil.copyfile(blob, dest)
    return True


def _check_disk(dest_dir: Path, files: list[HubFile]) -> None:
    need = sum(max(0, (f.size or 0) - (part_path(dest_dir / f.name).stat().st_size
                                       if part_path(dest_dir / f.name).exists() else 0)) for f in files)
    free = shutil.disk_usage(dest_dir).free
    if need + DISK_MARGIN > free:
        raise HubError("disk_full", f"not enough free disk in {dest_dir}: the pull needs {need / 1e9:.2f} GB and "
                                    f"{free / 1e9:.2f} GB are free; free some space or set METAGEN_MODELS to "
                                    "another folder")


def _check_gguf(path: Path) -> None:
    try:
        model_file_info(path)
    except ModelFileError as exc:
        path.unlink(missing_ok=True)
        name = path.name.removesuffix(".part")
        raise HubError("invalid_gguf", f"{name} is not a valid GGUF file ({exc}); it was removed") from None


def pull(ref: str, dest_dir: str | Path, *, filename: str | None = None, revision: str | None = None,
         progress: Callable[[], Progress] | None = None, cancel: Callable[[], bool] | None = None,
         verify: bool = True) -> PullResult:
    """Pull `USER/REPO[:QUANT]` (or `filename` of it) into `dest_dir`; `progress` makes one Progress per file.
    `verify=False` (`--no-verify`) takes files the Hub lists neither a size nor a sha256 for."""
    repo, quant = parse_ref(ref)
    dest_dir = Path(dest_dir).expanduser()
    check_online(f"pull {repo}")
    files, commit = repo_files(repo, revision)
    chosen = select_files(repo, files, quant, filename)
    dest_dir.mkdir(parents=True, exist_ok=True)
    result = PullResult(repo=repo, path=dest_dir / chosen[0].name)
    todo: list[HubFile] = []
    for want in chosen:
        dest = dest_dir / want.name
        local = _local_copy(dest_dir, want)
        if local is not None:
            result.how[want.name] = "already here" if local == dest else f"same bytes as {local.name}"
            result.files.append(local)
            if want is chosen[0]:
                result.path = local
        elif _from_hf_cache(repo, want, revision or commit, dest):
            result.how[want.name] = "from the Hugging Face cache"
            result.files.append(dest)
        else:
            todo.append(want)
    if todo:
        _check_disk(dest_dir, todo)
    for want in todo:
        dest = dest_dir / want.name
        partial = part_path(dest)
        kept = partial.stat().st_size if partial.is_file() else 0
        transfer(file_url(repo, want.path, revision or commit), dest, want.size, want.sha256, repo,
                 progress=progress() if progress else None, cancel=cancel, check=_check_gguf, verify=verify)
        amount = f"{kept / 1e6:.1f} MB" if kept >= 1e6 else f"{kept / 1e3:.0f} KB"
        result.how[want.name] = f"downloaded, resumed from {amount} of an earlier pull" if kept else "downloaded"
        result.files.append(dest)
    log.info("pulled %s: %s", repo, result.how)
    return result
