"""`metagen.tune`: which strategy, with which compute, for this data, model and budget (`metagen tune`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.service.tunes import TuneOptions, TuneProgress, TuneResult
from metagen._args import expect, positive
from metagen._studio import Studio, studio_or_default

__all__ = ["tune"]


class _TuneBar:
    """The race's progress on a tqdm bar: runs of the phase done, the leaders so far."""

    def __init__(self) -> None:
        self._bar: Any = None

    def __call__(self, progress: TuneProgress) -> None:
        from metagen._progress import _bar

        if self._bar is None or self._bar is False or self._bar.desc != f"tune {progress.phase}":
            self.close()
            self._bar = _bar(total=progress.total, desc=f"tune {progress.phase}", unit="run") or False
        if self._bar:
            self._bar.total = progress.total
            self._bar.n = progress.done
            alive = sum(1 for r in progress.rows if r.get("status") == "running")
            self._bar.set_postfix_str(f"{alive} in the race, {progress.tokens_used} tokens", refresh=False)
            self._bar.refresh()

    def close(self) -> None:
        if self._bar:
            self._bar.close()
        self._bar = None


def tune(data: str | Path, *, task: str | None = None, metric: str | None = None, model: str | None = None,
         budget_tokens: int | None = None,
         budget_seconds: float | None = None, candidates: list[str] | None = None, axes: list[str] | None = None,
         dev_fraction: float = 0.5, tune_budget_tokens: int | None = None, limit: int | None = None, seed: int = 0,
         out: str | Path | None = None, resume: str | None = None, progress: bool = True, adaptive: bool = False,
         studio: Studio | None = None) -> TuneResult:
    """Find the strategy (and its compute: samples, expansions, rounds) that scores best on your data within a
    budget per item, honestly: raced on a dev split with paired tests, reported once on the held-out test split,
    written as a workflow (as `metagen tune`).

    Args:
        data: a dataset file or name, "hf:OWNER/NAME", or "task:NAME".
        task: a task preset whose prompt, reference and metric make the items from `data`'s rows (a local copy of
            the preset's dataset, for offline use), as `metagen eval --task`.
        metric: as `metagen.evaluate` (None: the dataset's own).
        model: replaces every candidate's generating model (a file, a Hub reference, an http server).
        budget_tokens / budget_seconds: the allowed mean cost per item of the recommended strategy (one of them).
        candidates: workflow files or example names (default: every example that fits the data and metric).
        axes: "NODE.PARAM=v1,v2" texts replacing a candidate's compute axis.
        dev_fraction: the share of items raced on; the rest is held out.
        tune_budget_tokens: a cap on the tokens the tuning itself spends.
        limit: at most this many items. seed: the split's and runs' seed.
        out: where the recommended workflow is written (default tuned/<dataset>-<model>.yaml).
        resume: the id of an interrupted tune to finish.
        progress: a progress bar while it runs.
        adaptive: also a difficulty-adaptive policy (a probe's bins and a strategy per bin, fixed on dev), written
            beside the recommended workflow as `<out>-adaptive.yaml` and reported on test in `.adaptive`.

    Returns a TuneResult: `.recommended`, `.front`, `.adaptive`, `.figure()`, `.html()`, `.to_json()`.

    Example:
        >>> result = metagen.tune("datasets/arithmetic.jsonl", budget_tokens=1500, limit=20)  # doctest: +SKIP
        >>> result.recommended["label"], result.comparison["p"]                                # doctest: +SKIP
    """
    expect("data", data, str | Path, "a dataset path or name (str)")
    positive("budget_tokens", budget_tokens)
    positive("tune_budget_tokens", tune_budget_tokens)
    positive("limit", limit)
    if budget_seconds is not None:
        expect("budget_seconds", budget_seconds, int | float, "seconds per item (a number)")
    expect("dev_fraction", dev_fraction, int | float, "a fraction between 0 and 1")
    expect("seed", seed, int, "a whole number")
    expect("adaptive", adaptive, bool, "true or false")
    if task is not None:
        expect("task", task, str, "a task preset's name (str)")
    options = TuneOptions(data=str(data), task=task, metric=metric, model=model, budget_tokens=budget_tokens,
                          budget_seconds=budget_seconds, candidates=list(candidates or []), axes=list(axes or []),
                          dev_fraction=float(dev_fraction), tune_budget_tokens=tune_budget_tokens, limit=limit,
                          seed=seed, out=str(out) if out is not None else None, resume=resume, adaptive=adaptive)
    bar = _TuneBar() if progress else None
    try:
        return studio_or_default(studio).service.tune(options, on_progress=bar)
    finally:
        if bar is not None:
            bar.close()
