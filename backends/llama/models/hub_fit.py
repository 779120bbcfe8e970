"""Whether a Hub GGUF fits this machine before it is pulled: its header read from the first megabytes (HTTP Range),
weights plus the KV cache at a context length (gguf.kv_cache_bytes, the pool's own figure) against free memory."""

from __future__ import annotations

import logging
import os
import tempfile
from typing import Any

import httpx

from backends.base import ModelFileError
from backends.llama.models.gguf import kv_cache_bytes, read_gguf_header
from backends.llama.models.hub_api import check_online, client, file_url

log = logging.getLogger(__name__)

HEAD_BYTES = 16 << 20
"""Enough for the metadata of large-vocabulary models (the token list comes before the tensor table)."""
OVERHEAD = 1.1
"""Compute buffers and the process itself, on top of weights and KV cache."""


def remote_metadata(repo: str, path: str, revision: str | None = None) -> dict[str, Any] | None:
    """The GGUF metadata of a Hub file, from its first HEAD_BYTES; None when they cannot be read."""
    check_online("read the model's header")
    try:
        with client() as http:
            response = http.get(file_url(repo, path, revision), headers={"Range": f"bytes=0-{HEAD_BYTES - 1}"})
        if response.status_code not in (200, 206):
            return None
        head = response.content[:HEAD_BYTES]
    except httpx.HTTPError as exc:
        log.info("no header for %s/%s: %s", repo, path, exc)
        return None
    with tempfile.NamedTemporaryFile(prefix="metagen-head-", suffix=".gguf") as tmp:
        tmp.write(head)
        tmp.flush()
        try:
            return read_gguf_header(tmp.name, check_length=False).metadata
        except ModelFileError:
            return None


def available_memory(build: dict[str, Any] | None) -> tuple[int | None, str]:
    """(bytes free, where): the GPUs' free memory on a GPU build, else the RAM available now."""
    gpus = [d for d in (build or {}).get("devices", []) if d.get("type") == "gpu" and d.get("memory_free")]
    if (build or {}).get("gpu_offload") and gpus:
        return sum(int(d["memory_free"]) for d in gpus), "VRAM"
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "RAM"
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_AVPHYS_PAGES")), "RAM"
    except (ValueError, OSError, AttributeError):
        return None, "RAM"


def fit(size_bytes: int, metadata: dict[str, Any] | None, n_ctx: int, free: int | None) -> dict[str, Any]:
    """Bytes needed (weights + KV cache at n_ctx, with overhead) and whether they fit in `free`."""
    kv = kv_cache_bytes(metadata, n_ctx) if metadata else 0
    need = int((size_bytes + kv) * OVERHEAD)
    return {"need_bytes": need, "kv_bytes": kv, "kv_known": bool(metadata) and kv > 0,
            "fits": None if free is None else need <= free}
