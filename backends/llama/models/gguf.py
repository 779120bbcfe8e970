"""GGUF file inspection: header metadata, integrity checks and a models-folder scan (no llama.cpp needed)."""

from __future__ import annotations

import hashlib
import logging
import struct
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

from backends.base import ModelFileError
from backends.llama.models.prompt_formats import prompt_format

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
ARRAY_KEEP_MAX = 64
"""Arrays longer than this (token lists, merges) are summarised instead of kept in the metadata dict."""
MAX_ARRAY_DEPTH = 8
"""Arrays nested deeper than this are a corrupt (or hostile) header: no real model nests more than twice."""

_SCALAR_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9

# ggml tensor types: (elements per block, bytes per block), from gguf-py's GGML_QUANT_SIZES.
_GGML_TYPE_SIZES: dict[int, tuple[int, int]] = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 40),
    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
    16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110),
    22: (256, 82), 23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8),
    29: (256, 56), 30: (1, 2), 34: (256, 54), 35: (256, 66), 39: (32, 17),
}
_GGML_TYPE_NAMES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1", 10: "Q2_K",
    11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS",
    18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS", 24: "I8",
    25: "I16", 26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M", 30: "BF16", 34: "TQ1_0", 35: "TQ2_0",
    39: "MXFP4",
}
# llama_ftype values of `general.file_type`.
_FILE_TYPE_NAMES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
    12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
    19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
    26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16",
    36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE", 39: "NVFP4",
}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int

    def n_bytes(self) -> int | None:
        sizes = _GGML_TYPE_SIZES.get(self.ggml_type)
        if sizes is None:
            return None
        n_elements = 1
        for dim in self.shape:
            n_elements *= dim
        block, block_bytes = sizes
        return (n_elements + block - 1) // block * block_bytes


@dataclass(frozen=True)
class GGUFHeader:
    version: int
    metadata: dict[str, Any]
    tensors: list[TensorInfo]
    data_offset: int


