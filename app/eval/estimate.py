"""The pre-run cost estimate of an evaluation: expected and maximum tokens from the workflows' structure,
and the expected time on this machine from a throughput the engine measured here (cached per model); while it
runs, the time left is that same estimate, moved toward the pace the finished runs show."""

from __future__ import annotations

import itertools
import json
import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.eval.plan import EvalPlan
from app.platform.fileio import atomic_write_text
from app.platform.paths import data_dir
from app.workflow.spec import NodeSpec, Workflow
from nodes.base import render_template
from nodes.registry import NodeRegistry

log = logging.getLogger(__name__)

EXPECTED_FILL = 0.6
"""Expected share of max_tokens a completion uses (stop strings and end of turn end most completions early);
the report after the evaluation shows the real figure beside it."""
CALIBRATION_FILE = "calibration.json"
CALIBRATION_BATCH = 8
CALIBRATION_TOKENS = 24
CALIBRATION_RUNS = ((1, CALIBRATION_TOKENS), (CALIBRATION_BATCH, CALIBRATION_TOKENS), (32, 8))
"""(batch, tokens) the calibration decodes: an evaluation runs at up to 64 sequences (8 items x best-of-8), and
throughput keeps growing well past batch 8 on a CPU (SmolLM2, 2 cores: 3.7 tokens/s at 8, 9.4 at 32, 18 at 64),
so an estimate that held batch 8's speed flat beyond it came out six times too long (issue 43 §2.4)."""
DEFAULT_DECODE_TPS = {1: 60.0, CALIBRATION_BATCH: 150.0}
DEFAULT_PREFILL_TPS = 800.0

TokenCounter = Callable[[str], int]


