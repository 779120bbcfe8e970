"""The Models tab's "Get a model": Hub search, a repo's GGUFs with a fits/doesn't-fit estimate and the recommended
quant, one pull at a time with progress and cancel, and the catalog's recommendations. Owner only: a shared app
refuses every call (visitors would fill the owner's disk and network)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from app.service.errors import UserError

log = logging.getLogger(__name__)

PREFERRED_QUANT = "Q4_K_M"


class HubHost(Protocol):
    models_dir: Any

    @property
    def share_mode(self) -> bool: ...


class ModelHub:
    """Owner-only Hub access for the Models tab; one pull at a time, cancellable from another request."""

    def __init__(self, service: HubHost) -> None:
        self._service = service
        self._cancel = threading.Event()
        self._busy = threading.Lock()

    def _owner_only(self) -> None:
        if self._service.share_mode:
            raise UserError("getting models from the Hub is disabled on a shared app; the owner can pull models "
                            "locally (metagen models pull)", code="shared")

    def search(self, query: str) -> list[dict[str, Any]]:
        self._owner_only()
        from app.service.model_pull import search_models

        return search_models(query, limit=30)

    def repo_files(self, repo: str, n_ctx: int = 4096) -> dict[str, Any]:
        """The repo's downloadable GGUFs (shards as one) with quant, size, memory needed at `n_ctx`, whether it
        fits, and the recommended one (Q4_K_M when it fits, else the largest that fits)."""
        self._owner_only()
        from backends.llama.models.hub_api import repo_files
        from backends.llama.models.hub_files import HubError, gguf_groups, parse_ref, quant_of
        from backends.llama.models.hub_fit import available_memory, fit, remote_metadata

        try:
            name, _ = parse_ref(repo)
            files, commit = repo_files(name)
            groups = gguf_groups(files)
            if not groups:
                raise HubError("no_gguf", f"{name} has no GGUF file; search for a repo named ...-GGUF")
            smallest = min(groups.values(), key=lambda g: sum(f.size or 0 for f in g))
            metadata = remote_metadata(name, smallest[0].path, commit)
        except HubError as exc:
            raise UserError(str(exc), code=exc.code) from None
        free, where = available_memory(_build_info())
        rows = []
        for group in groups.values():
            size = sum(f.size or 0 for f in group)
            rows.append({"file": group[0].name, "quant": quant_of(group[0].path) or "?", "size_bytes": size,
                         "shards": len(group), **fit(size, metadata, n_ctx, free)})
        rows.sort(key=lambda r: r["size_bytes"])
        recommended = _recommend(rows)
        for r in rows:
            r["recommended"] = r["file"] == recommended
        return {"repo": name, "rows": rows, "free_bytes": free, "where": where, "n_ctx": n_ctx,
                "architecture": (metadata or {}).get("general.architecture")}

    def pull(self, repo: str, file: str | None,
             report: Callable[[str, int, int | None, float], None] | None = None) -> dict[str, Any]:
        """Pull one file (all its shards) of `repo` into the models folder; `report(name, done, total, rate)`."""
        self._owner_only()
        from app.service.model_pull import pull_model
        from backends.llama.models.hub_progress import CallbackProgress

        if not self._busy.acquire(blocking=False):
            raise UserError("a pull is already running; wait for it or cancel it", code="busy")
        self._cancel.clear()
        try:
            result = pull_model(repo, file=file or None, models_dir=self._service.models_dir,
                                progress=(lambda: CallbackProgress(report)) if report else None,
                                cancel=self._cancel.is_set)
        finally:
            self._busy.release()
        return {"path": str(result.path), "file": result.path.name, "how": result.how, "entry": result.entry()}

    def cancel(self) -> bool:
        """Stop the running pull (its partial file stays for the next pull); False when none runs."""
        self._owner_only()
        if not self._busy.locked():
            return False
        self._cancel.set()
        return True

    def use_in_workflow(self, yaml_text: str, entry: dict[str, Any], alias: str = "main") -> str:
        """The open workflow's YAML with `models.<alias>` set to `entry` (a pulled model's), ready for the editor."""
        self._owner_only()
        from app.workflow.problems import WorkflowError
        from app.workflow.spec import dump_yaml, load_workflow_text

        if not str(yaml_text or "").strip():
            raise UserError("open a workflow in the Editor tab first, then use the model in it", code="no_workflow")
        try:
            data = load_workflow_text(yaml_text).to_dict()
        except WorkflowError as exc:
            raise UserError(f"the editor's workflow has problems to fix first: {exc}", code="bad_workflow") from None
        data["models"] = {**(data.get("models") or {}), alias: dict(entry)}
        return dump_yaml(data)

    def recommended(self) -> list[dict[str, Any]]:
        """The catalog's entries, each with `fits_here`: whether its weights (with llama.cpp's overhead, the KV
        cache unknown) fit the memory free on this machine now (None when that is unknown)."""
        self._owner_only()
        from app.service.model_roles import catalog_entries
        from backends.llama.models.hub_fit import available_memory, fit

        free, where = available_memory(_build_info())
        return [{**e, "fits_here": fit(int(float(e.get("size_gb") or 0) * 1e9), None, 0, free)["fits"],
                 "memory_where": where} for e in catalog_entries()]


def _recommend(rows: list[dict[str, Any]]) -> str | None:
    fitting = [r for r in rows if r["fits"] is not False]
    for r in fitting:
        if r["quant"] == PREFERRED_QUANT:
            return r["file"]
    return fitting[-1]["file"] if fitting else None


def _build_info() -> dict[str, Any] | None:
    try:
        from backends.llama.devices import build_info

        return build_info()
    except Exception as exc:  # no llama.cpp: RAM is all there is to compare against
        log.info("no llama.cpp build info: %s", exc)
        return None
