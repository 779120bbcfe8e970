"""Remembered user settings (model device settings: device, CPU threads, GPU layers), as JSON in the data dir."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from app.platform.fileio import atomic_write_text
from app.platform.paths import settings_path
from backends.base import LLMBackend, ModelSpec

log = logging.getLogger(__name__)

SETTINGS_VERSION = 1
DEVICES = ("auto", "cpu", "gpu", "metal")
MAX_THREADS = 256
MAX_GPU_LAYERS = 1000


@dataclass(frozen=True)
class DeviceSettings:
    """Defaults for models whose workflow spec leaves them open (`device: auto`, no threads/layers)."""

    device: str = "auto"
    threads: int | None = None
    """CPU threads; None lets llama.cpp choose."""
    n_gpu_layers: int | None = None
    """Layers offloaded to the GPU / Metal; -1 = all, 0 = none, None = the engine's choice for the device."""

    def problems(self) -> list[str]:
        found = []
        if self.device not in DEVICES:
            found.append(f"device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.threads is not None and (not _is_int(self.threads) or not 1 <= self.threads <= MAX_THREADS):
            found.append(f"threads must be a whole number from 1 to {MAX_THREADS} (or empty for automatic), "
                         f"got {self.threads!r}")
        if self.n_gpu_layers is not None and (not _is_int(self.n_gpu_layers)
                                              or not -1 <= self.n_gpu_layers <= MAX_GPU_LAYERS):
            found.append(f"GPU layers must be -1 (all), 0 (none) or a number of layers up to {MAX_GPU_LAYERS}, "
                         f"got {self.n_gpu_layers!r}")
        return found

    def apply(self, spec: ModelSpec) -> ModelSpec:
        """`spec` with these settings filled in where the workflow left them open."""
        return replace(
            spec,
            device=self.device if spec.device == "auto" else spec.device,
            threads=self.threads if spec.threads is None else spec.threads,
            n_gpu_layers=self.n_gpu_layers if spec.n_gpu_layers is None else spec.n_gpu_layers,
        )


@dataclass(frozen=True)
class Settings:
    device: DeviceSettings = field(default_factory=DeviceSettings)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    """Keys this version does not know, kept so that a newer version's settings survive a save."""

    def to_json(self) -> dict[str, Any]:
        return {**self.extra, "version": SETTINGS_VERSION, "device": asdict(self.device)}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def device_settings_from(data: Any) -> DeviceSettings:
    """Build and check device settings from a JSON mapping / form values; ValueError listing every problem."""
    if not isinstance(data, dict):
        raise ValueError("device settings must be a mapping of device, threads, n_gpu_layers")
    unknown = sorted(set(data) - {"device", "threads", "n_gpu_layers"})
    if unknown:
        raise ValueError(f"unknown device setting(s): {', '.join(unknown)}")

    def number(key: str) -> Any:
        value = data.get(key)
        if value in (None, ""):
            return None
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                return value
        return value

    settings = DeviceSettings(device=str(data.get("device") or "auto").strip().lower(),
                              threads=number("threads"), n_gpu_layers=number("n_gpu_layers"))
    problems = settings.problems()
    if problems:
        raise ValueError("; ".join(problems))
    return settings


def load_settings(path: Path | None = None) -> Settings:
    """The saved settings; defaults when the file is missing, and (with a warning) when it is unreadable."""
    path = path or settings_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Settings()
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        log.warning("ignoring unreadable settings file %s (%s); using defaults", path, exc)
        return Settings()
    if not isinstance(data, dict):
        log.warning("ignoring settings file %s: not a JSON object; using defaults", path)
        return Settings()
    extra = {k: v for k, v in data.items() if k not in {"version", "device"}}
    try:
        device = device_settings_from(data.get("device") or {})
    except ValueError as exc:
        log.warning("ignoring bad device settings in %s (%s); using defaults", path, exc)
        device = DeviceSettings()
    return Settings(device=device, extra=extra)


def save_settings(settings: Settings, path: Path | None = None) -> Path:
    """Write atomically (never a half-written file); returns the path."""
    path = path or settings_path()
    atomic_write_text(path, json.dumps(settings.to_json(), indent=2, sort_keys=True) + "\n")
    return path


def update_device_settings(values: dict[str, Any], path: Path | None = None) -> Settings:
    """Validate form values, save them, and return the new settings (ValueError says what to fix)."""
    current = load_settings(path)
    new = replace(current, device=device_settings_from(values))
    save_settings(new, path)
    return new


def with_device_settings(provider: Callable[[ModelSpec], LLMBackend],
                         settings: Callable[[], DeviceSettings] | None = None) -> Callable[[ModelSpec], LLMBackend]:
    """Wrap a backend provider so that every spec gets the remembered device settings (read at each call,
    so a change in the app applies to the next model load)."""
    get = settings or (lambda: load_settings().device)

    def provide(spec: ModelSpec) -> LLMBackend:
        return provider(get().apply(spec))

    provide.remotes = getattr(provider, "remotes", None)  # type: ignore[attr-defined]
    return provide


def cpu_count() -> int:
    return os.cpu_count() or 1
