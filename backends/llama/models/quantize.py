"""Re-quantised copies of a GGUF file, made once by llama.cpp's own quantiser and written atomically."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
from pathlib import Path

from backends.base import ModelFileError
from backends.llama.models.gguf import model_file_info

log = logging.getLogger(__name__)

QUANT_FTYPES = {"q8_0": ("LLAMA_FTYPE_MOSTLY_Q8_0", "Q8_0"), "q4_0": ("LLAMA_FTYPE_MOSTLY_Q4_0", "Q4_0")}
"""Copy kinds: llama_cpp's llama_ftype constant and the quantisation name its GGUF header then reports."""
PARTIAL_SUFFIX = ".partial"
_HASH_CHUNK = 1 << 22
_digests: dict[tuple[str, int, int, int], str] = {}
_digests_lock = threading.Lock()
_copy_locks: dict[str, threading.Lock] = {}


class QuantizeError(ModelFileError):
    """llama.cpp could not write the re-quantised copy (the message says why and what is used instead)."""


def source_digest(path: Path) -> str:
    """SHA-256 of the whole file (first 16 hex digits), remembered per (path, size, mtime, inode) so a file is
    read once per process; any change to the file's bytes that touches its size or mtime is seen."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    with _digests_lock:
        if key in _digests:
            return _digests[key]
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    value = digest.hexdigest()[:16]
    with _digests_lock:
        _digests[key] = value
    return value


def copy_path(source: Path, folder: Path, kind: str, digest: str) -> Path:
    """Where the `kind` copy of `source` (whose bytes hash to `digest`) lives: the hash is in the name, so a
    changed source gets a new copy and never reuses the old one."""
    return folder / f"{source.stem}.{kind}-{digest}.gguf"


def _lock_for(target: Path) -> threading.Lock:
    with _digests_lock:
        return _copy_locks.setdefault(str(target), threading.Lock())


def quantized_copy(source: Path, folder: Path, kind: str = "q8_0", threads: int | None = None) -> Path:
    """The `kind` copy of `source` in `folder`, made on first call and reused after (checked by its header).
    The copy is written to a temporary file beside its final name, its GGUF header checked, then renamed into
    place, so a failed or interrupted conversion leaves no partial file; QuantizeError says what went wrong."""
    if kind not in QUANT_FTYPES:
        raise QuantizeError(f"Unknown weights copy kind {kind!r}; use one of: {', '.join(QUANT_FTYPES)}.")
    source = source.resolve()
    model_file_info(source)  # a missing or truncated source is the source's error, not the copy's
    target = copy_path(source, folder, kind, source_digest(source))
    with _lock_for(target):
        if target.exists():
            try:
                if model_file_info(target).quantization == QUANT_FTYPES[kind][1]:
                    return target
            except ModelFileError as exc:
                log.warning("re-making the damaged weights copy %s: %s", target, exc)
        _write_copy(source, target, kind, threads)
    return target


def _write_copy(source: Path, target: Path, kind: str, threads: int | None) -> None:
    from backends.llama.worker.llama_model import llama_lib

    lib = llama_lib()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise QuantizeError(f"Cannot create the folder {target.parent} for the {kind} copy of {source.name}: "
                            f"{exc.strerror or exc}. Check its permissions, or set cpu_weights: original.") from exc
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}{PARTIAL_SUFFIX}")
    params = lib.llama_model_quantize_default_params()
    params.ftype = getattr(lib, QUANT_FTYPES[kind][0])
    params.allow_requantize = True  # the source is already quantised (e.g. Q4_1)
    params.nthread = int(threads or 0)
    log.info("writing the %s copy of %s to %s", kind, source.name, target)
    try:
        status = lib.llama_model_quantize(str(source).encode(), str(partial).encode(), params)
        if status != 0:
            raise QuantizeError(f"llama.cpp could not convert {source.name} to {kind} (status {status}; its log "
                                "says why). The original weights are used instead.")
        try:
            quantization = model_file_info(partial).quantization
        except ModelFileError as exc:
            raise QuantizeError(f"The {kind} copy of {source.name} came out unreadable ({exc}); the original "
                                "weights are used instead.") from exc
        if quantization != QUANT_FTYPES[kind][1]:
            raise QuantizeError(f"The {kind} copy of {source.name} came out as {quantization}; the original "
                                "weights are used instead.")
        os.replace(partial, target)
    except OSError as exc:
        raise QuantizeError(f"Cannot write the {kind} copy of {source.name} into {target.parent}: "
                            f"{exc.strerror or exc}. The original weights are used instead.") from exc
    finally:
        with contextlib.suppress(OSError):
            partial.unlink()
