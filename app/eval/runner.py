"""Runs an evaluation plan: items concurrently (so the engine batches across items), each item's sweep points
one after another largest first (so smaller points reuse its samples), every finished item committed."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from app.eval.metrics import grade_samples, grading_stop
from app.eval.plan import EvalPlan, EvalWorkflow, repeat_seed, split_key
from app.eval.servers import plan_concurrency, served_since, served_snapshot
from app.eval.store import EvalStore
from app.run.events import Observer
from app.run.scheduler import Budget, RunResult, Scheduler
from app.run.status import CANCELLED, FAILED, SUCCEEDED, UNGRADED
from app.workflow.problems import WorkflowError
from backends.base import CancelToken
from nodes.base import CandidateSet, to_jsonable

log = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 8
"""Items in flight at once: with best-of-8 that is 64 sequences, enough to keep the engine's batch full."""
MAX_OUTPUT_CHARS = 2000


@dataclass
class Progress:
    done: int
    total: int
    correct: int
    elapsed_s: float
    last: dict[str, Any] | None = None

    @property
    def eta_s(self) -> float | None:
        if self.done == 0:
            return None
        return self.elapsed_s / self.done * (self.total - self.done)


ProgressCallback = Callable[[Progress], None]


def _point_order(points: list[dict[str, Any]]) -> list[int]:
    """Point indices, the costliest first (larger numbers first): a sweep n=1,2,4,8 draws 8 samples once and the
    smaller points find theirs in the sample cache."""
    def key(i: int) -> tuple[Any, ...]:
        return tuple(-v if isinstance(v, int | float) and not isinstance(v, bool) else 0 for v in points[i].values())

    return sorted(range(len(points)), key=key)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return str(to_jsonable(value))


def _sample_texts(result: RunResult, sampler: str | None, output: Any) -> list[str]:
    """The graded sampler's samples as the graded output shows them: whole texts when the output is a whole
    sample (best-of-N keeps one), extracted answers when it is an answer (a vote), for pass@k."""
    if sampler is None:
        return []
    cset = (result.node_outputs.get(sampler) or {}).get("candidates")
    if not isinstance(cset, CandidateSet) or not cset.candidates:
        return []
    texts = [c.text.strip() for c in cset.candidates]
    answers = [c.answer for c in cset.candidates]
    shown = _text(output).strip()
    if shown in texts or all(a is None for a in answers):
        return texts
    return [a if a is not None else "" for a in answers]


def _job_groups(jobs: list[tuple[int, int]], by_item: bool) -> list[list[tuple[int, int]]]:
    """Jobs as groups run one after another: one job per group, or (sharing samples) an item's workflows together,
    in order, so the later ones find the first one's samples in the sample cache instead of drawing them too."""
    if not by_item:
        return [[job] for job in jobs]
    groups: dict[int, list[tuple[int, int]]] = {}
    for w_idx, item in jobs:
        groups.setdefault(item, []).append((w_idx, item))
    return list(groups.values())


def _sample_votes(result: RunResult, sampler: str | None) -> dict[str, Any] | None:
    """The graded sampler's samples as the last candidate set made of them shows them (after the verifiers that
    scored them): each one's answer and score, for the maj@k / best-of-k curves."""
    if sampler is None:
        return None
    sets = [out.get("candidates") for out in result.node_outputs.values() if isinstance(out, dict)]
    own = (result.node_outputs.get(sampler) or {}).get("candidates")
    if not isinstance(own, CandidateSet) or not own.candidates:
        return None
    lineage = [s for s in sets if isinstance(s, CandidateSet) and len(s) == len(own)
               and all(c.source == sampler for c in s.candidates)]
    last = lineage[-1] if lineage else own
    scores = [c.score for c in last.candidates]
    return {"answers": [c.answer for c in last.candidates],
            "scores": scores if all(s is not None for s in scores) else None}


