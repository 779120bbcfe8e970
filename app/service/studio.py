"""The service layer the UI calls: workflow files, YAML <-> editor JSON, validation, queued runs, models."""

from __future__ import annotations

import logging
import shutil
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app import paths
from app.fileio import atomic_write_text
from app.problems import Issue, WorkflowError, errors
from app.scheduler import Budget, CancelToken, RunResult, Scheduler, resolve_inputs
from app.share import (
    QueueFullError,
    RunGate,
    SharePolicy,
    check_workflow_allowed,
    list_workflow_names,
    resolve_model_choices,
    safe_workflow_name,
    workflow_path,
)
from app.ui.live_run import LiveRun
from app.validation import validate
from app.workflow import Workflow, load_workflow_text, workflow_from_dict
from nodes.registry import NodeRegistry, default_registry

log = logging.getLogger(__name__)

MAX_KEPT_RUNS = 50
"""Finished live runs kept in memory for the UI (older ones are read from the trace store)."""


class UserError(ValueError):
    """A request the user can fix; the message says what is wrong and how to fix it."""


def issue_json(issue: Issue) -> dict[str, Any]:
    return issue.to_json()


def issues_summary(issues: list[Issue]) -> str:
    """One readable paragraph of problems for error banners."""
    return "; ".join(i.format() for i in issues[:5]) + (f" (and {len(issues) - 5} more)" if len(issues) > 5 else "")


@dataclass
class _RunHandle:
    live: LiveRun
    cancel: CancelToken
    thread: threading.Thread | None = None