def approx_tokens(text: str) -> int:
    """A tokenizer-free guess (about four characters a token) when no model is loaded (dry runs)."""
    return max(1, len(text) // 4)


def _calls_and_tokens(node: NodeSpec, params: dict[str, Any]) -> tuple[int, int]:
    """(LM calls, most completion tokens) of one run of a node, from its params."""
    max_tokens = int(params.get("max_tokens") or 0)
    kind = node.kind
    if kind == "sampler":
        n = int(params.get("n") or 1)
        return n, n * max_tokens
    if kind == "generator":
        return 1, max_tokens
    if kind == "refiner":
        rounds = 1 + 2 * int(params.get("max_iters") or 1)
        return rounds, rounds * max_tokens
    if kind == "search":
        expansions = int(params.get("beam_width") or 1) * int(params.get("expand_k") or 1) * int(
            params.get("max_depth") or 1)
        return 2 * expansions, expansions * max_tokens
    if kind == "verifier" and params.get("method") in ("llm_judge", "likelihood"):
        return 1, 1
    return 0, 0


def _resolved(node: NodeSpec, registry: NodeRegistry) -> dict[str, Any]:
    cls = registry.get(node.kind)
    defaults = {p.name: p.default for p in cls.params} if cls is not None else {}
    return {**defaults, **node.params}


def workflow_cost(wf: Workflow, registry: NodeRegistry) -> tuple[int, int]:
    """(LM calls, most completion tokens) of one run of `wf`'s own nodes, from their params as `estimate` counts
    them (a workflow node's child and a model-judged vote are not counted: a lower bound for those)."""
    calls = tokens = 0
    for node in wf.nodes:
        c, t = _calls_and_tokens(node, _resolved(node, registry))
        calls, tokens = calls + c, tokens + t
    return calls, tokens


def estimate(plan: EvalPlan, registry: NodeRegistry, *, count_tokens: TokenCounter | None = None,
             calibration: dict[str, Any] | None = None, concurrency: int = 8) -> dict[str, Any]:
    """{max_completion_tokens, expected_completion_tokens, prompt_tokens, lm_calls, expected_s, throughput...}.
    Sampler draws shared between sweep points that differ only in `n` count once (the sample cache)."""
    count = count_tokens or approx_tokens
    completion_max = 0
    calls = 0
    prompt_tokens = 0
    widest = 1
    for wf in plan.workflows:
        # node -> {params without n: largest n}: the draws the sample cache shares across points
        for node in wf.workflow.nodes:
            per_group: dict[str, tuple[int, int]] = defaultdict(lambda: (0, 0))
            for variant in wf.variants:
                vnode = next(n for n in variant.nodes if n.id == node.id)
                params = _resolved(vnode, registry)
                key = json.dumps({k: v for k, v in params.items() if k != "n"}, sort_keys=True, default=str)
                c, t = _calls_and_tokens(vnode, params)
                if c == 0:
                    continue
                best = per_group[key]
                per_group[key] = (max(best[0], c), max(best[1], t))
                widest = max(widest, int(params.get("n") or 1))
            for c, t in per_group.values():
                calls += c * len(plan.items) * plan.repeats
                completion_max += t * len(plan.items) * plan.repeats
            template = str(node.params.get("prompt") or "")
            if template and per_group:
                prompt_tokens += sum(_prompt_tokens(template, plan, wf, i, count) for i in plan.items) \
                    * len(per_group) * plan.repeats  # a repeat's prompt is often cached: an upper bound
    expected_completion = int(completion_max * EXPECTED_FILL)
    cal = calibration or {}
    runs_at_once = min(max(1, concurrency), max(1, len(plan.items) * plan.repeats * len(plan.workflows)))
    batch = min(64, runs_at_once * widest)  # sequences decoded together: items in flight x their samples
    decode_tps = _throughput_at(cal.get("decode_tps") or DEFAULT_DECODE_TPS, batch)
    prefill_tps = float(cal.get("prefill_tps") or DEFAULT_PREFILL_TPS)
    expected_s = expected_completion / decode_tps + prompt_tokens / prefill_tps
    max_s = completion_max / decode_tps + prompt_tokens / prefill_tps
    observed = _observed_at(cal, batch)
    if observed:  # an evaluation at this batch ran here: its pace (prompts and grading included) is the best guide
        decode_tps, expected_s, max_s = observed, expected_completion / observed, completion_max / observed
    source = _speed_source(calibration, observed)
    return {
        "tasks": plan.total_tasks, "items": len(plan.items), "lm_calls": calls,
        "max_completion_tokens": completion_max, "expected_completion_tokens": expected_completion,
        "prompt_tokens": prompt_tokens, "expected_s": round(expected_s, 1), "max_s": round(max_s, 1),
        "decode_tokens_per_s": round(decode_tps, 1), "batch": batch,
        "calibrated": bool(calibration), "calibration_model": cal.get("model_id"),
        "speed_source": source,
        "assumptions": f"completions use {EXPECTED_FILL:.0%} of max_tokens on average; "
                       f"decode at batch {batch} runs at {decode_tps:.1f} tokens/s ({source})",
    }


def _speed_source(calibration: dict[str, Any] | None, observed: float | None) -> str:
    if observed:
        return "the pace of the last evaluation of this model at this batch on this machine"
    if calibration:
        return "measured on this machine"
    return "a default: not measured on this machine yet"


def time_left(expected_s: float | None, elapsed_s: float, done: int, total: int,
              done_at_s: float | None = None) -> float | None:
    """Seconds left of a running evaluation: one estimate from Start to the end. The pre-run `expected_s` is
    weighted by the share of runs still to do, the pace of the finished ones (`done` by `done_at_s`, the elapsed
    time when the last one finished) by the share done; it counts down between finished runs instead of standing
    still. A run past both its estimate and its pace falls back on the pace as of now; None when nothing says."""
    if total <= 0 or done >= total:
        return 0.0
    share = max(0, done) / total
    pace_total = (done_at_s if done_at_s is not None else elapsed_s) / share if done > 0 else None
    if expected_s and pace_total is not None:
        total_s = (1 - share) * float(expected_s) + share * pace_total
    else:
        total_s = float(expected_s) if expected_s else pace_total  # type: ignore[assignment]
    if total_s is None:
        return None
    left = total_s - elapsed_s
    if left > 0:
        return left
    return elapsed_s * (1 - share) / share if done > 0 else None


def _prompt_tokens(template: str, plan: EvalPlan, wf: Any, item: int, count: TokenCounter) -> int:
    row = plan.dataset.rows[item]
    from app.eval.datasets import item_inputs

    try:
        text = render_template(template, {**item_inputs(row, wf.binding, wf.workflow.inputs)})
    except Exception:
        text = template
    return count(text)


def _throughput_at(table: dict[Any, Any], batch: int) -> float:
    """Tokens/s at `batch`: a power law between the measured batch sizes (straight in log-log), and beyond the
    largest one the last segment's, its exponent kept within 0..1 (a batch never decodes more than linearly faster,
    nor slower)."""
    points = sorted((int(k), float(v)) for k, v in table.items() if float(v) > 0)
    if not points:
        return DEFAULT_DECODE_TPS[CALIBRATION_BATCH]
    if batch <= points[0][0]:
        return points[0][1]
    segments = list(itertools.pairwise(points))
    for (b0, t0), (b1, t1) in segments:
        if batch <= b1:
            return _power_law(b0, t0, b1, t1, batch, -math.inf, math.inf)
    if not segments:
        return points[-1][1]
    (b0, t0), (b1, t1) = segments[-1]
    return _power_law(b0, t0, b1, t1, batch, 0.0, 1.0)


def _power_law(b0: int, t0: float, b1: int, t1: float, batch: int, low: float, high: float) -> float:
    exponent = min(high, max(low, math.log(t1 / t0) / math.log(b1 / b0)))
    return t1 * (batch / b1) ** exponent if batch > b1 else t0 * (batch / b0) ** exponent


def _observed_at(calibration: dict[str, Any], batch: int) -> float | None:
    """Completion tokens/s that a finished evaluation at `batch` made on this machine, if one was recorded."""
    entry = (calibration.get("observed") or {}).get(str(batch)) if isinstance(calibration, dict) else None
    value = entry.get("tokens_per_s") if isinstance(entry, dict) else None
    return float(value) if isinstance(value, int | float) and value > 0 else None


# ---------------------------------------------------------------------- calibration


def calibration_path() -> Path:
    return data_dir() / CALIBRATION_FILE


def load_calibration(model_id: str, path: Path | None = None) -> dict[str, Any] | None:
    """The cached throughput of this model (its id includes the file hash and device settings), or None."""
    try:
        data = json.loads((path or calibration_path()).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    entry = data.get(model_id) if isinstance(data, dict) else None
    return entry if isinstance(entry, dict) else None


def calibration_complete(entry: dict[str, Any] | None) -> bool:
    """Whether a cached calibration measured every batch of CALIBRATION_RUNS (one from before batch 32 was added
    extrapolated batch 8's speed flat and is measured again)."""
    table = (entry or {}).get("decode_tps")
    return isinstance(table, dict) and all(str(batch) in table for batch, _ in CALIBRATION_RUNS)


def calibrate(backend: Any, path: Path | None = None) -> dict[str, Any]:
    """Measure decode throughput at the batches of CALIBRATION_RUNS and prefill speed on this machine (a few
    seconds), and cache it under the model's id; later evaluations of the same model reuse it."""
    from backends.base import SamplingParams

    prompt = "Write a short story about a lighthouse keeper who finds a message in a bottle."
    decode: dict[int, float] = {}
    prefill_tps = DEFAULT_PREFILL_TPS
    # a fresh engine's first call pays its warm-up (buffers, the prompt's first pass): not the speed to measure
    backend.generate(prompt, SamplingParams(max_tokens=2, temperature=0.0, seed=0), n=1)
    for batch, tokens in CALIBRATION_RUNS:
        params = SamplingParams(max_tokens=tokens, temperature=0.8, seed=batch)
        start = time.perf_counter()
        result = backend.generate(prompt + f" (#{batch})", params, n=batch,
                                  seeds=[1000 + i for i in range(batch)])
        wall = time.perf_counter() - start
        usage = result.usage
        decode_s = usage.decode_s or max(wall - (usage.prefill_s or 0.0), 1e-6)
        decode[batch] = max(usage.completion_tokens, 1) / max(decode_s, 1e-6)
        if usage.prefill_s and usage.prompt_tokens_evaluated:
            prefill_tps = usage.prompt_tokens_evaluated / usage.prefill_s
    entry = {"model_id": backend.model_id, "decode_tps": {str(k): round(v, 1) for k, v in decode.items()},
             "prefill_tps": round(prefill_tps, 1), "measured_at": time.time()}
    _update_cache(backend.model_id, lambda _old: entry, path)
    return entry


def record_observed(model_id: str, batch: int, completion_tokens: int, seconds: float,
                    path: Path | None = None) -> float | None:
    """Keep the pace a finished evaluation had at `batch` (completion tokens over its wall time) beside the model's
    calibration: the next estimate at that batch uses it. Returns the tokens/s kept (None when too short to say)."""
    if completion_tokens <= 0 or seconds < 1.0:
        return None
    tps = round(completion_tokens / seconds, 2)

    def merge(old: dict[str, Any] | None) -> dict[str, Any] | None:
        if not isinstance(old, dict):
            return None  # observed paces live beside a calibration (an estimate without one is a default)
        observed = dict(old.get("observed") or {})
        observed[str(int(batch))] = {"tokens_per_s": tps, "at": time.time()}
        return {**old, "observed": observed}

    return tps if _update_cache(model_id, merge, path) else None


def _update_cache(model_id: str, change: Callable[[dict[str, Any] | None], dict[str, Any] | None],
                  path: Path | None) -> bool:
    """Replace the model's entry of the calibration cache with `change(old entry)` (None: leave it); whether it
    was written."""
    target = path or calibration_path()
    try:
        data = json.loads(target.read_text(encoding="utf-8")) if target.exists() else {}
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    entry = change(data.get(model_id) if isinstance(data.get(model_id), dict) else None)
    if entry is None:
        return False
    data[model_id] = entry
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(target, json.dumps(data, indent=1))
    except OSError as exc:
        log.warning("could not cache the calibration in %s: %s", target, exc)
        return False
    return True


def run_expected_s(workflow: Any, registry: NodeRegistry, calibration: dict[str, Any] | None) -> float | None:
    """Seconds one run of `workflow` is expected to take on this machine: its nodes' completion tokens (as
    `workflow_cost`, EXPECTED_FILL of their max) at the speed measured here for its widest sampler's batch.
    None without a measured speed: a default speed is no estimate (it said 8 s for a run of minutes)."""
    if not calibration or not calibration.get("decode_tps"):
        return None
    _, tokens = workflow_cost(workflow, registry)
    if tokens <= 0:
        return None
    widest = max((int(_resolved(n, registry).get("n") or 1) for n in workflow.nodes if n.kind == "sampler"), default=1)
    return round(tokens * EXPECTED_FILL / _throughput_at(calibration["decode_tps"], min(64, widest)), 1)


def completion_ceiling(workflow: Any, registry: NodeRegistry) -> int:
    """The most completion tokens one run of `workflow` can generate, from its nodes' params (no model needed):
    what `metagen tune` keeps a candidate's compute grid within."""
    return sum(_calls_and_tokens(node, _resolved(node, registry))[1] for node in workflow.nodes)
