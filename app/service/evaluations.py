"""Evaluations for the UI: datasets to pick or upload (with a preview), plans checked before anything runs,
the estimate, evaluations running in the background with live progress, cancel, and past results; in share
mode each visitor sees only its own evaluations and uploads."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.eval.dataset_meta import DatasetMetaError, declared_metric
from app.eval.datasets import SUPPORTED_SUFFIXES, DatasetError, dataset_dirs, load_dataset, resolve_dataset
from app.eval.estimate import calibrate, calibration_complete, estimate, load_calibration, time_left
from app.eval.gold import check_gold
from app.eval.hub_datasets import is_hub_spec
from app.eval.metrics import MetricError
from app.eval.options import apply_options
from app.eval.plan import EvalSetupError, WorkflowSource, make_plan, plan_from_config
from app.eval.results import item_rows, json_points, summarize
from app.eval.runner import DEFAULT_CONCURRENCY, Evaluation, Progress
from app.eval.servers import plan_concurrency
from app.eval.store import EvalNotFoundError, EvalStore
from app.eval.tasks import TaskError, available_tasks, load_task, load_task_dataset
from app.platform.fileio import atomic_write_bytes
from app.run.scheduler import Budget, Scheduler
from app.run.status import CANCELLED, FAILED, SUCCEEDED
from app.service.errors import UserError
from app.service.inline_datasets import rows_file
from app.service.interruptible import wait_interruptibly
from app.service.visitor_uploads import check_room, prune_visitor_folders, visitor_folder
from app.share.consent import RemoteConsent, RemoteConsentError
from app.share.policy import SharePolicy, check_workflow_allowed, resolve_model_choices
from app.share.run_gate import QueueFullError, RunGate
from nodes.registry import NodeRegistry

log = logging.getLogger(__name__)

DATASET_SUFFIXES = SUPPORTED_SUFFIXES
TASK_PREFIX = "task:"
"""A dataset name of the Evaluate tab that picks a task preset (its Hub dataset, prompt, reference, metric)."""
PREVIEW_ROWS = 5
MAX_UPLOAD_BYTES = 20 * 1024 * 1024


def read_upload(path: Path) -> bytes:
    """The bytes of an uploaded dataset file, refused (UserError) by its size before anything is read."""
    try:
        size = path.stat().st_size
        if size > MAX_UPLOAD_BYTES:
            raise UserError(f"the file is {size / 1e6:.1f} MB; datasets are limited to "
                            f"{MAX_UPLOAD_BYTES // 1_000_000} MB")
        with path.open("rb") as f:
            return f.read(MAX_UPLOAD_BYTES + 1)  # never more, even if the file grew since
    except OSError as exc:
        raise UserError(f"cannot read the uploaded file: {exc.strerror or exc}") from None


@dataclass
class _Live:
    evaluation: Evaluation
    thread: threading.Thread
    progress: Progress | None = None
    started: float = 0.0


class EvaluationService:
    """Everything the Evaluate tab asks. Share mode: datasets only by name from the datasets folders or as
    uploads, the share caps apply to the whole evaluation, python: metrics follow the python-verifier rule.

    Visitors (share mode) follow StudioService's rule: every method takes `visitor` (the browser session; None
    is the app's own callers, the CLI and tests, itself one visitor). An evaluation belongs to the visitor that
    started it in this app session: another visitor's status and cancel answer "no evaluation", as for an id
    that does not exist, and the list shows a visitor its own only (evaluations from before the app started
    are the owner's, in local mode). A visitor's uploads go to a folder of its own (`visitor_uploads`)."""

    def __init__(self, *, registry: NodeRegistry, scheduler: Scheduler, policy: SharePolicy,
                 trace_store: Any, uploads_dir: Path, observers: list[Any] | None = None,
                 max_concurrent: int = 1, dry_run: bool = False, gate: RunGate | None = None,
                 runs_of: Callable[[str | None], int] | None = None, consent: RemoteConsent | None = None) -> None:
        self.registry = registry
        self.scheduler = scheduler
        self.policy = policy
        self.trace_store = trace_store
        self.store = EvalStore(trace_store.engine) if trace_store is not None else None
        if self.store is not None:
            self.store.mark_interrupted()
        self.uploads_dir = uploads_dir
        if policy.share_mode:  # what visitors of earlier app sessions left
            prune_visitor_folders(uploads_dir)
        self.observers = observers if observers is not None else ([trace_store] if trace_store else [])
        self.max_concurrent = max_concurrent
        self.dry_run = dry_run
        self.gate = gate
        """Share mode: the run gate a visitor's evaluation waits in and holds one slot of, as a run does."""
        self.runs_of = runs_of
        self.consent = consent if consent is not None else RemoteConsent()
        """The one consent check for remote servers (StudioService's, shared with the editor)."""
        """Share mode: a visitor's unfinished runs and evaluations (the per-visitor limit counts both)."""
        self._live: dict[str, _Live] = {}
        self._owners: dict[str, str | None] = {}
        """Who started each evaluation of this app session (share mode keeps visitors' evaluations apart)."""
        self._lock = threading.Lock()
        self._starting = 0  # evaluations past the concurrency check, not yet in _live (see start)
        self._upload_lock = threading.Lock()
        self._folder_locks: dict[str, threading.Lock] = {}

    def _need_store(self) -> EvalStore:
        if self.store is None:
            raise UserError("evaluations need the trace database, which cannot be opened; fix --db and restart")
        return self.store

    # ------------------------------------------------------------------ datasets

    def upload_folder(self, visitor: str | None = None) -> Path:
        """Where `visitor`'s uploads go: the uploads folder (local mode), its own folder in it (share mode)."""
        return visitor_folder(self.uploads_dir, visitor) if self.policy.share_mode else self.uploads_dir

    def _folders(self, visitor: str | None) -> list[Path]:
        """Where a dataset name is looked up, the first folder holding it wins: the uploads, then the datasets
        folders (`dataset_dirs()`: the data folder's datasets/, then the bundled ones). In share mode the uploads
        are the visitor's own folder (never the owner's uploads or another visitor's), so a visitor's upload
        named like a built-in dataset is that visitor's copy, for that visitor only."""
        return [self.upload_folder(visitor), *dataset_dirs()]

    def list_datasets(self, *, visitor: str | None = None) -> list[dict[str, Any]]:
        """Datasets `visitor` may pick, by name (a name in an earlier folder of `_folders` hides later ones)."""
        seen: dict[str, dict[str, Any]] = {}
        uploads = self.upload_folder(visitor)
        for folder in self._folders(visitor):
            try:
                files = sorted(p for p in folder.iterdir() if p.suffix.lower() in DATASET_SUFFIXES and p.is_file())
            except OSError:
                continue
            for path in files:
                seen.setdefault(path.name, {"name": path.name, "size_bytes": path.stat().st_size,
                                            "folder": "uploads" if folder == uploads else str(folder)})
        return list(seen.values())

    def dataset_path(self, name: str, *, visitor: str | None = None) -> Path:
        """A dataset by its file name (never a path) in `visitor`'s uploads or the datasets folders; on the owner's
        own app also a Hub dataset, hf:OWNER/NAME[:CONFIG][@SPLIT] (visitors of a shared app cannot make it
        download)."""
        clean = str(name or "").strip()
        if is_hub_spec(clean):
            if self.policy.share_mode:
                raise UserError("Hub datasets (hf:...) are not available on a shared app; pick a dataset from the "
                                "list or upload a file")
            return Path(clean)
        if not clean or "/" in clean or "\\" in clean or clean.startswith(".") or ".." in clean:
            raise UserError("pick a dataset from the list (a file name, not a path)")
        for folder in self._folders(visitor):
            path = folder / clean
            if path.is_file():
                return path
        raise UserError(f"there is no dataset named {clean!r}; pick one from the list or upload it")

    def upload_dataset(self, filename: str, data: bytes, *, visitor: str | None = None) -> dict[str, Any]:
        """Keep an uploaded dataset (checked by reading it; a file that does not load is removed again). In
        share mode it goes to the visitor's own folder, which holds a bounded number of files and bytes."""
        name = Path(str(filename or "")).name
        if Path(name).suffix.lower() not in DATASET_SUFFIXES:
            raise UserError("upload a .jsonl or .csv file (UTF-8; a header row for CSV), a .json array of objects "
                            "or a .parquet file")
        if len(data) > MAX_UPLOAD_BYTES:
            raise UserError(f"the file is {len(data) / 1e6:.1f} MB; datasets are limited to "
                            f"{MAX_UPLOAD_BYTES // 1_000_000} MB")
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name).lstrip(".") or "dataset.jsonl"
        folder = self.upload_folder(visitor)
        target = folder / safe
        if self.policy.share_mode:  # visitors' folders are bounded in age and in total size
            prune_visitor_folders(self.uploads_dir, keep=folder)
        with self._folder_lock(folder):  # the bound is checked and the file written as one step (per visitor)
            if self.policy.share_mode:
                check_room(folder, safe, len(data), DATASET_SUFFIXES)
            folder.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(target, data)
        try:  # parsing holds no lock: a slow file delays only its own upload
            preview = self.preview(safe, visitor=visitor)
        except UserError:
            target.unlink(missing_ok=True)
            raise
        log.info("dataset uploaded to %s", target)
        return {"name": safe, **preview}

    def _folder_lock(self, folder: Path) -> threading.Lock:
        """One lock per uploads folder (a visitor's in share mode), so one upload never waits for another's."""
        with self._upload_lock:
            return self._folder_locks.setdefault(str(folder), threading.Lock())

    def preview(self, name: str, *, visitor: str | None = None) -> dict[str, Any]:
        """The first rows of a dataset (or of a task preset's, `task:NAME`, with its prompt and reference made)."""
        try:
            if str(name).startswith(TASK_PREFIX):
                task = str(name)[len(TASK_PREFIX):]
                dataset = load_task_dataset(load_task(task), self._dataset_of({"dataset": name}, task, visitor))
            else:
                dataset = load_dataset(self.dataset_path(name, visitor=visitor))
        except (DatasetError, TaskError) as exc:
            raise UserError(str(exc)) from None
        return {"columns": dataset.columns, "rows": dataset.rows[:PREVIEW_ROWS], "count": len(dataset.rows)}

    def _metric_file(self, name: str, visitor: str | None = None) -> Path:
        """A python metric file: by name from the datasets folders, or (on the owner's own app) a path."""
        clean = str(name or "").strip()
        if not self.policy.share_mode and clean and Path(clean).expanduser().is_file():
            return Path(clean).expanduser()
        for folder in self._folders(visitor):
            if clean and "/" not in clean and "\\" not in clean and (folder / clean).is_file():
                return folder / clean
        raise UserError(f"no metric file {clean!r}: put a .py file defining metric(output, row) in the datasets "
                        f"folder ({dataset_dirs()[0]}) and give its name, e.g. instructions_metric.py")

    # ------------------------------------------------------------------ plans

    def plan(self, request: dict[str, Any], *, visitor: str | None = None, doing: str = "evaluated") -> Any:
        """An EvalPlan from the tab's form: {workflows: [{name, yaml}], dataset, metric, output, sweeps,
        mapping, reference, limit, shuffle, seed, share_samples, bootstrap, repeats, baseline}, the dataset as
        `visitor` sees it. UserError lists every problem."""
        workflows = request.get("workflows") or []
        if not isinstance(workflows, list) or not workflows:
            raise UserError("pick at least one workflow to evaluate")
        sources = [WorkflowSource(text=str(w.get("yaml") or ""), name=str(w.get("name") or f"workflow {i + 1}"))
                   for i, w in enumerate(workflows) if isinstance(w, dict)]
        picked = str(request.get("dataset") or "").strip()
        task = str(request.get("task") or "").strip() or (picked[len(TASK_PREFIX):] if picked.startswith(TASK_PREFIX)
                                                            else None)
        metric = str(request.get("metric") or "") or (None if task else self._declared_metric(request, visitor))
        if metric and metric.strip().lower() == "tests" and not self.policy.allow_code_execution:
            raise UserError("the tests metric runs the outputs' code and is disabled on this shared app; the owner "
                            "can start it with --allow-code-execution")
        if metric and metric.startswith("python:"):
            if not self.policy.allow_python:
                raise UserError("python: metrics run code and are disabled on this shared app")
            metric = "python:" + str(self._metric_file(metric[len("python:"):], visitor))
        limit = request.get("limit")
        dataset = self._dataset_of(request, task, visitor)
        try:
            plan = make_plan(sources, dataset,
                             registry=self.registry, metric=metric, output=request.get("output") or None,
                             sweeps=[str(s) for s in request.get("sweeps") or [] if str(s).strip()],
                             mapping={str(k): str(v) for k, v in (request.get("mapping") or {}).items() if v},
                             reference=request.get("reference") or None,
                             limit=int(limit) if limit else None, shuffle=bool(request.get("shuffle")),
                             seed=int(request.get("seed") or 0), task=task)
            apply_options(plan, request)
        except EvalSetupError as exc:
            raise UserError("\n".join(exc.problems[:20])) from None
        refused: list[str] = []
        for w in plan.workflows:  # each sweep point too: a swept param can ask for what the workflow does not
            for variant in (w.workflow, *w.variants):
                found = [i.format() for i in check_workflow_allowed(variant, self.policy)]
                refused += [text for text in found if text not in refused]
        if refused:
            raise UserError("; ".join(refused[:5]))
        if not self.policy.share_mode:  # share mode refused remote models above
            origins = [str(w.get("origin") or "") for w in workflows if isinstance(w, dict)]
            confirmed = bool(request.get("confirmed_remote"))
            for w, origin in zip(plan.workflows, origins, strict=False):
                try:
                    self.consent.require(w.workflow, visitor, origin=origin, confirmed=confirmed, doing=doing)
                except RemoteConsentError as exc:
                    raise UserError(str(exc)) from None
        else:  # the owner's model settings, as for runs: visitors share one loaded copy per model file
            for w in plan.workflows:
                w.workflow = resolve_model_choices(w.workflow, self.policy)
                w.variants = [resolve_model_choices(v, self.policy) for v in w.variants]
        return plan

    def _declared_metric(self, request: dict[str, Any], visitor: str | None) -> str:
        """The metric the form's dataset declares in its meta file (`dataset_meta`), else exact match; resolved
        here so that share mode's checks see the metric that will grade."""
        try:
            return declared_metric(self._dataset_of(request, None, visitor)) or "exact"
        except DatasetMetaError as exc:
            raise UserError(str(exc)) from None

    def dataset_metric(self, name: str, *, visitor: str | None = None) -> str | None:
        """The metric a dataset of the list declares (None when it declares none or cannot be found)."""
        if not name or str(name).startswith(TASK_PREFIX):
            return None
        try:
            return declared_metric(self.dataset_path(name, visitor=visitor))
        except (UserError, DatasetMetaError) as exc:
            log.info("no declared metric for %s: %s", name, exc)
            return None

    def _dataset_of(self, request: dict[str, Any], task: str | None, visitor: str | None) -> Path | None:
        """The form's dataset; with a task preset and no dataset, None (the preset's own, from the Hub: not for
        visitors of a shared app, who give a local copy from the list)."""
        name = str(request.get("dataset") or "").strip()
        if name.startswith(TASK_PREFIX):
            name = ""
        if task and not name:
            if self.policy.share_mode:
                raise UserError(f"task {task} loads its dataset from the Hub, which a shared app does not do; pick a "
                                "local copy from the dataset list")
            return None
        return self.dataset_path(name, visitor=visitor)

    def tasks(self) -> list[dict[str, Any]]:
        """The task presets the Evaluate tab offers (name, title, description, dataset, metric, notes); none to
        visitors of a shared app (presets load Hub datasets)."""
        if self.policy.share_mode:
            return []
        try:
            return [t.to_json() for t in available_tasks()]
        except (TaskError, FileNotFoundError) as exc:
            log.warning("no task presets: %s", exc)
            return []

    def check_gold(self, task: str, *, dataset: str | None = None, limit: int | None = None,
                   visitor: str | None = None) -> dict[str, Any]:
        """Grade a task preset's own gold answers with its metric: {task, total, correct, failures, ungraded}
        (`metagen eval check`; the tab's "Check the grader"). Not on a shared app (presets load Hub datasets)."""
        if self.policy.share_mode:
            raise UserError("the gold check loads a task preset's Hub dataset, which a shared app does not do")
        name = str(task or "").strip().removeprefix(TASK_PREFIX)
        try:
            path = self.dataset_path(dataset, visitor=visitor) if dataset else None
            result = check_gold(load_task(name), path, limit=int(limit) if limit else None)
        except (TaskError, DatasetError, MetricError) as exc:
            raise UserError(str(exc)) from None
        return result.to_json()

    def estimate(self, request: dict[str, Any], *, visitor: str | None = None) -> dict[str, Any]:
        plan = self.plan(request, visitor=visitor, doing="estimated")
        # measured here first when this model was not (the one estimate: Start finds the same cached speed)
        return {"estimate": self._estimate(plan, measure=True), "tasks": plan.total_tasks}

    def _main_backend(self, plan: Any) -> Any:
        """The backend of the first workflow's first model (loaded by the pool; runs load it anyway)."""
        from app.workflow.model_specs import model_specs

        try:
            return self.scheduler.provider(next(iter(model_specs(plan.workflows[0].workflow).values())))
        except Exception as exc:
            log.info("no backend for the estimate: %s", exc)
            return None

    def _estimate(self, plan: Any, measure: bool = False) -> dict[str, Any]:
        """The estimate with this machine's cached throughput; `measure` calibrates first when none (or one of an
        older, shorter calibration) is cached."""
        backend = self._main_backend(plan)
        calibration = load_calibration(backend.model_id) if backend is not None else None
        if not calibration_complete(calibration) and measure and backend is not None and not self.dry_run:
            calibration = calibrate(backend)

        def count(text: str) -> int:
            try:
                return len(backend.tokenize(text))
            except Exception:
                return max(1, len(text) // 4)

        return estimate(plan, self.registry, calibration=calibration,
                        concurrency=plan_concurrency(plan) or DEFAULT_CONCURRENCY,
                        count_tokens=count if backend is not None else None)

    # ------------------------------------------------------------------ running

    def start(self, request: dict[str, Any], *, visitor: str | None = None) -> dict[str, Any]:
        """Start an evaluation in the background; it belongs to `visitor` (see the class)."""
        store = self._need_store()
        plan = self.plan(request, visitor=visitor)
        self._check_visitor_room(visitor)
        with self._lock:  # the check and the reservation at once: starts at the same moment cannot all pass
            running = [i for i, e in self._live.items() if e.thread.is_alive()]
            if len(running) + self._starting >= self.max_concurrent:
                if running and all(self._visible(i, visitor) for i in running):
                    raise UserError("an evaluation is already running; cancel it or wait for it to finish")
                raise UserError("another evaluation is running on this shared app; wait for it to finish and "
                                "start yours again")
            self._starting += 1
        try:
            live = self._launch(plan, store, request)
            with self._lock:
                self._live[live.evaluation.eval_id] = live
                self._owners[live.evaluation.eval_id] = visitor
        finally:
            with self._lock:
                self._starting -= 1
        live.thread.start()
        return self.status(live.evaluation.eval_id, visitor=visitor)

    def _launch(self, plan: Any, store: Any, request: dict[str, Any]) -> _Live:
        """The evaluation's record (with its estimate) and the thread that will run it, not yet started."""
        cost = self._estimate(plan, measure=True)
        caps = self.policy.budget_caps if self.policy.share_mode else Budget()
        evaluation = Evaluation(plan, self.scheduler, store, observers=self.observers, total_budget=caps,
                                concurrency=int(request.get("concurrency") or 0) or None)
        evaluation.start_record(cost)
        live = _Live(evaluation, threading.Thread(target=self._run, args=(evaluation,), daemon=True,
                                                  name=f"eval-{evaluation.eval_id}"), started=time.time())

        def on_progress(progress: Progress) -> None:
            live.progress = progress

        evaluation.on_progress = on_progress
        return live

    def _check_visitor_room(self, visitor: str | None) -> None:
        """Share mode: an evaluation counts as a run of its visitor (the per-visitor limit) and of the run gate
        (refused when the queue is full, as a run is)."""
        if not self.policy.share_mode:
            return
        limit = self.policy.max_runs_per_visitor
        if limit is not None and self.runs_of is not None:
            mine = self.runs_of(visitor)
            if mine >= limit:
                raise UserError(f"you already have {mine} run(s) or evaluation(s) going on this shared app (the "
                                f"limit is {limit}); wait for one to finish or cancel one")
        gate = self.gate
        if gate is not None and gate.running >= gate.max_concurrent and gate.pending >= gate.max_queue:
            raise UserError(f"the app is busy: {gate.running} run(s) running and {gate.pending} waiting; try again "
                            "in a minute")

    def unfinished_of(self, visitor: str | None) -> int:
        """Evaluations `visitor` started here that have not ended."""
        with self._lock:
            return sum(1 for i, e in self._live.items() if e.thread.is_alive() and self._owners.get(i) == visitor)

    def _run(self, evaluation: Evaluation) -> None:
        gate = self.gate if self.policy.share_mode else None
        try:
            if gate is None:
                evaluation.run(resume=True)  # the record was written by start()
                return
            # one run slot, as a run holds; admitted by start() against the queue bound, so a queue that filled up
            # since (runs arriving in between) makes it wait rather than fail
            with gate.slot(cancelled=lambda: evaluation.cancel_token.cancelled, admitted=True):
                evaluation.run(resume=True)
        except QueueFullError as exc:
            evaluation.status, evaluation.error = CANCELLED if evaluation.cancel_token.cancelled else FAILED, str(exc)
            if self.store is not None:
                self.store.finish(evaluation.eval_id, evaluation.status, evaluation.error)
        except Exception:
            log.exception("evaluation %s crashed", evaluation.eval_id)

    # ------------------------------------------------------------------ in the caller's thread (Python API)

    def evaluate(self, workflows: list[tuple[str, str]], data: Any, *, metric: str | None, output: str | None = None,
                 sweeps: list[str] | dict[str, Any] | None = None, mapping: dict[str, str] | None = None,
                 limit: int | None = None, concurrency: int | None = None, resume: str | None = None,
                 on_progress: Callable[[Progress], None] | None = None, repeats: int = 1,
                 share_samples: bool = False, bootstrap: int = 0) -> str:
        """Run an evaluation to its end and return its id: `workflows` as (name, YAML text), `data` a dataset path
        or name, or rows (list of dicts, kept as a JSONL file by content). `resume` finishes a recorded one with
        its own plan. Checked before anything runs (UserError lists every problem); Ctrl+C cancels it cleanly."""
        store = self._need_store()
        eval_id = None
        try:
            if resume:
                eval_id = store.resolve_id(resume)
                record = store.get(eval_id)
                if record["evaluation"]["status"] == SUCCEEDED:
                    return eval_id
                plan = plan_from_config(record["evaluation"]["config"], self.registry)
            else:
                if isinstance(sweeps, dict):  # {"think.n": [1, 2, 4]}: the CLI's NODE.PARAM=V1,V2 texts
                    sweeps = [f"{key}=" + ",".join(json.dumps(v) for v in (values if isinstance(values, list | tuple)
                                                                         else [values]))
                              for key, values in sweeps.items()]
                path = resolve_dataset(data) if isinstance(data, str | Path) else rows_file(data, self.uploads_dir)
                plan = make_plan([WorkflowSource(text=text, name=name) for name, text in workflows], path,
                                 registry=self.registry, metric=metric, output=output, sweeps=list(sweeps or []),
                                 mapping=mapping, limit=limit)
                apply_options(plan, {"repeats": repeats, "share_samples": share_samples, "bootstrap": bootstrap})
        except EvalSetupError as exc:
            raise UserError("the evaluation cannot start (nothing was run):\n" + "\n".join(exc.problems)) from None
        except (DatasetError, EvalNotFoundError) as exc:
            raise UserError(str(exc)) from None
        evaluation = Evaluation(plan, self.scheduler, store, eval_id=eval_id, observers=self.observers,
                                concurrency=concurrency, on_progress=on_progress,
                                total_budget=self.policy.budget_caps if self.policy.share_mode else Budget())
        cost = None if resume else self._estimate(plan, measure=True)
        # Ctrl+C in a terminal or a notebook stops the runs in flight and keeps the finished items
        wait_interruptibly(lambda: evaluation.run(resume=bool(resume), estimate=cost),
                           lambda: evaluation.cancel("interrupted"), f"eval-{evaluation.eval_id}")
        return evaluation.eval_id

    def result(self, eval_id: str) -> dict[str, Any]:
        """{summary, points (as `metagen eval --json`), items (one per item and point)} of a recorded evaluation."""
        store = self._need_store()
        try:
            record = store.get(eval_id)
        except EvalNotFoundError as exc:
            raise UserError(str(exc)) from None
        summary = summarize(record)
        return {"summary": summary, "points": json_points(summary), "items": item_rows(record)}

    def close(self) -> None:
        """Cancel the evaluations running in the background and wait for their threads."""
        with self._lock:
            running = [e for e in self._live.values() if e.thread.is_alive()]
        for live in running:
            live.evaluation.cancel("the app is shutting down")
        for live in running:
            live.thread.join()

    # ------------------------------------------------------------------ visitors

    def _visible(self, eval_id: str, visitor: str | None) -> bool:
        """The owner (local mode) sees every evaluation; a share-mode visitor only those it started here.
        Call with `_lock` held."""
        return not self.policy.share_mode or (eval_id in self._owners and self._owners[eval_id] == visitor)

    def _own_id(self, eval_id: str, visitor: str | None) -> str:
        """The id to read for `visitor`: as given in local mode (the store resolves prefixes); in share mode
        exactly one of its own evaluations, else the "no evaluation" an unknown id gets (ids are not confirmed)."""
        clean = str(eval_id or "").strip()
        if not self.policy.share_mode:
            return clean
        with self._lock:
            if clean and self._visible(clean, visitor):
                return clean
        raise UserError(f"no evaluation {clean!r}; pick one from the list")

    def visitor_eval_ids(self, visitor: str | None) -> set[str] | None:
        """The evaluations `visitor` may see: None (all of them) in local mode."""
        if not self.policy.share_mode:
            return None
        with self._lock:
            return {eid for eid, owner in self._owners.items() if owner == visitor}

    def visitor_run_ids(self, visitor: str | None) -> set[str] | None:
        """The trace runs of `visitor`'s evaluations (each item's run): None (all of them) in local mode. For
        the Traces tab, beside `StudioService.visitor_run_ids` (an evaluation's runs belong to its starter)."""
        mine = self.visitor_eval_ids(visitor)
        if mine is None:
            return None
        return self.store.run_ids(mine) if self.store is not None and mine else set()

    def owns_run(self, run_id: str, visitor: str | None) -> bool:
        """Whether `run_id` is a run of one of `visitor`'s evaluations (any run in local mode)."""
        mine = self.visitor_run_ids(visitor)
        return mine is None or run_id in mine

    # ------------------------------------------------------------------ control and progress

    def cancel(self, eval_id: str, *, visitor: str | None = None) -> dict[str, Any]:
        eval_id = self._own_id(eval_id, visitor)
        with self._lock:
            live = self._live.get(eval_id)
        if live is None or not live.thread.is_alive():
            raise UserError(f"evaluation {eval_id!r} is not running")
        live.evaluation.cancel("cancelled from the Evaluate tab")
        return self.status(eval_id, visitor=visitor)

    def status(self, eval_id: str, *, visitor: str | None = None) -> dict[str, Any]:
        """Progress and the results so far (the curve fills in as items finish)."""
        store = self._need_store()
        eval_id = self._own_id(eval_id, visitor)
        with self._lock:  # alive first, then the record: a finished thread has written its final status
            live = next((e for i, e in self._live.items() if i == eval_id or i.startswith(eval_id)), None)
        running = live is not None and live.thread.is_alive()
        try:
            summary = summarize(store.get(eval_id))
        except EvalNotFoundError as exc:
            raise UserError(str(exc)) from None
        if live is not None and live.evaluation.eval_id != summary["eval_id"]:
            live, running = None, False
        eta = None
        if running and live is not None:  # one estimate: the pre-run one, moved toward the pace seen so far
            progress = live.progress
            eta = time_left((summary.get("estimate") or {}).get("expected_s"), live.evaluation.elapsed_s,
                            progress.done if progress else 0, summary["total"] or 0,
                            progress.elapsed_s if progress else None)
        return {"eval_id": summary["eval_id"], "running": running, "status": summary["status"],
                "done": summary["done"], "total": summary["total"], "eta_s": eta, "summary": summary}

    def list(self, *, visitor: str | None = None) -> list[dict[str, Any]]:
        """Evaluations, newest first: all of them for the owner (local mode), a visitor's own in share mode."""
        store = self._need_store()
        mine = self.visitor_eval_ids(visitor)
        if mine is None:
            return store.list()
        return store.list(ids=mine) if mine else []
