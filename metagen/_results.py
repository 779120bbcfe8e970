"""`metagen.RunResult` and `metagen.Evaluation`: what a run and an evaluation give back, with their figures."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.run.events import Event
from app.run.scheduler import RunResult as _SchedulerResult
from app.service.views import evaluation_figure, evaluation_html, run_html, trace_figure
from metagen._args import expect
from nodes.base import Candidate, CandidateSet, from_jsonable, to_jsonable

if TYPE_CHECKING:
    from metagen._studio import Studio

__all__ = ["Evaluation", "RunResult", "Stats"]

NOTEBOOK_EXTRA = "pip install 'metagen-studio[notebook]'"


class Stats(dict):  # type: ignore[type-arg]
    """A run's totals, read as keys or attributes: `tokens` (prompt + completion), `calls` (LM calls), `seconds`
    (wall time), and every counter of the trace (`prompt_tokens`, `prompt_tokens_cached`, `completion_tokens`,
    `lm_calls`, `nodes_run`, `nodes_cached`, `wall_s`...)."""

    def __init__(self, counters: dict[str, Any]) -> None:
        super().__init__(counters)
        self["tokens"] = int(counters.get("prompt_tokens") or 0) + int(counters.get("completion_tokens") or 0)
        self["calls"] = int(counters.get("lm_calls") or 0)
        self["seconds"] = float(counters.get("wall_s") or 0.0)

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no run stat {name!r}; there are {', '.join(self)}") from None


class RunResult:
    """How a run ended: `status` ("succeeded", "failed", "cancelled", "budget_exceeded"), `outputs` by name,
    `stats`, `run_id`, `error`, its `events`, each node's `candidates(node_id)` and the trace's figures.

    Example:
        >>> result = metagen.load("self_consistency").run({"question": "What is 3 + 4?"})   # doctest: +SKIP
        >>> [c.answer for c in result.candidates("think")]                                 # doctest: +SKIP
        ['7', '7', '7', '8']
        >>> result.figure("votes")                                                          # doctest: +SKIP
    """

    def __init__(self, *, run_id: str, status: str, outputs: dict[str, Any], stats: dict[str, Any],
                 error: str | None, node_outputs: dict[str, dict[str, Any]], events: list[Event],
                 studio: Studio | None, traced: bool) -> None:
        self.run_id = run_id
        self.status = status
        self.outputs = outputs
        self.stats = Stats(stats)
        self.error = error
        self.events = events
        """Every event of the run (but streamed tokens), in order; empty for a run read back from the traces."""
        self._node_outputs = node_outputs
        self._studio = studio
        self._traced = traced
        self._record: dict[str, Any] | None = None

    @classmethod
    def from_scheduler(cls, result: _SchedulerResult, events: list[Event], studio: Studio,
                       traced: bool) -> RunResult:
        error = result.error or (str(result.failure) if result.failure is not None else None)
        return cls(run_id=result.run_id, status=result.status, outputs=result.outputs, stats=result.stats.to_json(),
                   error=error,
                   node_outputs=result.node_outputs, events=events, studio=studio, traced=traced)

    @classmethod
    def from_record(cls, record: dict[str, Any], studio: Studio) -> RunResult:
        """A run read back from the trace database (`metagen.trace(run_id)`)."""
        run = record["run"]
        nodes = {n["node_id"]: from_jsonable(n.get("outputs") or {}) for n in record.get("nodes", [])}
        made = cls(run_id=run["id"], status=run["status"], outputs=from_jsonable(run.get("outputs") or {}),
                   stats=run.get("stats") or {k: run.get(k) for k in ("lm_calls", "prompt_tokens", "completion_tokens",
                                                                       "wall_s")},
                   error=run.get("error"), node_outputs=nodes, events=[], studio=studio, traced=True)
        made._record = record
        return made

    @property
    def ok(self) -> bool:
        """True when the run succeeded."""
        return self.status == "succeeded"

    def candidates(self, node_id: str) -> list[Candidate]:
        """The candidates (text, answer, score, cluster, seed...) a node produced, in order.

        Example:
            >>> texts = [c.text for c in result.candidates("think")]   # doctest: +SKIP
        """
        expect("node_id", node_id, str, "a node id (str)")
        if node_id not in self._node_outputs:
            raise ValueError(f"node_id: no node {node_id!r} produced outputs in this run (nodes with outputs: "
                             f"{', '.join(self._node_outputs) or 'none'})")
        sets = [v for v in self._node_outputs[node_id].values() if isinstance(v, CandidateSet)]
        if not sets:
            raise ValueError(f"node_id: node {node_id!r} has no candidates output (its outputs: "
                             f"{', '.join(self._node_outputs[node_id])})")
        return list(sets[0].candidates)

    def record(self) -> dict[str, Any]:
        """The run's full trace record (run, provenance, nodes, lm_calls, events) from the trace database."""
        if not self._traced:
            raise ValueError("this run was not traced (run it with trace=True for its record and figures)")
        if self._record is None:
            if self._studio is None or self._studio.closed:
                raise ValueError("the Studio this run used is closed; read it back with metagen.trace(run_id)")
            self._record = self._studio.service.trace_record(self.run_id)
        return self._record

    def figure(self, view: str = "timeline", node_id: str | None = None) -> Any:
        """The trace view's Plotly figure: "timeline", "samples", "votes", "tree" or "tokens" (`node_id` picks
        the node, or for "tokens" the LM call id). A run with nothing to draw in a view (no search tree, no
        log-probabilities) gets a figure that says so.

        Example:
            >>> result.figure("timeline").show()   # doctest: +SKIP
        """
        expect("view", view, str, 'a view name: "timeline", "samples", "votes", "tree" or "tokens"')
        return trace_figure(self.record(), view, node_id)

    def to_json(self) -> dict[str, Any]:
        """run_id, status, outputs (as JSON), stats and error: what `metagen run --json` prints."""
        return {"run_id": self.run_id, "status": self.status, "outputs": to_jsonable(self.outputs),
                "stats": dict(self.stats), "error": self.error}

    def _repr_html_(self) -> str:
        record = None
        if self._traced and (self._record is not None or (self._studio is not None and not self._studio.closed)):
            record = self.record()
        return run_html(self.to_json(), record)

    def __repr__(self) -> str:
        shown = {k: (v if not isinstance(v, CandidateSet) else f"<{len(v)} candidates>") for k, v in
                 self.outputs.items()}
        return f"<metagen.RunResult {self.run_id} {self.status} outputs={shown!r}>"


