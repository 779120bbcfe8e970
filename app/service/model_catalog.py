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

    scheduler: Any


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
        from backends.llama.models.gguf import model_file_info, scan_models

        found: list[tuple[str, Any]] = []
        try:
            from backends.llama.models.bundled import bundled_model_path

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
        loaded = self._loaded_items()
        pool = self._service.loaded_pool
        broken: dict[str, str] = pool.broken() if pool is not None and hasattr(pool, "broken") else {}
        rows = []
        shared = self._service.share_mode  # visitors see file names: the machine's folders are the owner's
        for source, info in found:
            key = "bundled" if source == "bundled" else info.path
            rows.append({
                "key": info.name if shared and key != "bundled" else key, "source": source,
                "name": Path(info.path).name if source == "bundled" else info.name,  # its GGUF name is a run's
                "path": info.name if shared else info.path,
                "size_bytes": info.size_bytes,
                "quantization": info.quantization, "context_length": info.context_length,
                "architecture": info.architecture, "device": self.device_for(key),
                "loaded": info.path in loaded, "weights": self.weights_for(info, loaded.get(info.path)),
                "speculative": (loaded.get(info.path) or {}).get("speculative", ""),
                "broken": broken.get(info.name, ""),
                **_capabilities(source, info, shared),
            })
        return _distinct_names(rows)

    @property
    def weights_dir(self) -> Path:
        """Where CPU-fast copies of models and their measurements are kept."""
        from backends.llama.models.cpu_weights import WEIGHTS_SUBDIR

        return Path(self._service.models_dir) / WEIGHTS_SUBDIR

    def weights_for(self, info: Any, loaded: dict[str, Any] | None) -> str:
        """Which weights run for this model on CPU, or would: the loaded model's choice, else a stored
        measurement, else what its file type means (backends/llama/models/cpu_weights.py)."""
        from backends.llama.models.cpu_weights import decision_summary, find_decision, lacks_fast_cpu_path

        weights = (loaded or {}).get("weights")
        if weights:
            return f"running {weights['ran']} ({weights['quantization']}): {weights['reason']}"
        try:
            decision = find_decision(Path(info.path), self.weights_dir)
        except OSError:
            decision = None
        if decision:
            return decision_summary(decision)
        if lacks_fast_cpu_path(info.quantization):
            return f"original; {info.quantization} has no fast CPU matrix path: make a CPU-fast copy to measure one"
        return f"original ({info.quantization} has a fast CPU path)"

    def make_cpu_copy(self, key: str) -> str:
        """Write the Q8_0 copy of a model (once) and measure it against the original on this machine now;
        `cpu_weights: auto` follows the stored result from then on. Returns the result as one line."""
        if self._service.share_mode:
            raise UserError("making model copies is disabled on a shared app; the owner can make them locally")
        if self._service.dry_run:
            raise UserError("this app runs with --dry-run (a fake model); start it without --dry-run to measure "
                            "models")
        from backends.base import BackendError
        from backends.llama.devices import resolve_device
        from backends.llama.models.cpu_weights import decision_summary, make_and_measure

        entry = next((e for e in self.entries() if e["key"] == key), None)
        if entry is None:
            raise UserError(f"no model {key!r} in the list")
        spec = self._spec(key)
        try:
            device = resolve_device(spec)
            if device["n_gpu_layers"] != 0:
                raise UserError(f"{entry['name']} runs on the GPU with the current device settings, where a CPU copy "
                                "changes nothing; set Device to cpu first to measure it for CPU runs")
            source = Path(entry["path"])
            decision = make_and_measure(source, spec, device, self.weights_dir,
                                        together=lambda: self._service.pool.room_for_probe(source))
        except BackendError as exc:
            raise UserError(str(exc)) from None
        pool = self._service.loaded_pool
        if pool is not None:
            pool.weights.forget()
        note = " Unload and load the model to switch." if entry["loaded"] else ""
        return f"{decision_summary(decision)}.{note}"

    def device_for(self, key: str) -> str:
        try:
            from backends.llama.devices import resolve_device

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
        from backends.llama.models.gguf import model_file_info

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
        return set(self._loaded_items())

    def _loaded_items(self) -> dict[str, dict[str, Any]]:
        """The pool's loaded models by source file path (a model running a CPU copy counts as its source)."""
        pool = self._service.loaded_pool
        if pool is None:
            return {}
        items: dict[str, dict[str, Any]] = {}
        for item in pool.loaded():
            path = _loaded_path(item)
            if path:
                items[path] = item if isinstance(item, dict) else {}
        return items

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

    def check_remote(self, base_url: str, model: str | None = None, api_key_env: str | None = None) -> dict[str, Any]:
        """Contact a remote OpenAI-compatible server: its models and what it supports for one of them (the first it
        lists when no model is given). Only the owner may: on a shared app, visitors would make this machine open
        connections to addresses of their choosing."""
        if self._service.share_mode:
            raise UserError("checking remote servers is disabled on a shared app; the owner can check them locally")
        import re

        from backends.base import BackendError
        from backends.remote.openai_caps import check_server

        url = str(base_url or "").strip()
        if not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", url):
            raise UserError("type the server's base URL first, such as http://127.0.0.1:8000/v1")
        key_env = str(api_key_env or "").strip() or None
        if key_env and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key_env):
            raise UserError(f"{key_env!r} is not an environment variable name; give the variable's name (such as "
                            "OPENAI_API_KEY), never the key itself")
        try:
            caps = check_server(url, str(model or "").strip() or None, key_env, timeout_s=30)
        except BackendError as exc:
            raise UserError(str(exc)) from None
        entry = {"source": "openai", "base_url": url, "model": caps.model, **({"api_key_env": key_env} if key_env
                                                                                else {})}
        return {"base_url": url, "model": caps.model, "server": caps.server, "models": list(caps.models),
                "rows": caps.rows(), "notes": list(caps.notes), "entry": entry}


    def remote_servers(self) -> list[dict[str, Any]]:
        """Each server of the remote models on several servers that runs have used: the model, the server's URL,
        up or down, outstanding requests, requests served, mean latency, the last error. The owner's only."""
        if self._service.share_mode:
            return []
        from app.run.providers import remote_backends

        rows = []
        for backend in remote_backends(self._service.scheduler.provider):
            servers = getattr(backend, "servers", None)
            if callable(servers):
                rows += [{"model": getattr(backend, "model_name", ""), **row} for row in servers()]
        return rows


def _capabilities(source: str, info: Any, shared: bool) -> dict[str, Any]:
    """File name, templates, rank head and the `models:` entry (as `metagen models list`); no path when shared."""
    from app.service.local_models import describe

    row = describe("bundled" if source == "bundled" else "path", info)
    keep = {k: row[k] for k in ("file", "chat_template", "thinking_template", "rank_head", "prompt_format", "entry")}
    if shared and source != "bundled":
        keep["entry"] = {**keep["entry"], "path": info.name}
    return keep


def _loaded_path(item: Any) -> str | None:
    """The model file path of an entry of ModelPool.loaded() (a dict, an object or a key tuple)."""
    if isinstance(item, dict):
        value = item.get("source_path") or item.get("path")
    else:
        value = getattr(item, "path", None)
    return str(Path(value).resolve()) if value else None


def _distinct_names(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Two files of one model (a Q4_K_M and a Q8_0 of Qwen3) share the GGUF's model name: show their files too."""
    names = [r["name"] for r in rows]
    for row in rows:
        if names.count(row["name"]) > 1:
            row["name"] = f"{row['name']} · {Path(str(row['path'])).name}"
    return rows
