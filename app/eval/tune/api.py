"""The tuner's public data: the options a caller sets, the live progress of the race, and the result in the
`metagen tune --json` contract shape (with its Pareto figure and offline HTML report)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

DEV = "dev"
TEST = "test"
FINALIST = "finalist"
DROPPED = "dropped"
SKIPPED = "skipped"
RUNNING = "running"
"""A candidate still in the race (progress rows only; the result has finalist / dropped / skipped)."""


@dataclass
class TuneOptions:
    """What `metagen tune` (and `metagen.tune`, the Tune tab) is asked: the dataset, the metric, the model, the
    allowed mean cost per item of the chosen strategy, and how the race is run."""

    data: str
    """A dataset file or name, `hf:OWNER/NAME[:CONFIG][@SPLIT]`, or `task:NAME` (a task preset)."""
    task: str | None = None
    """A task preset (as `metagen eval --task`) whose prompt, reference and metric make the items from `data`'s
    rows in place of the preset's own Hub dataset (offline: a downloaded HumanEval.jsonl.gz, say)."""
    metric: str | None = None
    """As `metagen eval --metric`; None: the dataset's own (its NAME.meta.yaml) or the preset's."""
    model: str | None = None
    """Replaces every candidate's generating model: a file, a Hub reference, a remote server (http...) or a
    replica list (comma-separated URLs); None: each workflow's own."""
    budget_tokens: int | None = None
    """The allowed mean tokens per item (prompt evaluated + completion) of the recommended strategy."""
    budget_seconds: float | None = None
    """The allowed mean seconds per item of the recommended strategy."""
    candidates: list[str] = field(default_factory=list)
    """Workflow files or example names to race; empty: every example that binds to the dataset and metric."""
    axes: list[str] = field(default_factory=list)
    """'NODE.PARAM=v1,v2' texts that replace a candidate's natural compute axis (or add one)."""
    dev_fraction: float = 0.5
    """The share of items the race runs on; the rest is held out for the reported figures."""
    tune_budget_tokens: int | None = None
    """A cap on the tokens the tuning itself spends (the race stops and keeps the leaders when reached)."""
    limit: int | None = None
    """At most this many items of the dataset (a seeded shuffle picks them)."""
    seed: int = 0
    out: str | None = None
    """Where the recommended workflow is written; None: tuned/<dataset>-<model>.yaml in the workflows folder."""
    adaptive: bool = False
    """Also fix, on dev, a difficulty-adaptive policy (a probe, its quantile bins, a candidate per bin within the
    budget), write it as a workflow with a `route` node and report it on test (`TuneResult.adaptive`)."""
    resume: str | None = None
    """The id of an interrupted tune to finish (its own options are used)."""
    exhaustive: bool = False
    """Run every candidate on every dev item (no racing): the grid `benchmarks/bench_tune.py` compares with."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TuneProgress:
    """The race so far: one row per candidate {label, status, n_items, accuracy, ci, tokens_per_item, reason}
    (status running | dropped | finalist | skipped), the tokens spent and an ETA."""

    phase: str
    """'dev' while racing, 'test' while the finalists run on the held-out items."""
    rows: list[dict[str, Any]]
    tokens_used: int
    eta_s: float | None
    round: int = 0
    """The race's round (its slice of dev doubles each round)."""
    done: int = 0
    """Runs (candidate x item) finished in this phase, and how many it plans."""
    total: int = 0
    tune_id: str = ""
    warnings: list[str] = field(default_factory=list)
    """The plan's warnings about the candidates (e.g. a selection that sees an input's default), known before the
    race starts and sent with every progress, so a caller can show them before the first run ends."""


@dataclass
class TuneResult:
    """A finished tune: everything `metagen tune --json` prints (see `to_json`), plus what the report draws."""

    tune_id: str
    candidates: list[dict[str, Any]]
    """{label, workflow, params, status: finalist|dropped|skipped, dropped_after, reason}."""
    split: dict[str, list[int]]
    """{"dev": [item ids], "test": [item ids]}: disjoint dataset row indices."""
    recommended: dict[str, Any]
    """{label, path, dev: {accuracy, tokens_per_item}, test: {accuracy, ci, tokens_per_item, n}}."""
    baseline: dict[str, Any]
    """{label, test: {accuracy, ci, tokens_per_item, n}}: greedy chain_of_thought."""
    comparison: dict[str, Any]
    """The recommended one against greedy on test: {diff, ci, p}."""
    front: list[dict[str, Any]]
    """The held-out Pareto front of accuracy against tokens: [{label, accuracy, tokens_per_item}]."""
    tune_tokens: int
    """Tokens the tuning itself generated and evaluated (dev race plus test runs)."""
    held_out: list[dict[str, Any]] = field(default_factory=list)
    """The finalists' test table: {label, accuracy, ci, tokens_per_item, seconds_per_item, n}."""
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    """More paired comparisons on test: {against, a, b, diff, ci, p, sentence} (greedy, best plain majority /
    best-of-N at equal tokens)."""
    race: list[dict[str, Any]] = field(default_factory=list)
    """The race log: one entry per round {round, items, alive: [labels], dropped: [{label, reason}]}."""
    verdict: str = ""
    """One sentence: what was recommended and why (or the honest "no gain over greedy")."""
    dataset: str = ""
    model: str = ""
    metric: str = ""
    warnings: list[str] = field(default_factory=list)
    """What makes a candidate's figures mean less than they seem (the evaluation plan's selection warnings)."""
    adaptive: dict[str, Any] | None = None
    """--adaptive: {status: built|none, path, probe, bins, branches: [{bin, range, label, n, accuracy,
    tokens_per_item}], dev, test, against: {label, dev, test}, comparison: {diff, ci, p, sentence}, comparisons,
    files: [the policy, its branch workflows], reason}; None when not asked."""

    def to_json(self) -> dict[str, Any]:
        """The contract shape of `metagen tune --json` (and a few more keys a report needs)."""
        return {"tune_id": self.tune_id, "candidates": self.candidates, "split": self.split,
                "recommended": self.recommended, "baseline": self.baseline, "comparison": self.comparison,
                "front": self.front, "tune_tokens": self.tune_tokens, "held_out": self.held_out,
                "comparisons": self.comparisons, "race": self.race, "verdict": self.verdict,
                "dataset": self.dataset, "model": self.model, "metric": self.metric, "warnings": self.warnings,
                **({"adaptive": self.adaptive} if self.adaptive is not None else {})}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TuneResult:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})

    def figure(self) -> Any:
        """The held-out Pareto plot (plotly Figure): every finalist's test accuracy (with its CI) against tokens per
        item, the front joined, the recommended one and greedy marked."""
        from app.viz.tune import tune_figure

        return tune_figure(self.to_json())

    def html(self) -> str:
        """The report as one offline HTML page (the figure, the held-out table, the race log, the comparisons)."""
        from app.viz.tune import tune_html

        return tune_html(self.to_json())
