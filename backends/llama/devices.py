"""What this llama.cpp build can run on, and how a model spec's `device:` maps to llama.cpp settings."""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import threading
from pathlib import Path
from typing import Any

from backends.base import BackendError, ModelSpec

log = logging.getLogger(__name__)

DEVICES = ("auto", "cpu", "gpu", "metal")
_DEVICE_TYPES = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel"}
GPU_DOC_HINT = "See docs/gpu.md for installing a CUDA, Vulkan or Metal build of llama-cpp-python."
_INIT_LOCK = threading.Lock()
"""llama.cpp's backend init and device listing are not safe to run twice at once: a model prefetch and the run's
own first `get` both resolve a device, and two concurrent first calls corrupted the heap (1 run in 10 aborted with
"unaligned tcache chunk detected"). lru_cache does not stop two first calls, so both caches fill under this lock."""


@functools.lru_cache(maxsize=1)
def _llama() -> Any:
    import llama_cpp

    llama_cpp.llama_backend_init()
    return llama_cpp


def _ggml_devices() -> list[dict[str, Any]]:
    """The ggml backend devices of this build (CPU, CUDA0, Metal, Vulkan0, ...), via libggml's C API."""
    llama_cpp = _llama()
    lib_dir = Path(llama_cpp.__file__).parent / "lib"
    candidates = [p for name in ("libggml.so", "libggml.dylib", "ggml.dll") if (p := lib_dir / name).exists()]
    if not candidates:
        return []
    try:
        lib = ctypes.CDLL(str(candidates[0]))
        lib.ggml_backend_dev_count.restype = ctypes.c_size_t
        lib.ggml_backend_dev_get.restype = ctypes.c_void_p
        lib.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
        for fn in (lib.ggml_backend_dev_name, lib.ggml_backend_dev_description):
            fn.restype = ctypes.c_char_p
            fn.argtypes = [ctypes.c_void_p]
        lib.ggml_backend_dev_type.restype = ctypes.c_int
        lib.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
        lib.ggml_backend_dev_memory.restype = None
        lib.ggml_backend_dev_memory.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t),
                                                ctypes.POINTER(ctypes.c_size_t)]
        devices = []
        for i in range(lib.ggml_backend_dev_count()):
            dev = lib.ggml_backend_dev_get(i)
            free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
            lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
            devices.append({
                "name": (lib.ggml_backend_dev_name(dev) or b"").decode(errors="replace"),
                "description": (lib.ggml_backend_dev_description(dev) or b"").decode(errors="replace"),
                "type": _DEVICE_TYPES.get(lib.ggml_backend_dev_type(dev), "other"),
                "memory_free": int(free.value), "memory_total": int(total.value),
            })
        return devices
    except (OSError, AttributeError) as exc:  # an unusual build: fall back to the system info string
        log.debug("cannot list ggml devices: %s", exc)
        return []


def build_info() -> dict[str, Any]:
    """What this llama.cpp build supports: GPU offload, which GPU backends, devices, CPU features."""
    with _INIT_LOCK:
        return _build_info()


@functools.lru_cache(maxsize=1)
def _build_info() -> dict[str, Any]:
    llama_cpp = _llama()
    system_info = (llama_cpp.llama_print_system_info() or b"").decode(errors="replace").strip()
    devices = _ggml_devices()
    names = " ".join(d["name"] + " " + d["description"] for d in devices) + " " + system_info
    upper = names.upper()
    return {
        "llama_cpp_python": getattr(llama_cpp, "__version__", "unknown"),
        "gpu_offload": bool(llama_cpp.llama_supports_gpu_offload()),
        "cuda": "CUDA" in upper,
        "metal": "METAL" in upper or " MTL" in upper,
        "vulkan": "VULKAN" in upper,
        "devices": devices,
        "mmap": bool(llama_cpp.llama_supports_mmap()),
        "max_parallel_sequences": int(llama_cpp.llama_max_parallel_sequences()),
        "system_info": system_info,
    }


def default_threads() -> int:
    """Cores this process may use; on large machines about the physical-core count (llama.cpp's own choice)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        n = os.cpu_count() or 1
    return n if n <= 4 else max(4, n // 2)


def _flash_attn_mode(spec: ModelSpec) -> str:
    """"on" when the spec asks (flash_attn: true, or option flash_attn: on), "off" for option flash_attn: off,
    else "auto": llama.cpp enables flash attention wherever the device supports it (CPU included).

    On CPU the matrix-multiply path (off) decodes faster behind a long shared prompt (2 cores, SmolLM2-135M,
    16 sequences after 850 shared tokens: 84 ms per step against 119 ms), but in this llama.cpp build its
    numbers depend on where a sequence's cells sit in the shared KV cache: the log-probability of one prompt's
    first token moved between -1.48 and -1.61 with other sequences' cells in front of it, while flash
    attention gave -1.5907 in every layout, batched or token by token, f16 or f32 cache. Requests that share
    one cache must not change each other's numbers, so flash attention stays on."""
    if spec.flash_attn:
        return "on"
    option = str(spec.option("flash_attn", "auto")).lower()
    if option in ("on", "true", "1"):
        return "on"
    if option in ("off", "false", "0"):
        return "off"
    return "auto"


def resolve_device(spec: ModelSpec) -> dict[str, Any]:
    """The llama.cpp settings a spec asks for: device, n_gpu_layers, threads, n_ctx and a flash-attention
    mode (see _flash_attn_mode). The backend's info() reports what llama.cpp actually chose."""
    device = (spec.device or "auto").lower()
    if device not in DEVICES:
        raise BackendError(f"Unknown device {spec.device!r}; use one of: {', '.join(DEVICES)}.")
    info = build_info()
    if device == "metal" and not info["metal"]:
        raise BackendError(
            f"device: metal needs a Metal build of llama-cpp-python (this build has none). {GPU_DOC_HINT}"
        )
    if device in ("gpu", "metal") and not info["gpu_offload"]:
        raise BackendError(
            f"device: {device} needs a GPU build of llama-cpp-python; this one runs on CPU only. "
            f"Use device: cpu or auto. {GPU_DOC_HINT}"
        )
    if spec.n_gpu_layers is not None:
        n_gpu_layers = int(spec.n_gpu_layers)
    elif device == "cpu":
        n_gpu_layers = 0
    else:  # auto / gpu / metal: offload every layer when the build can
        n_gpu_layers = -1 if info["gpu_offload"] else 0
    if spec.threads is not None and spec.threads < 1:
        raise BackendError(f"threads must be at least 1, got {spec.threads}.")
    if spec.n_ctx < 0:
        raise BackendError(f"n_ctx must be positive (or 0 for the model's own length), got {spec.n_ctx}.")
    used = "cpu" if n_gpu_layers == 0 else ("metal" if info["metal"] else "gpu")
    flash_attn = _flash_attn_mode(spec)
    return {
        "device": used,
        "requested": device,
        "n_gpu_layers": n_gpu_layers,
        "threads": int(spec.threads or default_threads()),
        "n_ctx": int(spec.n_ctx),
        "flash_attn": flash_attn,
    }