class _Reader:
    """Little-endian reads from a file through a refilled in-memory window; ModelFileError at end of file."""

    _CHUNK = 1 << 20

    def __init__(self, handle: BinaryIO, path: Path) -> None:
        self._handle = handle
        self._path = path
        self._buf = b""
        self._pos = 0
        self._base = handle.tell()  # file offset of self._buf[0]

    def _ensure(self, n: int) -> None:
        if self._pos + n <= len(self._buf):
            return
        rest = self._buf[self._pos :]
        self._base += self._pos
        self._buf = rest + self._handle.read(max(n - len(rest), self._CHUNK))
        self._pos = 0
        if len(self._buf) < n:
            raise ModelFileError(
                f"Model file {self._path} is truncated: its GGUF header ends early (an incomplete "
                "download?). Download the file again."
            )

    def read(self, n: int) -> bytes:
        self._ensure(n)
        data = self._buf[self._pos : self._pos + n]
        self._pos += n
        return data

    def scalar(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        self._ensure(size)
        value = struct.unpack_from(fmt, self._buf, self._pos)[0]
        self._pos += size
        return value

    def skip(self, n: int) -> None:
        if self._pos + n <= len(self._buf):
            self._pos += n
        else:
            self._ensure(0)
            self._handle.seek(self._base + self._pos + n)
            self._base, self._buf, self._pos = self._base + self._pos + n, b"", 0

    def string(self) -> str:
        length = self.scalar("<Q")
        if length > 1 << 26:
            raise ModelFileError(f"Model file {self._path} is corrupt: a GGUF string claims {length} bytes.")
        return self.read(length).decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        self.skip(self.scalar("<Q"))

    def value(self, value_type: int, depth: int = 0) -> Any:
        if value_type == _STRING:
            return self.string()
        if value_type == _ARRAY:
            if depth >= MAX_ARRAY_DEPTH:
                raise ModelFileError(f"Model file {self._path} is corrupt: GGUF arrays nested deeper than "
                                     f"{MAX_ARRAY_DEPTH} levels.")
            item_type = self.scalar("<I")
            count = self.scalar("<Q")
            if count > 1 << 28:
                raise ModelFileError(f"Model file {self._path} is corrupt: a GGUF array claims {count} items.")
            if count > ARRAY_KEEP_MAX:
                self._skip_array(item_type, count, depth + 1)
                return {"array_of": _value_type_name(item_type), "length": count}
            return [self.value(item_type, depth + 1) for _ in range(count)]
        fmt = _SCALAR_FORMATS.get(value_type)
        if fmt is None:
            raise ModelFileError(f"Model file {self._path} is corrupt: unknown GGUF value type {value_type}.")
        return self.scalar(fmt)

    def _skip_array(self, item_type: int, count: int, depth: int) -> None:
        if item_type == _STRING:
            for _ in range(count):
                self.skip_string()
        elif item_type in _SCALAR_FORMATS:
            self.skip(count * struct.calcsize(_SCALAR_FORMATS[item_type]))
        else:
            for _ in range(count):
                self.value(item_type, depth)

    def tell(self) -> int:
        return self._base + self._pos


def _value_type_name(value_type: int) -> str:
    names = {0: "u8", 1: "i8", 2: "u16", 3: "i16", 4: "u32", 5: "i32", 6: "f32", 7: "bool", 8: "str",
             9: "array", 10: "u64", 11: "i64", 12: "f64"}
    return names.get(value_type, f"type{value_type}")


def _open_checked(path: Path) -> BinaryIO:
    if not path.exists():
        raise ModelFileError(f"Model file {path} does not exist. Check the path (or pick a file in the models folder).")
    if path.is_dir():
        raise ModelFileError(f"Model path {path} is a folder; point at a .gguf file inside it.")
    try:
        return open(path, "rb", buffering=1 << 20)
    except OSError as exc:
        raise ModelFileError(f"Model file {path} cannot be read: {exc.strerror or exc}.") from exc


def read_gguf_header(path: str | Path, check_length: bool = True) -> GGUFHeader:
    """Parse the GGUF header (metadata and tensor table) and check the file is long enough for its tensors
    (`check_length=False`: the head of a file, such as the first megabytes fetched from the Hub)."""
    path = Path(path).expanduser()
    with _open_checked(path) as handle:
        reader = _Reader(handle, path)
        magic = reader.read(4) if path.stat().st_size >= 4 else b""
        if magic != GGUF_MAGIC:
            raise ModelFileError(
                f"Model file {path} is not a GGUF file (its first bytes are not b'GGUF'). "  # never echo contents
                "llama.cpp needs a .gguf model; convert or download the GGUF version."
            )
        version = reader.scalar("<I")
        if version not in (2, 3):
            raise ModelFileError(f"Model file {path} has GGUF version {version}; only versions 2 and 3 are supported.")
        n_tensors = reader.scalar("<Q")
        n_kv = reader.scalar("<Q")
        if n_tensors > 1 << 20 or n_kv > 1 << 20:
            raise ModelFileError(f"Model file {path} is corrupt: its GGUF header claims {n_tensors} tensors.")
        metadata: dict[str, Any] = {}
        for _ in range(n_kv):
            key = reader.string()
            metadata[key] = reader.value(reader.scalar("<I"))
        tensors = []
        for _ in range(n_tensors):
            name = reader.string()
            n_dims = reader.scalar("<I")
            if n_dims > 8:
                raise ModelFileError(f"Model file {path} is corrupt: tensor {name!r} claims {n_dims} dimensions.")
            shape = tuple(reader.scalar("<Q") for _ in range(n_dims))
            tensors.append(TensorInfo(name, shape, reader.scalar("<I"), reader.scalar("<Q")))
        alignment = int(metadata.get("general.alignment", DEFAULT_ALIGNMENT) or DEFAULT_ALIGNMENT)
        data_offset = (reader.tell() + alignment - 1) // alignment * alignment
    header = GGUFHeader(version, metadata, tensors, data_offset)
    if check_length:
        _check_length(path, header)
    return header


def kv_cache_bytes(metadata: dict[str, Any], n_ctx: int) -> int:
    """Bytes of an f16 K and V cache of `n_ctx` cells for the model these metadata describe (0 when unknown):
    the figure the pool budgets and the Models tab's fit estimate both use."""
    arch = metadata.get("general.architecture", "")
    n_layer = int(metadata.get(f"{arch}.block_count", 0) or 0)
    n_head = int(metadata.get(f"{arch}.attention.head_count", 1) or 1)
    n_head_kv = int(metadata.get(f"{arch}.attention.head_count_kv", n_head) or n_head)
    n_embd = int(metadata.get(f"{arch}.embedding_length", 0) or 0)
    head_k = int(metadata.get(f"{arch}.attention.key_length", n_embd // n_head) or 0)
    head_v = int(metadata.get(f"{arch}.attention.value_length", n_embd // n_head) or 0)
    return n_ctx * n_layer * n_head_kv * (head_k + head_v) * 2


def _check_length(path: Path, header: GGUFHeader) -> None:
    size = path.stat().st_size
    needed = header.data_offset
    for tensor in header.tensors:
        n_bytes = tensor.n_bytes() or 0
        needed = max(needed, header.data_offset + tensor.offset + n_bytes)
    if needed > size:
        raise ModelFileError(
            f"Model file {path} is truncated: its tensors need {needed:,} bytes but the file has {size:,} "
            "(an incomplete download?). Download the file again."
        )


def read_gguf_metadata(path: str | Path) -> dict[str, Any]:
    """The GGUF key/value metadata (long arrays summarised as {"array_of", "length"})."""
    return read_gguf_header(path).metadata


def read_token_texts(path: str | Path, ids: set[int]) -> dict[int, str]:
    """The vocabulary texts (`tokenizer.ggml.tokens`) of the token ids asked for, read from the header without
    keeping the whole token list (ids outside the vocabulary are left out)."""
    path = Path(path).expanduser()
    found: dict[int, str] = {}
    with _open_checked(path) as handle:
        reader = _Reader(handle, path)
        if reader.read(4) != GGUF_MAGIC:
            raise ModelFileError(f"Model file {path} is not a GGUF file (its first bytes are not b'GGUF').")
        reader.scalar("<I")
        reader.scalar("<Q")
        n_kv = reader.scalar("<Q")
        if n_kv > 1 << 20:
            raise ModelFileError(f"Model file {path} is corrupt: its GGUF header claims {n_kv} keys.")
        for _ in range(n_kv):
            key = reader.string()
            value_type = reader.scalar("<I")
            if key != "tokenizer.ggml.tokens" or value_type != _ARRAY:
                reader.value(value_type)
                continue
            item_type, count = reader.scalar("<I"), reader.scalar("<Q")
            if item_type != _STRING:
                reader._skip_array(item_type, count, 1)
                continue
            for i in range(count):
                if i in ids:
                    found[i] = reader.string()
                else:
                    reader.skip_string()
            break
    return found


@dataclass(frozen=True)
class ModelFileInfo:
    """What the model picker shows about one GGUF file."""

    name: str
    path: str
    size_bytes: int
    quantization: str
    context_length: int | None
    chat_template: str | None
    architecture: str | None
    thinking: bool = False
    """The chat template opens a thinking block (<think>, Qwen3's enable_thinking)."""
    rank_head: bool = False
    """A classification head on rank pooling: a reranker / reward model (`pooling: rank`), not a generator."""
    prompt_format: dict[str, str] | None = None
    """How chat messages reach it (prompt_formats.PromptFormat.to_json): its template, its architecture's turns,
    or plain text for a base model."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _quantization(header: GGUFHeader) -> str:
    file_type = header.metadata.get("general.file_type")
    if isinstance(file_type, int) and file_type in _FILE_TYPE_NAMES:
        return _FILE_TYPE_NAMES[file_type]
    # No file type recorded: name the most common tensor type among the 2-D weights.
    counts = Counter(t.ggml_type for t in header.tensors if len(t.shape) >= 2)
    if not counts:
        return "unknown"
    return _GGML_TYPE_NAMES.get(counts.most_common(1)[0][0], "unknown")


def model_file_info(path: str | Path) -> ModelFileInfo:
    """Name, size, quantisation, context length and chat template of a GGUF file."""
    path = Path(path).expanduser()
    header = read_gguf_header(path)
    meta = header.metadata
    arch = meta.get("general.architecture")
    context_length = meta.get(f"{arch}.context_length") if arch else None
    template = meta.get("tokenizer.chat_template")
    name = meta.get("general.name")
    return ModelFileInfo(
        name=str(name) if isinstance(name, str) and name.strip() else path.stem,
        path=str(path.resolve()),
        size_bytes=path.stat().st_size,
        quantization=_quantization(header),
        context_length=int(context_length) if isinstance(context_length, int) else None,
        chat_template=template if isinstance(template, str) else None,
        architecture=str(arch) if arch else None,
        thinking=isinstance(template, str) and any(t in template for t in THINKING_MARKERS),
        rank_head=_has_rank_head(header, arch),
        prompt_format=prompt_format(meta).to_json(),
    )


def model_prompt_format(path: Any) -> dict[str, str] | None:
    """The prompt format of a model file as JSON (for a run's trace); None for anything that is not a readable GGUF
    (a remote model, a fake)."""
    if not isinstance(path, (str, Path)):
        return None
    try:
        return model_file_info(path).prompt_format
    except (OSError, ValueError, ModelFileError):
        return None


THINKING_MARKERS = ("<think>", "enable_thinking", "reasoning_content")
RANK_POOLING = 4
"""llama.cpp's LLAMA_POOLING_TYPE_RANK."""


def _has_rank_head(header: GGUFHeader, arch: Any) -> bool:
    pooling = header.metadata.get(f"{arch}.pooling_type") if arch else None
    return pooling == RANK_POOLING or any(t.name in ("cls.output.weight", "cls.weight") for t in header.tensors)


MODEL_SUFFIX = ".gguf"


def find_model_files(folder: str | Path) -> list[Path]:
    """The model files of a models folder: every *.gguf under it, subfolders included (resolved, sorted by
    path), except inside hidden folders such as `.cpu-weights` (the app's re-quantised copies, shown on their
    source's row); none when it does not exist. The one scanner of model folders: the Models tab and share
    mode's model list both come from it."""
    folder = Path(folder).expanduser()
    try:
        if not folder.is_dir():
            return []
        return sorted(p.resolve() for p in folder.rglob("*") if p.suffix.lower() == MODEL_SUFFIX and p.is_file()
                      and not any(part.startswith(".") for part in p.relative_to(folder).parts[:-1]))
    except OSError as exc:
        log.warning("cannot scan the models folder %s: %s", folder, exc)
        return []


def scan_models(folder: str | Path, skipped: list[tuple[str, str]] | None = None) -> list[ModelFileInfo]:
    """Every readable model file under `folder`, sorted by name; broken files are logged and skipped (and added to
    `skipped` as (path, reason)): one bad file never hides the others."""
    found = []
    for path in find_model_files(folder):
        try:
            found.append(model_file_info(path))
        except (ModelFileError, OSError, ValueError, RecursionError, struct.error) as exc:
            reason = str(exc) if isinstance(exc, ModelFileError) else (
                f"Model file {path} cannot be read: {type(exc).__name__}: {exc}")
            log.warning("skipping model file: %s", reason)
            if skipped is not None:
                skipped.append((str(path), reason))
    return sorted(found, key=lambda info: (info.name.lower(), info.path))


def content_fingerprint(path: str | Path, sample_bytes: int = 1 << 20) -> str:
    """Short hash of a file's size, head and tail: identifies a model without reading all of it."""
    path = Path(path)
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as handle:
        digest.update(handle.read(sample_bytes))
        if size > sample_bytes:
            handle.seek(max(sample_bytes, size - sample_bytes))
            digest.update(handle.read(sample_bytes))
    return digest.hexdigest()[:12]
