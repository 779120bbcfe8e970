"""The model catalog: the bundled model, GGUF files in the models folder and files added by path, with
their device plan, loaded through the app's pool."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Protocol

from app.service.errors import UserError

log = logging.getLogger(__name__)


class CatalogHost(Protocol):
    """What the catalog needs of the service that owns it."""

    models_dir: Path
    dry_run: bool

    @property
    def share_mode(self) -> bool: ...

    @property
    def loaded_pool(self) -> Any: ...

    @property
    def pool(self) -> Any: ...


class ModelCatalog:
    """The models the Models tab lists: the bundled one, GGUFs in the models folder, and files added by path;
    with what llama.cpp will do with each (device, layers offloaded) and load/unload through the app's pool."""

    def __init__(self, service: CatalogHost) -> None:
        self._service = service
        self._added: list[str] = []
        self._lock = threading.Lock()

    def _spec(self, path: str | None) -> Any:
        """The spec a workflow would use for this file, with the remembered device settings applied."""
        from app.platform.settings import load_settings
        from backends.base import ModelSpec

        spec = ModelSpec() if path in (None, "", "bundled") else ModelSpec(source="path", path=path)
        return load_settings().device.apply(spec)

    def device_settings(self) -> dict[str, Any]:
        from dataclasses import asdict

        from app.platform.settings import load_settings

        return asdict(load_settings().device)

    def save_device_settings(self, values: dict[str, Any]) -> dict[str, Any]:
        """Remember device / threads / GPU layers for models whose workflow leaves them open."""
        if self._service.share_mode:
            raise UserError("device settings can only be changed by the owner, not on a shared app")
        from app.platform.settings import update_device_settings

        try:
            update_device_settings(values)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        return self.device_settings()

    def entries(self) -> list[dict[str, Any]]:
        from backends.gguf import model_file_info, scan_models

        found: list[tuple[str, Any]] = []
        try:
            from backends.bundled import bundled_model_path

            found.append(("bundled", model_file_info(bundled_model_path())))
        except Exception as exc:
            log.warning("bundled model unavailable: %s", exc)
        seen = {info.path for _, info in found}
        for info in scan_models(self._service.models_dir):
            if info.path not in seen:
                found.append(("models folder", info))
                seen.add(info.path)
        with self._lock:
            added = list(self._added)
        for path in added:
            try:
                info = model_file_info(path)
            except Exception as exc:
                log.warning("added model %s unreadable: %s", path, exc)
                continue
            if info.path not in seen:
                found.append(("added", info))
                seen.add(info.path)
        loaded = self.loaded_paths()
        rows = []
        for source, info in found:
            key = "bundled" if source == "bundled" else info.path
            rows.append({
                "key": key, "source": source, "name": info.name, "path": info.path, "size_bytes": info.size_bytes,
                "quantization": info.quantization, "context_length": info.context_length,
                "architecture": info.architecture, "device": self.device_for(key),
                "loaded": info.path in loaded,
            })
        return rows

    def device_for(self, key: str) -> str:
        try:
            from backends.devices import resolve_device

            d = resolve_device(self._spec(key))
        except Exception as exc:
            return f"unavailable: {exc}"
        layers = d["n_gpu_layers"]
        offload = "no layers offloaded" if layers == 0 else ("all layers offloaded" if layers < 0 else
                                                             f"{layers} layers offloaded")
        return f"{d['device'].upper()} · {offload} · {d['threads']} threads"

    def add(self, path: str) -> str:
        if self._service.share_mode:
            raise UserError("adding model files is disabled on a shared app; the owner can add them to the "
                            "models folder")
        from backends.base import BackendError
        from backends.gguf import model_file_info

        clean = str(path or "").strip().strip('"')
        if not clean:
            raise UserError("type the path of a .gguf file first")
        if Path(clean).expanduser().is_dir():
            raise UserError(f"{clean} is a folder; give the path of a .gguf file in it (or make it the models "
                            "folder with $METAGEN_MODELS)")
        if not Path(clean).expanduser().is_file():
            raise UserError(f"no file at {clean}; check the path")
        try:
            info = model_file_info(clean)
        except (BackendError, OSError, ValueError) as exc:
            raise UserError(f"{clean} is not a usable GGUF model: {exc}") from None
        with self._lock:
            if info.path not in self._added:
                self._added.append(info.path)
        return info.path

    def loaded_paths(self) -> set[str]:
        pool = self._service.loaded_pool
        if pool is None:
            return set()
        paths_: set[str] = set()
        for item in pool.loaded():
            path = _loaded_path(item)
            if path:
                paths_.add(path)
        return paths_

    def load(self, key: str) -> None:
        if self._service.share_mode:
            raise UserError("loading models is disabled on a shared app; runs load the owner's models as needed")
        if self._service.dry_run:
            raise UserError("this app runs with --dry-run (a fake model); start it without --dry-run to load models")
        from backends.base import BackendError

        try:
            self._service.pool.get(self._spec(key))
        except BackendError as exc:
            raise UserError(str(exc)) from None

    def unload(self, key: str) -> bool:
        if self._service.share_mode:
            raise UserError("unloading models is disabled on a shared app; only the owner can unload them, on "
                            "their own machine")
        pool = self._service.loaded_pool
        if pool is None:
            return False
        entry = next((e for e in self.entries() if e["key"] == key), None)
        if entry is None:
            raise UserError(f"no model {key!r} in the list")
        busy = [item for item in pool.loaded() if _loaded_path(item) == entry["path"] and item.get("busy")]
        if busy:
            raise UserError(f"{entry['name']} is answering a run right now; cancel the run or wait, then unload")
        return bool(pool.unload(entry["path"]))


def _loaded_path(item: Any) -> str | None:
    """The model file path of an entry of ModelPool.loaded() (a dict, an object or a key tuple)."""
    if isinstance(item, dict):
        value = item.get("path")
    else:
        value = getattr(item, "path", None)
    return str(Path(value).resolve()) if value else None