class StudioService:
    """Everything the browser UI may ask of the app. One instance per app; thread-safe.

    Every workflow file access goes through `path_for(name)`, and every run through the policy's checks,
    so share mode (app.share) plugs in at one place."""

    def __init__(
        self,
        *,
        registry: NodeRegistry | None = None,
        provider: Callable[[Any], Any] | None = None,
        policy: SharePolicy | None = None,
        workflows_dir: Path | None = None,
        examples_dir: Path | None = None,
        models_dir: Path | None = None,
        trace_db: Path | None = None,
        trace_store: Any = None,
        pool: Any = None,
        dry_run: bool = False,
        fake_latency_s: float = 0.0,
    ) -> None:
        self.registry = registry or default_registry()
        self.policy = policy or SharePolicy.local()
        self.workflows_dir = Path(workflows_dir or paths.workflows_dir()).expanduser()
        self.examples_dir = examples_dir if examples_dir is not None else _default_examples_dir()
        self.models_dir = Path(models_dir or paths.models_dir()).expanduser()
        self.dry_run = dry_run
        self._pool = pool
        if provider is None:
            from app.models import fake_provider, llama_provider

            if dry_run:
                provider = fake_provider(latency_s=fake_latency_s)
            else:
                from app.settings import with_device_settings

                provider = with_device_settings(llama_provider(self.pool))
        self.scheduler = Scheduler(self.registry, provider, allow_python=self.policy.allow_python)
        self._trace_db = Path(trace_db).expanduser() if trace_db else None
        self._trace_store = trace_store
        self._trace_error: str | None = None
        self._gate = RunGate.for_policy(self.policy)
        self._runs: dict[str, _RunHandle] = {}
        self._runs_lock = threading.Lock()
        self.models = ModelCatalog(self)
        self.ensure_workflows_dir()

    # ------------------------------------------------------------------ shared resources

    @property
    def pool(self) -> Any:
        """The app's one llama.cpp ModelPool (created on first use)."""
        if self._pool is None and not self.dry_run:
            from backends.pool import ModelPool

            self._pool = ModelPool()
        return self._pool

    @property
    def trace_store(self) -> Any:
        """The TraceStore, opened on first use; None (with `trace_error`) when it cannot be used."""
        if self._trace_store is None and self._trace_error is None:
            try:
                from app.traces.store import TraceStore

                self._trace_store = TraceStore(self._trace_db or paths.trace_db_path())
            except Exception as exc:  # the UI still edits and runs without traces
                log.warning("trace store unavailable: %s", exc)
                self._trace_error = str(exc)
        return self._trace_store

    @property
    def trace_error(self) -> str | None:
        return self._trace_error

    def schema(self) -> list[dict[str, Any]]:
        return self.registry.schema()

    def close(self) -> None:
        for handle in list(self._runs.values()):
            handle.cancel.cancel("the app is shutting down")
        if self._trace_store is not None and hasattr(self._trace_store, "close"):
            self._trace_store.close()
        if self._pool is not None and hasattr(self._pool, "close"):
            self._pool.close()

    # ------------------------------------------------------------------ workflow files

    def path_for(self, name: str) -> Path:
        """The one place a workflow name becomes a file path (raises UserError for unusable names)."""
        try:
            return workflow_path(self.workflows_dir, name)
        except ValueError as exc:
            raise UserError(str(exc)) from None

    def ensure_workflows_dir(self) -> None:
        """On first start (no workflows folder yet) create it and copy the example workflows in."""
        if self.workflows_dir.exists():
            return
        self.workflows_dir.mkdir(parents=True, exist_ok=True)
        for example in self._example_files():
            try:
                shutil.copyfile(example, self.path_for(example.stem))
            except (OSError, UserError) as exc:
                log.warning("could not copy example %s: %s", example.name, exc)

    def _example_files(self) -> list[Path]:
        if self.examples_dir is None or not Path(self.examples_dir).is_dir():
            return []
        return sorted(Path(self.examples_dir).glob("*.yaml"))

    def list_workflows(self) -> list[str]:
        return list_workflow_names(self.workflows_dir)

    def list_examples(self) -> list[str]:
        return [p.stem for p in self._example_files()]

    def read_workflow_text(self, name: str) -> str:
        path = self.path_for(name)
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UserError(f"there is no workflow named {safe_workflow_name(name)!r} in the workflows folder; "
                            "pick one from the list") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"cannot read workflow {name!r}: {exc}") from None

    def read_example_text(self, name: str) -> str:
        for path in self._example_files():
            if path.stem == name:
                return path.read_text(encoding="utf-8")
        raise UserError(f"there is no example named {name!r}; pick one from the list")

    def save_workflow(self, name: str, data: dict[str, Any], *, overwrite: bool = True) -> dict[str, Any]:
        """Save editor JSON as canonical YAML, atomically. Refuses to overwrite when `overwrite` is False."""
        path = self.path_for(name)
        if path.exists() and not overwrite:
            raise UserError(f"a workflow named {path.stem!r} already exists; choose another name or use Save")
        wf = self.workflow_from_json(data)
        text = wf.to_yaml()
        try:
            atomic_write_text(path, text)
        except OSError as exc:
            raise UserError(f"cannot save {path.name}: {exc.strerror or exc}") from None
        log.info("saved workflow %s", path)
        return {"name": path.stem, "yaml": text}

    def save_yaml_text(self, name: str, text: str, *, overwrite: bool = True) -> dict[str, Any]:
        """Save YAML exactly as given (an uploaded file), after checking that it parses."""
        parsed = self.parse_yaml(text)
        if parsed["error"]:
            raise UserError(f"not saved: {parsed['error']['message']}")
        path = self.path_for(name)
        if path.exists() and not overwrite:
            raise UserError(f"a workflow named {path.stem!r} already exists; choose another name")
        atomic_write_text(path, text)
        return {"name": path.stem}

    # ------------------------------------------------------------------ YAML <-> editor JSON

    def workflow_from_json(self, data: Any) -> Workflow:
        if not isinstance(data, dict):
            raise UserError("the editor sent no workflow (expected a JSON object); reload the page")
        try:
            return workflow_from_dict(data)
        except WorkflowError as exc:
            raise UserError(issues_summary(exc.issues)) from None

    def check(self, wf: Workflow) -> list[Issue]:
        """Validation problems plus what the policy refuses (share mode)."""
        return validate(wf, self.registry) + check_workflow_allowed(wf, self.policy)

    def describe(self, wf: Workflow) -> dict[str, Any]:
        """The editor's view of a workflow: JSON for the canvas, canonical YAML and the problems."""
        return {
            "workflow": wf.to_dict(),
            "yaml": wf.to_yaml(),
            "issues": [issue_json(i) for i in self.check(wf)],
            "inputs": {name: {"type": s.type, "default": s.default, "description": s.description}
                       for name, s in wf.inputs.items()},
        }

    def from_editor(self, data: Any) -> dict[str, Any]:
        """Canvas JSON -> canonical YAML + issues (the canvas -> YAML direction)."""
        return self.describe(self.workflow_from_json(data))

    def parse_yaml(self, text: str) -> dict[str, Any]:
        """YAML text -> canvas JSON + issues, or `error` {message, line} (the YAML -> canvas direction).
        A syntax error never loses anything: the caller keeps its text and canvas."""
        try:
            wf = load_workflow_text(text)
        except WorkflowError as exc:
            first = exc.issues[0]
            return {"error": {"message": first.message + (f" ({first.hint})" if first.hint else ""),
                              "line": first.line, "code": first.code},
                    "issues": [issue_json(i) for i in exc.issues]}
        return {**self.describe(wf), "error": None}

    def open_workflow(self, name: str) -> dict[str, Any]:
        """A saved workflow for the editor; the YAML is the file's text as saved."""
        text = self.read_workflow_text(name)
        result = self.parse_yaml(text)
        result["yaml"] = text
        result["name"] = self.path_for(name).stem
        return result

    def open_example(self, name: str) -> dict[str, Any]:
        text = self.read_example_text(name)
        result = self.parse_yaml(text)
        result["yaml"] = text
        result["name"] = name
        return result

    # ------------------------------------------------------------------ runs

    def start_run(self, data: Any, inputs: dict[str, Any] | None = None, seed: int = 0,
                  budget: Budget | None = None) -> dict[str, Any]:
        """Validate, then queue the run on a worker thread; returns its first snapshot at once."""
        wf = self.workflow_from_json(data)
        problems = errors(self.check(wf))
        if problems:
            raise UserError("the workflow has problems; fix them first: " + issues_summary(problems))
        wf = resolve_model_choices(wf, self.policy)
        try:
            values = resolve_inputs(wf, _clean_inputs(wf, inputs or {}))
        except WorkflowError as exc:
            raise UserError(issues_summary(exc.issues)) from None
        try:
            seed = int(seed)
        except (TypeError, ValueError):
            raise UserError(f"the seed must be a whole number, got {seed!r}") from None
        with self._runs_lock:
            waiting = sum(1 for h in self._runs.values() if h.live.status == "queued")
            if waiting >= self.policy.max_queue:
                raise UserError(f"{waiting} runs are already waiting; wait for one to finish or cancel one")
            run_id = uuid.uuid4().hex[:12]
            handle = _RunHandle(LiveRun(run_id, wf.name, [n.id for n in wf.nodes]), CancelToken())
            self._runs[run_id] = handle
            self._forget_old_runs()
        budget = self.policy.cap_budget(budget) if self.policy.share_mode else (budget or Budget())
        handle.thread = threading.Thread(target=self._work, args=(handle, wf, values, seed, budget),
                                         name=f"run-{run_id}", daemon=True)
        handle.thread.start()
        return self.run_status(run_id)

    def _work(self, handle: _RunHandle, wf: Workflow, values: dict[str, Any], seed: int, budget: Budget) -> None:
        live, cancel = handle.live, handle.cancel
        try:
            with self._gate.slot(cancelled=lambda: cancel.cancelled):
                if cancel.cancelled:
                    live.finish("cancelled", error="cancelled before it started")
                    return
                live.mark_running()
                observers: list[Any] = [live]
                store = self.trace_store
                if store is not None:
                    observers.append(store)
                result: RunResult = self.scheduler.run(wf, values, seed=seed, budget=budget, cancel=cancel,
                                                       observers=observers, run_id=live.run_id)
            live.finish(result.status, outputs=_jsonable(result.outputs), error=_friendly_error(result),
                        stats=result.stats.to_json())
        except QueueFullError as exc:
            live.finish("cancelled" if cancel.cancelled else "failed", error=str(exc))
        except WorkflowError as exc:
            live.finish("invalid", error=issues_summary(exc.issues))
        except Exception as exc:
            log.exception("run %s crashed", live.run_id)
            live.finish("failed", error=f"the run stopped on an unexpected error: {type(exc).__name__}: {exc}")

    def _forget_old_runs(self) -> None:
        finished = [rid for rid, h in self._runs.items() if h.live.finished]
        for rid in finished[: max(0, len(finished) - MAX_KEPT_RUNS)]:
            del self._runs[rid]

    def _handle(self, run_id: str) -> _RunHandle:
        handle = self._runs.get(run_id)
        if handle is None:
            raise UserError(f"no live run {run_id!r} (it may be older than this app session; see the Traces tab)")
        return handle

    def run_status(self, run_id: str) -> dict[str, Any]:
        handle = self._handle(run_id)
        snap = handle.live.snapshot()
        if snap["status"] == "queued":
            with self._runs_lock:
                queued = [h.live.run_id for h in self._runs.values() if h.live.status == "queued"]
            snap["queue_position"] = queued.index(run_id) + 1 if run_id in queued else 0
        if snap["finished"]:
            snap["output_views"] = output_views(snap["outputs"])
        return snap

    def cancel_run(self, run_id: str) -> dict[str, Any]:
        handle = self._handle(run_id)
        if not handle.live.finished:
            handle.cancel.cancel("cancelled by the user")
        return self.run_status(run_id)

    def wait_run(self, run_id: str, timeout: float | None = None) -> dict[str, Any]:
        """Block until the run ends (tests and the CLI); returns the final snapshot."""
        handle = self._handle(run_id)
        if handle.thread is not None:
            handle.thread.join(timeout)
        return self.run_status(run_id)

    def active_runs(self) -> list[dict[str, Any]]:
        with self._runs_lock:
            handles = list(self._runs.values())
        return [self.run_status(h.live.run_id) for h in handles if not h.live.finished]

    def node_outputs(self, run_id: str, node_id: str) -> dict[str, Any]:
        """A node's outputs from a live run, as table-ready views (see `output_views`)."""
        outputs = self._handle(run_id).live.outputs_of(node_id)
        if outputs is None:
            raise UserError(f"node {node_id!r} has no outputs in this run (it has not finished, or failed)")
        return {"node_id": node_id, "views": output_views(outputs)}


