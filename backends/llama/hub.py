"""Optional download of a GGUF file from the Hugging Face Hub into the models folder (needs internet and the
`huggingface_hub` package; never used by tests or by anything that runs without the user asking)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from backends.base import BackendError
from backends.llama.gguf import model_file_info

log = logging.getLogger(__name__)


def download_gguf(repo_id: str, filename: str, dest_dir: str | Path, revision: str | None = None) -> Path:
    """Fetch `filename` (a .gguf) from Hub repo `repo_id` into `dest_dir`, check it is a valid GGUF, return it."""
    if not filename.endswith(".gguf"):
        raise BackendError(f"{filename!r} is not a .gguf file; pick one of the repository's GGUF files.")
    if os.environ.get("HF_HUB_OFFLINE") or os.environ.get("METAGEN_OFFLINE"):
        raise BackendError("Model download is disabled (offline mode). Copy the .gguf into the models folder instead.")
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as exc:
        raise BackendError(
            "Downloading models needs the 'huggingface_hub' package: pip install huggingface_hub."
        ) from exc
    dest = Path(dest_dir).expanduser()
    dest.mkdir(parents=True, exist_ok=True)
    try:
        local = hf_hub_download(repo_id=repo_id, filename=filename, revision=revision, local_dir=str(dest))
    except Exception as exc:  # network errors, missing repos and files all surface as one clear message
        raise BackendError(f"Could not download {filename} from {repo_id}: {exc}") from exc
    path = Path(local)
    model_file_info(path)  # raises ModelFileError naming the file if the download is incomplete
    log.info("downloaded %s (%d bytes)", path, path.stat().st_size)
    return path
