"""The `cpu_weights` option: which weights a model runs on CPU, the original or a Q8_0 copy that llama.cpp's fast
matrix kernels can use, chosen by measuring both once per machine (docs/cpu_weights.md has the why and the figures)."""

from __future__ import annotations

import json
import logging
import os
import platform
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from backends.base import BackendError, ModelFileError, ModelSpec
from backends.llama.models.gguf import content_fingerprint, model_file_info
from backends.llama.models.quantize import QUANT_FTYPES, QuantizeError, quantized_copy, source_digest

log = logging.getLogger(__name__)

CPU_WEIGHTS = ("auto", "original", "q8_0", "q4_0")
"""auto: the Q8_0 copy when measured faster with quality held, else the original; original: always the file
as given; q8_0: always the copy (made on first use); q4_0: always a Q4_0 copy (made on first use; smaller and
lower in quality: the free self-draft of speculative decoding, a draft entry naming the target's own file)."""
DEFAULT_CPU_WEIGHTS: dict[str, str] = {}
"""The default per model source when a spec leaves cpu_weights unset; none listed: `original` for every source,
the bundled model included (docs/cpu_weights.md, "The default": measured faster, but the default model's
numbers would then depend on a timing measurement). {"bundled": "auto"} would make auto its default."""
COPY_KIND = "q8_0"
WEIGHTS_SUBDIR = ".cpu-weights"
"""Where copies and their measurements live inside the models folder (hidden: the model list skips it)."""
QUALITY_TOLERANCE = 0.01
"""Largest |mean log-probability difference| per token on the quality text for the copy to count as equal."""
MIN_BATCH_SPEEDUP = 1.10
"""At batch 16 the copy must be at least this much faster (a margin over the timing noise of a busy machine) ..."""
MAX_SINGLE_SLOWDOWN = 1.10
"""... and at batch 1 at most this much slower: one engine serves both, so one file must do for both, and on a
machine with little memory bandwidth the bigger file can lose for a single sequence what it wins for 16."""
NO_FAST_CPU_PATH_X86 = frozenset({"Q4_1", "Q5_1", "TQ1_0", "TQ2_0", "NVFP4"})
"""File types (general.file_type) with no repacked, tiled or tinyBLAS matrix path in the pinned llama.cpp on
x86-64 (ggml-cpu's repack.cpp, tiled/tiled.cpp, llamafile/sgemm.cpp; table in docs/cpu_weights.md)."""
FAST_EVERYWHERE = frozenset({"Q8_0", "F32", "F16", "BF16"})
DECISION_VERSION = 1

Measure = Callable[..., tuple[Any, Any]]
Together = bool | Callable[[], bool]


@dataclass(frozen=True)
class WeightsChoice:
    """Which weights a loaded model runs and why; goes into info(), the Models tab and every trace."""

    requested: str
    ran: str
    """"original", "q8_0" or "q4_0"."""
    path: str
    quantization: str
    fingerprint: str
    """content_fingerprint of the file that ran (the `#...` part of the model id)."""
    reason: str
    source_path: str
    source_sha256: str | None = None
    measurement: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        return f"{self.ran} ({self.quantization}, #{self.fingerprint}): {self.reason}"


def effective_choice(spec: ModelSpec) -> str:
    """The spec's cpu_weights, or its source's default when unset."""
    value = getattr(spec, "cpu_weights", None) or DEFAULT_CPU_WEIGHTS.get(spec.source, "original")
    if value not in CPU_WEIGHTS:
        raise BackendError(f"Unknown cpu_weights {value!r}; use one of: {', '.join(CPU_WEIGHTS)}.")
    return value


def lacks_fast_cpu_path(quantization: str, machine: str | None = None) -> bool:
    """True when this file type gets no fast matrix-matrix path from llama.cpp's CPU backend here."""
    arch = (machine or platform.machine()).lower()
    if arch in ("x86_64", "amd64", "x64"):
        return quantization in NO_FAST_CPU_PATH_X86
    return quantization not in FAST_EVERYWHERE and quantization != "unknown"


def llama_cpp_version() -> str:
    try:
        import llama_cpp

        return str(getattr(llama_cpp, "__version__", "unknown"))
    except ImportError:
        return "unknown"


def decision_path(copy: Path) -> Path:
    return copy.with_suffix(".json")


def decision_key(source_sha: str, device: dict[str, Any]) -> dict[str, Any]:
    """What a measurement depends on: the source's bytes, the llama.cpp build and the CPU settings."""
    return {"source_sha256": source_sha, "llama_cpp": llama_cpp_version(), "threads": int(device["threads"]),
            "flash_attn": str(device.get("flash_attn")), "machine": platform.machine()}


