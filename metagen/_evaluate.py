"""`metagen.evaluate`: workflows over a dataset with sweeps, through the app's evaluation service."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from metagen._args import expect, positive
from metagen._progress import EvaluationBar
from metagen._results import Evaluation
from metagen._studio import Studio, studio_or_default
from metagen._workflow import Workflow, load

__all__ = ["evaluate"]


def _sources(workflows: Any) -> list[tuple[str, str]]:
    """(name, YAML) of each workflow: a Workflow, a path or example name, a list of those, or {name: workflow}."""
    if isinstance(workflows, Workflow | str | Path):
        workflows = [workflows]
    if isinstance(workflows, Mapping):
        items = list(workflows.items())
    elif isinstance(workflows, list | tuple):
        items = [(None, w) for w in workflows]
    else:
        raise TypeError("workflows must be a metagen.Workflow, a path, a list of those or a dict name -> workflow, "
                        f"got {type(workflows).__name__}")
    if not items:
        raise ValueError("workflows: give at least one workflow")
    out = []
    for name, item in items:
        wf = item if isinstance(item, Workflow) else load(item) if isinstance(item, str | Path) else None
        if wf is None:
            raise TypeError(f"workflows: each must be a metagen.Workflow or a path, got {type(item).__name__}")
        if name is not None:
            expect("workflows (a dict's keys)", name, str, "a name (str)")
        out.append((name or wf.name, wf.to_yaml()))
    return out


def _data(data: Any) -> Any:
    """A dataset path or name as given; a DataFrame or a list of dicts as rows."""
    if isinstance(data, str | Path):
        return data
    if isinstance(data, list | tuple):
        return list(data)
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # a pandas DataFrame, without importing pandas
        return data.to_dict(orient="records")
    raise TypeError(f"data must be a dataset path, a list of dicts or a pandas DataFrame, got {type(data).__name__}")


def _sweep(sweep: Any) -> Any:
    if sweep is None:
        return None
    if isinstance(sweep, str):
        return [sweep]
    if isinstance(sweep, Mapping):
        for key in sweep:
            expect("sweep (a key)", key, str, "'node.param'")
        return dict(sweep)
    if isinstance(sweep, list | tuple) and all(isinstance(s, str) for s in sweep):
        return list(sweep)
    raise TypeError('sweep must be a dict such as {"think.n": [1, 2, 4]} or a list of "think.n=1,2,4" texts, '
                    f"got {type(sweep).__name__}")


def evaluate(workflows: Any, data: Any, *, metric: str | None = None, output: str = "answer", sweep: Any = None,
             map: dict[str, str] | None = None, limit: int | None = None,
             concurrency: int | None = None, resume: str | None = None, progress: bool = True,
             repeats: int = 1, share_samples: bool = False, bootstrap: int = 0,
             studio: Studio | None = None) -> Evaluation:
    """Run workflows over a dataset and grade their outputs: accuracy with 95% intervals, tokens, pass@k and the
    Pareto frontier per workflow and sweep point (as `metagen eval`; recorded beside the traces).

    Args:
        workflows: a `Workflow`, a path, a list of those, or {name: workflow}.
        data: a JSONL/CSV path (or a dataset's name), a list of dicts, or a pandas DataFrame.
        metric: "exact", "number", "contains", "math", "choice", "regex:PATTERN", "python:FILE", "output:NAME" or
            "tests"; None (the default): the dataset's own (its NAME.meta.yaml, as `metagen eval`), else "exact".
        output: the workflow output graded (a workflow without it uses its only output).
        sweep: {"node.param": [values]} (the grid is the product of the axes).
        map: {workflow input: dataset column} where the names differ.
        limit: at most this many items (the first ones).
        concurrency: items in flight at once (default 8, which keeps the engine's batch full; for a remote model on
            several servers, the sum of their max_concurrency; `summary["servers"]` then says what each served).
        resume: the id of an interrupted evaluation to finish (with its own workflows, data and metric).
        progress: a progress bar (tqdm) while it runs.
        repeats: run every item this many times with derived seeds (an item's score is the mean of its runs; the
            standard errors are clustered by item).
        share_samples: workflows drawing the same samples share one draw (as `--share-samples`).
        bootstrap: maj@k / best-of-k curves averaged over this many random k-subsets (0: the first k).
        studio: the Studio to run on (default: the shared one).

    Example:
        >>> greedy = metagen.load("chain_of_thought")
        >>> sc = metagen.load("self_consistency")
        >>> ev = metagen.evaluate([greedy, sc], "datasets/arithmetic.jsonl", metric="number",
        ...                       sweep={"think.n": [1, 2, 4]}, limit=10)    # doctest: +SKIP
        >>> ev.to_pandas().groupby("label").correct.mean()                   # doctest: +SKIP
    """
    if metric is not None:
        expect("metric", metric, str, 'a metric name such as "exact" or "number", or None for the dataset\'s own')
    expect("output", output, str, "an output name (str)")
    if map is not None:
        expect("map", map, dict, "a dict of workflow input -> dataset column")
    positive("limit", limit)
    positive("concurrency", concurrency)
    positive("repeats", repeats)
    expect("share_samples", share_samples, bool, "True or False")
    expect("bootstrap", bootstrap, int, "a number of resamples (int, 0 for the first k)")
    if resume is not None:
        expect("resume", resume, str, "an evaluation id (str)")
    expect("progress", progress, bool, "True or False")
    owner = studio_or_default(studio)
    sources = [] if resume else _sources(workflows)
    rows = None if resume else _data(data)
    bar = EvaluationBar() if progress else None
    try:
        eval_id = owner.service.evaluations.evaluate(
            sources, rows, metric=metric, output=None if output == "answer" else output, sweeps=_sweep(sweep),
            mapping=map, limit=limit, concurrency=concurrency, resume=resume, on_progress=bar,
            repeats=repeats, share_samples=share_samples, bootstrap=bootstrap)
    finally:
        if bar is not None:
            bar.close()
    return Evaluation(owner.service.evaluations.result(eval_id))