def _default_examples_dir() -> Path | None:
    from app.resources import examples_dir

    try:
        return examples_dir()
    except FileNotFoundError:
        return None


def _clean_inputs(wf: Workflow, given: dict[str, Any]) -> dict[str, Any]:
    """Form values: drop unknown names and empty optional fields (so defaults apply)."""
    out: dict[str, Any] = {}
    for name, value in given.items():
        spec = wf.inputs.get(name)
        if spec is None:
            continue
        if value is None or (isinstance(value, str) and value.strip() == "" and spec.type != "text"):
            continue
        out[name] = value
    return out


def _jsonable(value: Any) -> Any:
    from nodes.base import to_jsonable

    return to_jsonable(value)


def _friendly_error(result: RunResult) -> str | None:
    if result.status == "succeeded":
        return None
    if result.failure is not None:
        f = result.failure
        return f"node {f.node_id!r} ({f.kind}) failed: {f.message}"
    return result.error


# ---------------------------------------------------------------------- output views


def output_views(outputs: dict[str, Any]) -> list[dict[str, Any]]:
    """Each output port as a view: candidate sets as table rows (text, answer, score, cluster, winner),
    other values as text."""
    views: list[dict[str, Any]] = []
    for port, value in outputs.items():
        if isinstance(value, dict) and value.get("__type__") == "candidates":
            winner = value.get("winner")
            rows = []
            for i, cand in enumerate(value.get("candidates") or []):
                score = cand.get("score")
                rows.append({
                    "index": i,
                    "text": str(cand.get("text", "")),
                    "answer": cand.get("answer"),
                    "score": round(score, 4) if isinstance(score, int | float) else None,
                    "cluster": cand.get("cluster"),
                    "winner": i == winner,
                })
            views.append({"port": port, "type": "candidates", "rows": rows, "winner": winner})
        else:
            import json

            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)
            views.append({"port": port, "type": "value", "text": text})
    return views


