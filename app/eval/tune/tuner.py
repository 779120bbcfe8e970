"""One tune from options to result: candidates and the split, the race on dev (each round an evaluation of the
candidates still in it, every (candidate, item) run recorded so a killed tune resumes), the finalists once on
test, the report and the recommended workflow written."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.eval.datasets import Dataset, DatasetError, load_dataset, resolve_dataset
from app.eval.metrics import Metric, MetricError, parse_metric
from app.eval.plan import EvalPlan, EvalSetupError, WorkflowSource, make_plan
from app.eval.runner import Evaluation
from app.eval.store import EvalNotFoundError, EvalStore
from app.eval.tasks import TaskError, load_task, load_task_dataset
from app.eval.tune import candidates as cands
from app.eval.tune.api import DEV, DROPPED, FINALIST, RUNNING, SKIPPED, TEST, TuneOptions, TuneProgress, TuneResult
from app.eval.tune.errors import TuneError
from app.eval.tune.model_override import model_entry, model_label
from app.eval.tune.race import (
    Results,
    cannot_beat,
    choose,
    figures,
    item_result,
    race_round,
    row_spent,
    steps_to_rule_out,
)
from app.eval.tune.report import comparisons, front, held_out_table, test_figures, verdict
from app.eval.tune.split import MIN_ITEMS, race_slices, split_items
from app.eval.tune.writer import default_path, write_recommended
from app.platform import paths
from app.run.scheduler import Budget, NodeCache, Scheduler
from app.run.status import CANCELLED, FAILED, SUCCEEDED
from backends.base import CancelToken
from nodes.registry import NodeRegistry

log = logging.getLogger(__name__)


@dataclass
class _State:
    """The tune being run: its plan, candidates, split and what the race has found."""

    plan: EvalPlan
    candidates: list[cands.Candidate]
    dev: list[int]
    test: list[int]
    model: str
    race: list[dict[str, Any]] = field(default_factory=list)
    results: Results = field(default_factory=dict)
    spent: int = 0


def _dataset(options: TuneOptions) -> tuple[Dataset, Path | None, str | None]:
    """(dataset, path to plan with, task preset name)."""
    try:
        if options.task:
            if options.data.startswith("task:"):
                raise TuneError(f"--task {options.task} with --data {options.data}: give the preset once (--data "
                                "task:NAME for its own dataset, or --task NAME --data FILE for its rows from a file)")
            rows = resolve_dataset(options.data) if options.data else None
            return load_task_dataset(load_task(options.task), rows), rows, options.task
        if options.data.startswith("task:"):
            task = options.data[len("task:"):]
            return load_task_dataset(load_task(task)), None, task
        path = resolve_dataset(options.data) if not options.data.startswith("hf:") else Path(options.data)
        return load_dataset(path), path, None
    except (DatasetError, TaskError) as exc:
        raise TuneError(f"--data {options.data}: {exc}") from None


def _metric(options: TuneOptions, path: Path | None, task: str | None) -> tuple[str, Metric]:
    from app.eval.dataset_meta import DatasetMetaError, declared_metric

    spec = options.metric
    try:
        if not spec:
            spec = load_task(task).metric if task else (declared_metric(path) if path is not None else None)
        spec = spec or "exact"
        return spec, parse_metric(spec, base_dir=Path.cwd())
    except (MetricError, DatasetMetaError, TaskError) as exc:
        raise TuneError(f"--metric {spec}: {exc}") from None


def check_options(options: TuneOptions) -> None:
    """Every problem of the options, before anything loads."""
    problems = []
    if options.budget_tokens is None and options.budget_seconds is None:
        problems.append("give the allowed mean cost per item: --budget-tokens N or --budget-seconds S")
    if options.budget_tokens is not None and options.budget_tokens < 1:
        problems.append(f"--budget-tokens must be at least 1, got {options.budget_tokens}")
    if options.budget_seconds is not None and options.budget_seconds <= 0:
        problems.append(f"--budget-seconds must be above 0, got {options.budget_seconds}")
    if not 0.0 < options.dev_fraction < 1.0:
        problems.append(f"--dev-fraction must be between 0 and 1 (exclusive), got {options.dev_fraction}")
    if problems:
        raise TuneError("the tune cannot start (nothing was run):\n  " + "\n  ".join(problems))


class Tuner:
    """Runs one tune (new, or resumed by `options.resume`). `cancel` stops it between and within runs."""

    def __init__(self, options: TuneOptions, *, registry: NodeRegistry, scheduler: Scheduler, store: EvalStore,
                 observers: list[Any] | None = None, workflows_dir: Path | None = None,
                 examples_dir: Path | None = None, cancel: CancelToken | None = None,
                 on_progress: Callable[[TuneProgress], None] | None = None) -> None:
        self.options = options
        self.registry = registry
        self.scheduler = _measuring(scheduler)
        self.store = store
        self.observers = list(observers or [])
        self.workflows_dir = Path(workflows_dir or paths.workflows_dir())
        self.examples_dir = examples_dir if examples_dir is not None else _examples_dir()
        self.cancel_token = cancel or CancelToken()
        self.on_progress = on_progress
        self.tune_id = uuid.uuid4().hex[:12]
        self._errors: list[str] = []
        self._progress_lock = threading.Lock()

    # ------------------------------------------------------------------ set-up

    def _setup(self) -> _State:
        if self.options.resume:
            self._load_resumed()
        check_options(self.options)
        options = self.options
        dataset, path, task = _dataset(options)
        spec, metric = _metric(options, path, task)
        entry = model_entry(options.model) if options.model else None
        ctx = cands.CandidateContext(dataset=dataset, metric=metric, metric_spec=spec, registry=self.registry,
                                     model=entry, budget_tokens=options.budget_tokens,
                                     models_folder=paths.models_dir(), axes=list(options.axes))
        found = cands.make_candidates(cands.find_sources(options.candidates, self.examples_dir, self.workflows_dir),
                                      ctx)
        runnable = [c for c in found if c.status != SKIPPED]
        try:
            plan = make_plan([WorkflowSource(text=c.yaml, name=c.label) for c in runnable], path,
                             registry=self.registry, metric=spec, task=task, seed=options.seed)
        except EvalSetupError as exc:
            raise TuneError("the tune cannot start (nothing was run):\n  " + "\n  ".join(exc.problems)) from None
        dev, test = split_items(len(dataset.rows), options.dev_fraction, options.seed, options.limit)
        plan.items, plan.share_samples = sorted(dev + test), True
        return _State(plan=plan, candidates=found, dev=dev, test=test, model=model_label(entry))

    def _load_resumed(self) -> None:
        try:
            self.tune_id = self.store.resolve_id(str(self.options.resume))
            config = self.store.get(self.tune_id)["evaluation"]["config"]
        except EvalNotFoundError as exc:
            raise TuneError(str(exc)) from None
        saved = config.get("tune")
        if not isinstance(saved, dict):
            raise TuneError(f"{self.tune_id} is an evaluation, not a tune; `metagen eval --resume` finishes it")
        self.options = TuneOptions(**{**saved, "resume": self.tune_id})

    def _record(self, state: _State) -> None:
        if self.options.resume:
            recorded = self.store.get(self.tune_id)["evaluation"]["config"]
            names = [w["name"] for w in recorded.get("workflows", [])]
            if names != [w.name for w in state.plan.workflows]:
                raise TuneError("the candidates changed since this tune started (examples or options differ); "
                                "start a new tune instead of resuming")
            return
        config = {**state.plan.config(), "tune": {**self.options.to_json(), "resume": None}}
        self.store.create(self.tune_id, f"tune {Path(self.options.data).name}", config, {})

    # ------------------------------------------------------------------ running

    def run(self) -> TuneResult:
        state = self._setup()
        self._record(state)
        self._race(state)
        finalists = [c.label for c in state.candidates if c.status == FINALIST]
        self._run_items(state, finalists, state.test, TEST, 0)
        if self.options.adaptive and not self.cancel_token.cancelled:
            self._complete_dev(state)
        if not self.cancel_token.cancelled and not state.results.get(cands.BASELINE):
            self.store.finish(self.tune_id, FAILED, "no item of the baseline could be graded")
            raise TuneError(f"no item of greedy {cands.BASELINE} could be graded ({'; '.join(self._errors)[:300]}); "
                            "check --metric against the dataset (`metagen eval` with the same data shows why)")
        self.store.finish(self.tune_id, CANCELLED if self.cancel_token.cancelled else SUCCEEDED,
                          self.cancel_token.reason if self.cancel_token.cancelled else None)
        if self.cancel_token.cancelled:
            raise TuneError(f"the tune was cancelled ({self.cancel_token.reason}); finished runs are kept: "
                            f"`metagen tune --resume {self.tune_id}` goes on")
        result = self._result(state, finalists)
        if self.options.adaptive:
            self._adaptive(state, finalists, result)
        return result

    def _adaptive(self, state: _State, finalists: list[str], result: TuneResult) -> None:
        """--adaptive: the policy fixed on dev (the race's results and a probe run on dev), written beside the
        recommended workflow and measured once on test (app/eval/tune/adaptive_run.py)."""
        from app.eval.tune.adaptive_run import AdaptiveSetup, build

        options = self.options
        setup = AdaptiveSetup(plan=state.plan, scheduler=self.scheduler, store=self.store, tune_id=self.tune_id,
                              results=state.results, dev=state.dev, test=state.test, baseline=cands.BASELINE,
                              finalists=finalists, seed=options.seed, cancel=self.cancel_token,
                              budget_tokens=options.budget_tokens, budget_seconds=options.budget_seconds,
                              tune_budget_tokens=options.tune_budget_tokens, spent_before=state.spent,
                              observers=self.observers)
        rec = Path(result.recommended["path"])
        provenance = {"tool": "metagen tune --adaptive", "tune_id": self.tune_id, "dataset": options.data,
                      "model": state.model, "metric": state.plan.metric_spec,
                      "budget": {"tokens_per_item": options.budget_tokens,
                                 "seconds_per_item": options.budget_seconds},
                      "split": {"seed": options.seed, "dev": len(state.dev), "test": len(state.test)}}
        result.adaptive = build(setup, rec.with_name(f"{rec.stem}-adaptive.yaml"), provenance)
        result.tune_tokens += setup.spent
        if self.cancel_token.cancelled:
            raise TuneError(f"the tune was cancelled ({self.cancel_token.reason}) while its adaptive policy was "
                            "being built")

    def _race(self, state: _State) -> None:
        """Successive halving on dev; the candidates left are the finalists."""
        import random

        alive = [c.label for c in state.candidates if c.status != SKIPPED]
        order = list(state.dev)
        random.Random(self.options.seed + 1).shuffle(order)  # slices are random subsets of dev, not its first rows
        slices = [len(order)] if self.options.exhaustive else race_slices(len(order))
        round_no, done = 0, 0
        while slices and not self.cancel_token.cancelled and not self._tune_budget_spent(state):
            size = slices.pop(0)
            items = sorted(order[:size])
            round_no += 1
            drops = self._run_slice(state, alive, order[:size], done, round_no)
            left = [label for label in alive if label not in drops]
            drops |= race_round(left, state.results, items, baseline=cands.BASELINE,
                                budget_tokens=self.options.budget_tokens, budget_seconds=self.options.budget_seconds,
                                halve=not self.options.exhaustive)
            drops |= self._ruled_out(state, [label for label in alive if label not in drops])
            self._drop(state, drops, items)
            alive, done = [label for label in alive if label not in drops], size
            state.race.append({"round": round_no, "items": len(items), "alive": list(alive),
                               "dropped": [{"label": k, "reason": v} for k, v in drops.items()]})
            log.info("tune %s round %d on %d dev items: %d left", self.tune_id, round_no, len(items), len(alive))
            challengers = len([a for a in alive if a != cands.BASELINE])
            if not challengers and self._racing():
                break  # greedy alone is left: nothing to choose between, dev need not be finished
            if slices and challengers <= 1:
                slices = [len(order)]  # one challenger left: finish dev for the paired choice against greedy
        for c in state.candidates:
            if c.label in alive:
                c.status = FINALIST
                if self._tune_budget_spent(state):
                    c.reason = "the tuning budget (--tune-budget-tokens) ended the race"

    def _racing(self) -> bool:
        """Whether candidates are ruled out within a slice: not in the grid (every candidate on every dev item),
        nor with --adaptive (a candidate that cannot beat greedy overall may still serve a bin of the policy)."""
        return not (self.options.exhaustive or self.options.adaptive)

    def _ruled_out(self, state: _State, labels: list[str]) -> dict[str, str]:
        """The candidates that can no longer be recommended (`cannot_beat`), each with the reason."""
        if not self._racing():
            return {}
        found = {label: cannot_beat(label, state.results, state.dev, baseline=cands.BASELINE) for label in labels}
        return {label: why for label, why in found.items() if why}

    def _drop(self, state: _State, drops: dict[str, str], items: list[int]) -> None:
        for c in state.candidates:
            if c.label in drops and c.status != DROPPED:
                ran = sum(1 for i in items if i in state.results.get(c.label, {}))
                c.status, c.reason, c.dropped_after = DROPPED, drops[c.label], ran or len(items)

    def _run_slice(self, state: _State, alive: list[str], items: list[int], done: int,
                   round_no: int) -> dict[str, str]:
        """Run `alive` on a slice of dev (`items` in race order, the first `done` of them run in earlier rounds):
        greedy first, then the challengers that a few more wrong answers would rule out (they could no longer
        beat greedy significantly on dev), a few items at a time and checked after each step, then the others on
        the whole slice. Returns the candidates dropped on the way."""
        base = cands.BASELINE
        if not self._racing() or base not in alive:
            self._run_items(state, alive, sorted(items), DEV, round_no)
            return {}
        self._run_items(state, [base], sorted(items), DEV, round_no)
        drops: dict[str, str] = {}
        at = {label: done for label in alive if label != base}
        while not self.cancel_token.cancelled and not self._tune_budget_spent(state):
            steps = {label: steps_to_rule_out(label, state.results, state.dev, items[at[label]:], baseline=base)
                     for label in at if label not in drops}
            risky = {label: s for label, s in steps.items() if s is not None and at[label] + s < len(items)}
            if not risky:
                break
            end = min(at[label] + s for label, s in risky.items())
            self._run_items(state, list(risky), sorted(items[:end]), DEV, round_no)
            for label in risky:
                at[label] = max(at[label], end)
            early = race_round(list(risky), state.results, items[:end], baseline=base,
                               budget_tokens=self.options.budget_tokens, budget_seconds=self.options.budget_seconds,
                               halve=False)
            if end >= MIN_ITEMS:  # a cost (or failures) judged on fewer items than a first slice is no evidence
                drops |= {k: v for k, v in early.items() if not v.startswith("significantly")}
            drops |= self._ruled_out(state, [label for label in risky if label not in drops])
        if not self.cancel_token.cancelled and not self._tune_budget_spent(state):
            self._run_items(state, [label for label in alive if label not in drops], sorted(items), DEV, round_no)
        return drops

    def _complete_dev(self, state: _State) -> None:
        """--adaptive: the candidates dropped only for their cost, finished on dev (a policy may afford one on a
        bin of the items: up to N_BINS times the budget), so the per-bin choice can weigh them."""
        from app.eval.tune.adaptive import N_BINS

        cap = self.options.budget_tokens
        extra = [c.label for c in state.candidates if c.status == DROPPED and c.reason.startswith("over budget")
                 and (cap is None or figures(state.results.get(c.label, {}), state.dev).tokens_per_item
                      <= N_BINS * cap)]
        if extra and not self._tune_budget_spent(state):
            self._run_items(state, extra, state.dev, DEV, len(state.race) + 1)

    def _tune_budget_spent(self, state: _State) -> bool:
        cap = self.options.tune_budget_tokens
        return cap is not None and state.spent >= cap

    def _run_items(self, state: _State, labels: list[str], items: list[int], phase: str, round_no: int) -> None:
        """Run `labels` on `items` (those not already recorded), then reload every result."""
        plan = state.plan
        index = {w.name: i for i, w in enumerate(plan.workflows)}
        cap = self.options.tune_budget_tokens
        budget = Budget(max_tokens=max(1, cap - state.spent)) if cap is not None else Budget()
        scoped = dataclasses.replace(plan, items=list(items))  # this round's items; the shared plan keeps all
        evaluation = Evaluation(scoped, self.scheduler, self.store, eval_id=self.tune_id, observers=self.observers,
                                total_budget=budget, name=f"tune {self.tune_id}")
        evaluation.only = {index[label] for label in labels}
        finished = self.store.finished_keys(self.tune_id)
        pre = sum(1 for w in evaluation.only for i in items if (w, 0, i) in finished)
        counter = {"done": pre, "pre": pre,
                   "total": len(evaluation.only) * len(items), "at": 0.0, "start": time.perf_counter()}
        evaluation.on_progress = lambda _p: self._progress(state, phase, round_no, labels, items, counter)
        remove = self.cancel_token.on_cancel(lambda: evaluation.cancel(self.cancel_token.reason or "cancelled"))
        try:
            self._progress(state, phase, round_no, labels, items, counter, step=0)
            status = evaluation.run(resume=True)
        finally:
            remove()
        if status == FAILED:  # e.g. one candidate's outputs could never be graded: the others go on
            log.warning("tune %s: a %s round ended with: %s", self.tune_id, phase, evaluation.error)
            self._errors.append(str(evaluation.error or ""))
        self._load_results(state)
        self._progress(state, phase, round_no, labels, items, counter, step=0, force=True)

    def _load_results(self, state: _State) -> None:
        labels = [w.name for w in state.plan.workflows]
        results: Results = {}
        spent = 0
        for row in self.store.get(self.tune_id)["items"]:
            spent += row_spent(row)
            found = item_result(row)
            if found is not None:
                results.setdefault(labels[row["workflow_idx"]], {})[int(row["item_idx"])] = found
        state.results, state.spent = results, spent

    def _progress(self, state: _State, phase: str, round_no: int, labels: list[str], items: list[int],
                  counter: dict[str, float], step: int = 1, force: bool = False) -> None:
        with self._progress_lock:  # called from the evaluation's item threads
            counter["done"] += step
            now = time.perf_counter()
            if self.on_progress is None or (not force and now - counter["at"] < 1.0
                                            and counter["done"] < counter["total"]):
                return
            counter["at"] = now
            if not force:
                self._load_results(state)
            self._report(state, phase, round_no, labels, items, counter, now, force)

    def _report(self, state: _State, phase: str, round_no: int, labels: list[str], items: list[int],
                counter: dict[str, float], now: float, force: bool) -> None:
        assert self.on_progress is not None
        rows = []
        for c in state.candidates:
            f = figures(state.results.get(c.label, {}), items)
            ci = test_figures(state.results.get(c.label, {}), items)["ci"] if f.n else None
            status = RUNNING if c.label in labels and c.status not in (DROPPED, SKIPPED) else c.status
            rows.append({"label": c.label, "status": status, "n_items": f.n,
                         "accuracy": None if f.n == 0 else f.accuracy, "ci": ci,
                         "tokens_per_item": None if f.n == 0 else f.tokens_per_item, "reason": c.reason})
        elapsed = now - counter["start"]
        ran, here = counter["done"], counter["done"] - counter["pre"]  # runs done, and done in this process
        eta = elapsed / here * (counter["total"] - ran) if here > 0 and not force else None
        try:
            self.on_progress(TuneProgress(phase=phase, rows=rows, tokens_used=state.spent, eta_s=eta,
                                          round=round_no, done=int(ran), total=int(counter["total"]),
                                          tune_id=self.tune_id, warnings=list(state.plan.warnings)))
        except Exception:
            log.exception("tune progress callback failed")

    # ------------------------------------------------------------------ the result

    def _result(self, state: _State, finalists: list[str]) -> TuneResult:
        options, results, base = self.options, state.results, cands.BASELINE
        recommended, why = choose(finalists, results, state.dev, baseline=base, budget_tokens=options.budget_tokens,
                                  budget_seconds=options.budget_seconds)
        table = held_out_table(finalists, results, state.test)
        workflow_of = {c.label: c.workflow for c in state.candidates}
        comps = comparisons(recommended, base, table, workflow_of, results, state.test, state.dev)
        main = comps[0] if comps and comps[0]["against"] == "greedy" else {
            "a": base, "b": base, "diff": 0.0, "ci": [0.0, 0.0], "p": 1.0, "n": len(state.test),
            "sentence": "the recommended workflow is greedy itself"}
        dev_fig = figures(results.get(recommended, {}), state.dev)
        rec = next(c for c in state.candidates if c.label == recommended)
        rec_test = test_figures(results.get(recommended, {}), state.test)
        path = Path(options.out).expanduser() if options.out else default_path(self.workflows_dir, options.data,
                                                                               state.model)
        dev_json = {"accuracy": dev_fig.accuracy, "tokens_per_item": dev_fig.tokens_per_item, "n": dev_fig.n}
        provenance = {"tool": "metagen tune", "tune_id": self.tune_id, "dataset": options.data,
                      "model": state.model, "metric": state.plan.metric_spec, "candidate": recommended,
                      "budget": {"tokens_per_item": options.budget_tokens, "seconds_per_item": options.budget_seconds},
                      "split": {"seed": options.seed, "dev": len(state.dev), "test": len(state.test)},
                      "dev": dev_json, "test": rec_test,
                      "against_greedy": {k: main[k] for k in ("diff", "ci", "p")}, "why": why}
        write_recommended(rec.yaml, path, provenance, f"tuned-{Path(path).stem}")
        return TuneResult(
            tune_id=self.tune_id, candidates=[c.to_json() for c in state.candidates],
            split={DEV: state.dev, TEST: state.test},
            recommended={"label": recommended, "workflow": rec.workflow, "params": rec.params, "path": str(path),
                         "dev": dev_json, "test": rec_test, "why": why},
            baseline={"label": base, "test": test_figures(results.get(base, {}), state.test)},
            comparison={k: main[k] for k in ("diff", "ci", "p")} | {"sentence": main["sentence"]},
            front=front(table), tune_tokens=state.spent, held_out=table, comparisons=comps, race=state.race,
            verdict=verdict(recommended, base, why, main), dataset=options.data, model=state.model,
            metric=state.plan.metric_spec, warnings=list(state.plan.warnings))


def _measuring(scheduler: Scheduler) -> Scheduler:
    """A scheduler like `scheduler` (provider, children, code rules) whose node cache keeps nothing: a candidate
    whose node matches another's would otherwise cost nothing and look cheap. Samples are still shared through
    the sample cache, where a reused sample counts in the candidate's own cost (`completion_tokens_reused`)."""
    fresh = Scheduler(scheduler.registry, scheduler.provider, cache=NodeCache(max_entries=0),
                      max_workers=scheduler.max_workers, allow_python=scheduler.allow_python,
                      children=scheduler.children)
    fresh.allow_code_execution = scheduler.allow_code_execution
    fresh.code_limit_caps = scheduler.code_limit_caps
    fresh.hide_cache_hits = scheduler.hide_cache_hits
    return fresh


def _examples_dir() -> Path | None:
    from app.platform.resources import examples_dir

    try:
        return examples_dir()
    except FileNotFoundError:
        return None