class Evaluation:
    """A finished (or cancelled) evaluation: `points` (one dict per workflow and sweep point, as
    `metagen eval --json`), `items` (one per dataset item and point), tables, figures and the offline report.

    Example:
        >>> ev = metagen.evaluate([greedy, sc], "datasets/arithmetic.jsonl", metric="number",
        ...                       sweep={"think.n": [1, 2, 4]}, limit=10)               # doctest: +SKIP
        >>> ev.points_frame()[["workflow", "params", "accuracy", "completion_tokens"]]   # doctest: +SKIP
        >>> ev.figure("pareto")                                                         # doctest: +SKIP
    """

    def __init__(self, result: dict[str, Any]) -> None:
        self.summary: dict[str, Any] = result["summary"]
        """Everything the Evaluate tab shows: points with intervals and costs, pass@k, disagreements, status."""
        self.points: list[dict[str, Any]] = result["points"]
        self.items: list[dict[str, Any]] = result["items"]

    @property
    def eval_id(self) -> str:
        return str(self.summary["eval_id"])

    @property
    def status(self) -> str:
        return str(self.summary["status"])

    @property
    def warnings(self) -> list[str]:
        """What makes the numbers mean less than they seem, e.g. a verifier that selects with the graded tests
        ("selection uses the grading tests: best-of-N equals pass@N here"); [] when nothing was found."""
        return list(self.summary.get("warnings") or [])

    def to_pandas(self) -> Any:
        """One row per item and point: workflow, label, each swept param as a column, item_idx, correct, score,
        output, tokens, seconds, run_id. Needs pandas."""
        pd = _pandas()
        rows = [{**{k: v for k, v in item.items() if k not in ("params", "samples")}, **item["params"]}
                for item in self.items]
        return pd.DataFrame(rows)

    def points_frame(self) -> Any:
        """One row per point (the `points` dicts, each swept param also as a column). Needs pandas."""
        pd = _pandas()
        return pd.DataFrame([{**p, **(p.get("params") or {})} for p in self.points])

    def compare(self, a: str, b: str) -> dict[str, Any]:
        """Point `a` against point `b` (labels, or workflow names with one point) on the items both ran: {a, b, n,
        diff (accuracy(a) - accuracy(b)), ci (paired 95 %), p_value, method, significant, sentence}.

        Example:
            >>> ev.compare("self-consistency", "chain-of-thought")["sentence"]   # doctest: +SKIP
            'self-consistency beats chain-of-thought by 8.3 points [2.1, 14.5], p = 0.01'
        """
        from app.service.comparisons import compare_labels

        expect("a", a, str, "a point label or workflow name (str)")
        expect("b", b, str, "a point label or workflow name (str)")
        return compare_labels(self.items, a, b, seed=int(self.summary.get("seed") or 0))

    def comparisons(self) -> Any:
        """Every pair of points (or each against the evaluation's baseline) as a DataFrame, largest difference
        first: a, b, n, diff, ci_low, ci_high, p_value, method, significant, sentence. Needs pandas."""
        pd = _pandas()
        return pd.DataFrame([{**{k: v for k, v in c.items() if k != "ci"}, "ci_low": c["ci"][0],
                              "ci_high": c["ci"][1]} for c in self.summary.get("comparisons", [])],
                            columns=["a", "b", "n", "diff", "ci_low", "ci_high", "p_value", "method", "significant",
                                     "sentence"])

    def figure(self, kind: str = "accuracy") -> Any:
        """"accuracy" (by swept value, 95% intervals), "tokens" (accuracy against completion tokens per item),
        "tokens-answer" / "tokens-thinking" (against the answers' tokens or the thinking tokens alone), "pareto"
        (tokens with the Pareto frontier) or "passk" (a figure saying why when there is nothing to draw)."""
        expect("kind", kind, str, 'a figure name: "accuracy", "tokens", "tokens-answer", "tokens-thinking", '
                                  '"pareto" or "passk"')
        return evaluation_figure(self.summary, kind)

    def report_html(self, path: str | Path) -> Path:
        """Write the offline HTML report (plotly inlined: it opens without a network) to `path`; returns it."""
        from app.service.views import evaluation_report

        expect("path", path, (str, Path), "a file path (str or pathlib.Path)")
        return evaluation_report(self.summary, Path(path).expanduser())

    def _repr_html_(self) -> str:
        return evaluation_html(self.summary)

    def __repr__(self) -> str:
        return f"<metagen.Evaluation {self.eval_id} {self.status}: {len(self.points)} points, {len(self.items)} items>"


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise ImportError(f"tables need pandas: {NOTEBOOK_EXTRA} (or pip install pandas)") from None
    return pandas