class Evaluation:
    """One evaluation being run (new or resumed). Thread-safe `cancel()`; `run()` blocks until it ends."""

    def __init__(self, plan: EvalPlan, scheduler: Scheduler, store: EvalStore, *, eval_id: str | None = None,
                 observers: list[Observer] | None = None, concurrency: int | None = None,
                 run_budget: Budget | None = None, total_budget: Budget | None = None,
                 on_progress: ProgressCallback | None = None, name: str = "") -> None:
        self.plan = plan
        self.scheduler = scheduler
        self.store = store
        self.eval_id = eval_id or uuid.uuid4().hex[:12]
        self.observers = list(observers or [])
        self.concurrency = max(1, int(concurrency or plan_concurrency(plan) or DEFAULT_CONCURRENCY))
        """Items in flight: as asked, else the sum of the servers' concurrency of a model on several servers."""
        self.run_budget = run_budget or Budget()
        self.total_budget = total_budget or Budget()
        self.on_progress = on_progress
        self.name = name or " vs ".join(w.name for w in plan.workflows)
        self.cancel_token = CancelToken()
        self._lock = threading.Lock()
        self._done = 0
        self._correct = 0
        self._tokens = 0
        self._completion = 0
        self._calls = 0
        self._started = time.perf_counter()
        self._run_tokens: set[CancelToken] = set()
        self.status = "pending"
        self.error: str | None = None
        self.only: set[int] | None = None
        """The workflows (indices) to run, None: all of them (`metagen tune` runs only the candidates still racing)."""

    # ------------------------------------------------------------------ control

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop the evaluation: runs in flight are cancelled (not recorded; a resume redoes them)."""
        with self._lock:
            self.cancel_token.cancel(reason)
            tokens = list(self._run_tokens)
        for token in tokens:
            token.cancel(reason)

    @property
    def elapsed_s(self) -> float:
        """Seconds since this run of the evaluation began (the ETA counts down with it between finished items)."""
        return time.perf_counter() - self._started

    def start_record(self, estimate: dict[str, Any] | None = None) -> None:
        """Write the evaluation record (a new evaluation) before any item runs."""
        self.store.create(self.eval_id, self.name, self.plan.config(), estimate or {})

    def run(self, resume: bool = False, estimate: dict[str, Any] | None = None) -> str:
        """Run every unfinished item; returns the final status (succeeded, failed or cancelled)."""
        if resume:
            self.store.claim(self.eval_id)
            finished = self.store.finished_keys(self.eval_id)
        else:
            self.start_record(estimate)
            finished = set()
        self._done = len(finished)
        jobs = [(w_idx, item) for w_idx, wf in enumerate(self.plan.workflows) for item in self.plan.task_keys()
                if (self.only is None or w_idx in self.only)
                and any((w_idx, p, item) not in finished for p in range(len(wf.points)))]
        self._started = time.perf_counter()
        served_before = served_snapshot(self.plan, self.scheduler.provider)
        try:
            self._run_jobs(_job_groups(jobs, self.plan.share_samples), finished)
        except Exception as exc:
            log.exception("evaluation %s failed", self.eval_id)
            self.status, self.error = FAILED, f"{type(exc).__name__}: {exc}"
        else:
            self.status = CANCELLED if self.cancel_token.cancelled else SUCCEEDED
            self.error = self.cancel_token.reason if self.cancel_token.cancelled else None
            ungraded = self._all_ungraded() if self.status == SUCCEEDED else None
            if ungraded:  # a grader that cannot run is no result at all, never an accuracy of 0
                self.status, self.error = FAILED, ungraded
        servers = served_since(served_before, served_snapshot(self.plan, self.scheduler.provider))
        self.store.finish(self.eval_id, self.status, self.error, servers=servers or None)
        if self.status == SUCCEEDED and self.only is None:
            self._remember_pace(time.perf_counter() - self._started)
        return self.status

    def _remember_pace(self, seconds: float) -> None:
        """Keep this run's completion tokens per second for the next estimate of its model at its batch (only
        when its estimate was measured on this machine: `estimate.record_observed`)."""
        from app.eval.estimate import record_observed

        try:
            est = self.store.get(self.eval_id)["evaluation"].get("estimate") or {}
            if est.get("calibrated") and est.get("calibration_model") and est.get("batch"):
                record_observed(str(est["calibration_model"]), int(est["batch"]), self._completion, seconds)
        except Exception:  # a pace not kept costs the next estimate some accuracy, never this evaluation
            log.warning("could not keep evaluation %s's pace for later estimates", self.eval_id, exc_info=True)

    def _all_ungraded(self) -> str | None:
        """Why the evaluation failed when every item of some point is ungraded (the grader never ran), else None."""
        from app.eval.results import point_label

        by_point: dict[tuple[int, int], list[dict[str, Any]]] = {}
        for item in self.store.get(self.eval_id)["items"]:
            by_point.setdefault((item["workflow_idx"], item["point_idx"]), []).append(item)
        for (w_idx, p_idx), items in sorted(by_point.items()):
            if items and all(i["status"] == UNGRADED for i in items):
                wf = self.plan.workflows[w_idx]
                return (f"no item of {point_label(wf.name, wf.points[p_idx])} could be graded "
                        f"({len(items)} ungraded): {items[0]['detail']}")[:1000]
        return None

    def _run_group(self, group: list[tuple[int, int]], finished: set[tuple[int, int, int]]) -> None:
        for w_idx, item in group:
            if self.cancel_token.cancelled:
                return
            self._run_item(w_idx, item, finished)

    def _run_jobs(self, jobs: list[list[tuple[int, int]]], finished: set[tuple[int, int, int]]) -> None:
        pending = iter(jobs)
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="eval") as pool:
            running: set[Future[None]] = set()
            while True:
                while len(running) < self.concurrency and not self.cancel_token.cancelled:
                    job = next(pending, None)
                    if job is None:
                        break
                    running.add(pool.submit(self._run_group, job, finished))
                if not running:
                    return
                done, running = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    future.result()  # an unexpected error ends the evaluation (items already stored stay)

    # ------------------------------------------------------------------ one item

    def _run_item(self, w_idx: int, item: int, finished: set[tuple[int, int, int]]) -> None:
        wf = self.plan.workflows[w_idx]
        row_idx, repeat = split_key(item, len(self.plan.dataset.rows))
        row = self.plan.dataset.rows[row_idx]
        seed = repeat_seed(self.plan.seed, repeat)
        from app.eval.datasets import item_inputs, item_reference

        inputs = item_inputs(row, wf.binding, wf.workflow.inputs)
        reference = item_reference(row, wf.binding)
        for p_idx in _point_order(wf.points):
            if self.cancel_token.cancelled:
                return
            if (w_idx, p_idx, item) in finished:
                continue
            values = self._run_point(wf, p_idx, inputs, row, reference, seed)
            if values is None:  # cancelled mid-run: not recorded, a resume redoes it
                return
            self.store.record_item(self.eval_id, w_idx, p_idx, item, values)
            self._count(values, {"workflow": wf.name, "point": wf.points[p_idx], "item": item, **values})

    def _run_point(self, wf: EvalWorkflow, p_idx: int, inputs: dict[str, Any], row: dict[str, Any],
                   reference: str | None, seed: int) -> dict[str, Any] | None:
        variant = wf.variants[p_idx]
        start = time.perf_counter()
        token = CancelToken()
        with self._lock:
            if self.cancel_token.cancelled:
                return None
            self._run_tokens.add(token)
        try:
            result = self.scheduler.run(variant, inputs, seed=seed, budget=self._budget_left(),
                                        cancel=token, observers=self.observers,
                                        share_samples=self.plan.share_samples)
        except WorkflowError as exc:
            return {"status": FAILED, "detail": "; ".join(i.format() for i in exc.issues)[:500],
                    "wall_s": time.perf_counter() - start}
        finally:
            with self._lock:
                self._run_tokens.discard(token)
        if self.cancel_token.cancelled and result.status != SUCCEEDED:
            return None
        stats = result.stats
        values: dict[str, Any] = {
            "run_id": result.run_id, "status": result.status, "wall_s": stats.wall_s,
            "prompt_tokens": stats.prompt_tokens + stats.prompt_tokens_reused,  # as if it ran alone (tables.py)
            "prompt_tokens_evaluated": stats.prompt_tokens_evaluated,
            "prompt_tokens_cached": stats.prompt_tokens_cached, "completion_tokens": stats.completion_tokens,
            "completion_tokens_reused": stats.completion_tokens_reused,
            "lm_calls": stats.lm_calls,
        }
        output = result.outputs.get(wf.output)
        values["output"] = _text(output)[:MAX_OUTPUT_CHARS]
        if result.status != SUCCEEDED:
            values.update(score=0.0, correct=False, detail=(result.error or result.status)[:500])
            return values
        stopping = grading_stop.set(lambda: self.cancel_token.cancelled)  # a cancel kills the graded programs
        try:  # a metric that fails on one row's data fails that item, never the whole evaluation
            grade = self.plan.metric.grade(output, row, reference, result.outputs)
            texts = _sample_texts(result, wf.sampler, output)
            samples = grade_samples(self.plan.metric, texts, row, reference) if texts else None
        except Exception as exc:  # the grader failed, not the answer: no verdict
            log.warning("evaluation %s: the metric failed on an item: %s", self.eval_id, exc)
            values.update(status=UNGRADED, score=0.0, correct=False,
                          detail=f"ungraded: the metric failed: {type(exc).__name__}: {exc}"[:500])
            return values
        finally:
            grading_stop.reset(stopping)
        if self.cancel_token.cancelled:  # graded while cancelling: not recorded, a resume redoes it
            return None
        if grade.ungraded:
            values.update(status=UNGRADED, score=0.0, correct=False, detail=grade.detail[:500])
            return values
        values.update(score=grade.score, correct=grade.correct, detail=grade.detail[:500])
        if samples is not None:
            values["samples"] = samples
            votes = _sample_votes(result, wf.sampler)
            if votes is not None and len(votes["answers"]) == len(samples):
                values["sample_votes"] = votes
        return values

    def _budget_left(self) -> Budget:
        """The per-run budget, lowered to what is left of the evaluation's total budget."""
        total, run = self.total_budget, self.run_budget
        with self._lock:
            calls_left = None if total.max_lm_calls is None else max(1, total.max_lm_calls - self._calls)
            tokens_left = None if total.max_tokens is None else max(1, total.max_tokens - self._tokens)
        return Budget(max_lm_calls=_min(run.max_lm_calls, calls_left), max_tokens=_min(run.max_tokens, tokens_left),
                      max_seconds=run.max_seconds, max_child_runs=run.max_child_runs)

    def _count(self, values: dict[str, Any], last: dict[str, Any]) -> None:
        with self._lock:
            self._done += 1
            self._correct += int(bool(values.get("correct")))
            self._calls += int(values.get("lm_calls", 0))
            self._tokens += int(values.get("prompt_tokens_evaluated", 0)) + int(values.get("completion_tokens", 0))
            self._completion += int(values.get("completion_tokens", 0))
            progress = Progress(self._done, self.plan.total_tasks, self._correct,
                                time.perf_counter() - self._started, last)
            over = self._over_total_budget()
        if over:
            self.cancel(f"budget: the evaluation's {over} was reached")
        if self.on_progress is not None:
            try:
                self.on_progress(progress)
            except Exception:
                log.exception("progress callback failed")

    def _over_total_budget(self) -> str | None:
        total = self.total_budget
        if total.max_lm_calls is not None and self._calls >= total.max_lm_calls:
            return f"max_lm_calls={total.max_lm_calls}"
        if total.max_tokens is not None and self._tokens >= total.max_tokens:
            return f"max_tokens={total.max_tokens}"
        if total.max_seconds is not None and time.perf_counter() - self._started >= total.max_seconds:
            return f"max_seconds={total.max_seconds:g}"
        return None


def _min(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)