# ---------------------------------------------------------------------- models


class ModelCatalog:
    """The models the Models tab lists: the bundled one, GGUFs in the models folder, and files added by path;
    with what llama.cpp will do with each (device, layers offloaded) and load/unload through the app's pool."""

    def __init__(self, service: StudioService) -> None:
        self._service = service
        self._added: list[str] = []
        self._lock = threading.Lock()

    def _spec(self, path: str | None) -> Any:
        """The spec a workflow would use for this file, with the remembered device settings applied."""
        from app.settings import load_settings
        from backends.base import ModelSpec

        spec = ModelSpec() if path in (None, "", "bundled") else ModelSpec(source="path", path=path)
        return load_settings().device.apply(spec)

    def device_settings(self) -> dict[str, Any]:
        from dataclasses import asdict

        from app.settings import load_settings

        return asdict(load_settings().device)

    def save_device_settings(self, values: dict[str, Any]) -> dict[str, Any]:
        """Remember device / threads / GPU layers for models whose workflow leaves them open."""
        if self._service.policy.share_mode:
            raise UserError("device settings can only be changed by the owner, not on a shared app")
        from app.settings import update_device_settings

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
        if self._service.policy.share_mode:
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
        pool = self._service._pool
        if pool is None:
            return set()
        paths_: set[str] = set()
        for item in pool.loaded():
            path = _loaded_path(item)
            if path:
                paths_.add(path)
        return paths_

    def load(self, key: str) -> None:
        if self._service.dry_run:
            raise UserError("this app runs with --dry-run (a fake model); start it without --dry-run to load models")
        from backends.base import BackendError

        try:
            self._service.pool.get(self._spec(key))
        except BackendError as exc:
            raise UserError(str(exc)) from None

    def unload(self, key: str) -> bool:
        pool = self._service._pool
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