def read_decision(copy: Path, key: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The measured decision stored beside a copy, when it is there, readable and (given a key) current."""
    try:
        data = json.loads(decision_path(copy).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != DECISION_VERSION:
        return None
    if key is not None and data.get("key") != key:
        return None
    return data


def _write_json(path: Path, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def judge(original: dict[str, Any], copy: dict[str, Any]) -> tuple[str, str]:
    """(pick, reason) from two measurements (WeightsMeasurement.to_json() dicts)."""
    delta = copy["mean_logprob"] - original["mean_logprob"]
    batch = int(copy.get("batch", 16))
    speed_batch = original["step_s_batch"] / copy["step_s_batch"]
    speed_one = original["step_s_batch1"] / copy["step_s_batch1"]
    figures = (f"{speed_batch:.2f}x the original's speed at batch {batch}, {speed_one:.2f}x at batch 1, mean "
               f"logprob {copy['mean_logprob']:.4f} vs {original['mean_logprob']:.4f} (diff {delta:+.4f})")
    if abs(delta) > QUALITY_TOLERANCE:
        return "original", f"the q8_0 copy changes quality beyond {QUALITY_TOLERANCE}: {figures}"
    if speed_batch < MIN_BATCH_SPEEDUP:
        return "original", f"the q8_0 copy is not faster at batch {batch}: {figures}"
    if speed_one < 1 / MAX_SINGLE_SLOWDOWN:
        return "original", f"the q8_0 copy is slower for a single sequence: {figures}"
    return COPY_KIND, f"measured faster with quality held: {figures}"


def measure_and_record(source: Path, copy: Path, spec: ModelSpec, device: dict[str, Any], source_sha: str,
                       measure: Measure | None = None, together: Together = True) -> dict[str, Any]:
    """Measure the original against the copy now, and store the decision beside the copy. `together`: load
    both at once (or a function that says whether there is memory for that)."""
    if measure is None:
        from backends.llama.models.weights_probe import measure_pair as measure
    log.info("measuring %s against its q8_0 copy on this machine (once; about 10-60 s)", source.name)
    started = time.perf_counter()
    both = together() if callable(together) else together
    original, candidate = measure(source, copy, spec, device, together=both)
    orig_json = original if isinstance(original, dict) else original.to_json()
    copy_json = candidate if isinstance(candidate, dict) else candidate.to_json()
    pick, reason = judge(orig_json, copy_json)
    data = {
        "version": DECISION_VERSION, "key": decision_key(source_sha, device), "pick": pick, "reason": reason,
        "original": orig_json, "copy": copy_json, "measured_at": time.time(),
        "measure_s": round(time.perf_counter() - started, 2),
        "source": {"path": str(source), **_stat(source)}, "copy_path": str(copy),
    }
    try:
        _write_json(decision_path(copy), data)
    except OSError as exc:
        log.warning("cannot store the weights measurement beside %s (%s); it will be measured again", copy, exc)
    return data


def _stat(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def find_decision(source: Path, folder: Path | None) -> dict[str, Any] | None:
    """A stored decision for this source file as it is now (same path, size and mtime), without hashing it."""
    if folder is None or not folder.is_dir():
        return None
    now = {"path": str(source.resolve()), **_stat(source)}
    found = None
    for path in folder.glob(f"{source.stem}.{COPY_KIND}-*.json"):
        data = read_decision(path.with_suffix(".gguf"))
        if data and data.get("source") == now and Path(data.get("copy_path", "")).is_file():
            if found is None or data.get("measured_at", 0) > found.get("measured_at", 0):
                found = data
    return found


def choose_weights(source: Path, spec: ModelSpec, device: dict[str, Any], folder: Path | None,
                   measure: Measure | None = None, together: Together = True) -> WeightsChoice:
    """The weights to load for `source` under this spec and device: see the module docstring. Falls back to
    the original (with the reason, logged as a warning) when the copy cannot be made or measured; a missing or
    damaged source raises ModelFileError as loading it would."""
    requested = effective_choice(spec)

    def original(reason: str, sha: str | None = None, measurement: dict[str, Any] | None = None) -> WeightsChoice:
        return WeightsChoice(requested, "original", str(source), _quantization(source), content_fingerprint(source),
                             reason, str(source), sha, measurement)

    if int(device.get("n_gpu_layers") or 0) != 0:
        return original(f"the model runs on the GPU (n_gpu_layers={device['n_gpu_layers']}); cpu_weights "
                        "applies to CPU runs only")
    if requested == "original":
        return original("cpu_weights: original")
    kind = requested if requested in QUANT_FTYPES else COPY_KIND  # auto measures the q8_0 copy
    info = model_file_info(source)  # a missing or damaged source fails here, as loading it would
    if info.quantization == kind.upper():
        return original(f"the file is already {info.quantization}")
    if requested == "auto" and not lacks_fast_cpu_path(info.quantization):
        stored = find_decision(source, folder)
        if stored is None or stored.get("pick") != COPY_KIND:
            return original(f"auto: {info.quantization} already has a fast CPU matrix path in this llama.cpp")
    if folder is None:
        return original(f"cpu_weights: {requested} needs a folder for the copy, and none was given (the app "
                        f"uses <models folder>/{WEIGHTS_SUBDIR})")
    try:
        sha = source_digest(source)
        copy = quantized_copy(source, folder, kind, threads=device.get("threads"))
    except QuantizeError as exc:
        log.warning("using the original weights of %s: %s", source.name, exc)
        return original(f"the {kind} copy could not be made: {exc}")
    decision = read_decision(copy, decision_key(sha, device))
    why = f"cpu_weights: {kind}"
    if requested == "auto":
        if decision is None:
            try:
                decision = measure_and_record(source, copy, spec, device, sha, measure, together)
            except BackendError as exc:
                log.warning("using the original weights of %s: measuring its q8_0 copy failed: %s", source.name, exc)
                return original(f"measuring the q8_0 copy failed: {exc}", sha)
        if decision["pick"] != COPY_KIND:
            return original(f"auto: {decision['reason']}", sha, _figures(decision))
        why = f"auto: {decision['reason']}"
    return WeightsChoice(requested, kind, str(copy), model_file_info(copy).quantization,
                         content_fingerprint(copy), why, str(source), sha, _figures(decision))


def make_and_measure(source: Path, spec: ModelSpec, device: dict[str, Any], folder: Path,
                     measure: Measure | None = None, together: Together = True) -> dict[str, Any]:
    """Make the q8_0 copy of `source` (once) and measure it against the original now, whatever the spec's
    cpu_weights says (the Models tab's action); the stored decision is what `auto` follows from then on.
    QuantizeError or BackendError says why it could not."""
    sha = source_digest(source)
    copy = quantized_copy(source, folder, COPY_KIND, threads=device.get("threads"))
    return measure_and_record(source, copy, spec, device, sha, measure, together)


def _quantization(path: Path) -> str:
    """The file's quantisation for the record; "unknown" when its header cannot be read (loading it will
    then fail with the reason)."""
    try:
        return model_file_info(path).quantization
    except ModelFileError:
        return "unknown"


def _figures(decision: dict[str, Any] | None) -> dict[str, Any] | None:
    if not decision:
        return None
    return {k: decision[k] for k in ("original", "copy", "pick", "measured_at") if k in decision}


class WeightsChooser:
    """Remembers choices per (file state, settings) so a model pool asks the disk once per process."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._memo: dict[tuple[Any, ...], WeightsChoice] = {}
        self._lock = threading.Lock()

    def choose(self, source: Path, spec: ModelSpec, device: dict[str, Any],
               together: Together = True) -> WeightsChoice:
        st = source.stat()
        key = (str(source), st.st_size, st.st_mtime_ns, st.st_ino, effective_choice(spec), device.get("threads"),
               device.get("n_gpu_layers"), str(device.get("flash_attn")))
        with self._lock:
            cached = self._memo.get(key)
        if cached is not None and Path(cached.path).is_file():
            return cached
        choice = choose_weights(source, spec, device, self.folder, together=together)
        log.info("weights for %s: %s", source.name, choice.summary())
        with self._lock:
            self._memo[key] = choice
        return choice

    def forget(self) -> None:
        with self._lock:
            self._memo.clear()



def decision_summary(decision: dict[str, Any]) -> str:
    """One line for the Models tab: the copy's figures against the original's and what `auto` does."""
    orig, copy = decision["original"], decision["copy"]
    batch = int(copy.get("batch", 16))
    delta = copy["mean_logprob"] - orig["mean_logprob"]
    verdict = "auto runs the copy" if decision.get("pick") == COPY_KIND else "auto keeps the original"
    return (f"q8_0 copy: {orig['step_s_batch'] / copy['step_s_batch']:.2f}x speed at batch {batch}, "
            f"{orig['step_s_batch1'] / copy['step_s_batch1']:.2f}x at batch 1, logprob diff {delta:+.4f} "
            f"({verdict})")
