"""The pre-run cost estimate of an evaluation: expected and maximum tokens from the workflows' structure,
and the expected time on this machine from a throughput the engine measured here (cached per model)."""

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
    batch = min(64, max(1, concurrency) * widest)
    decode_tps = _throughput_at(cal.get("decode_tps") or DEFAULT_DECODE_TPS, batch)
    prefill_tps = float(cal.get("prefill_tps") or DEFAULT_PREFILL_TPS)
    expected_s = expected_completion / decode_tps + prompt_tokens / prefill_tps
    max_s = completion_max / decode_tps + prompt_tokens / prefill_tps
    return {
        "tasks": plan.total_tasks, "items": len(plan.items), "lm_calls": calls,
        "max_completion_tokens": completion_max, "expected_completion_tokens": expected_completion,
        "prompt_tokens": prompt_tokens, "expected_s": round(expected_s, 1), "max_s": round(max_s, 1),
        "decode_tokens_per_s": round(decode_tps, 1), "batch": batch,
        "calibrated": bool(calibration), "calibration_model": cal.get("model_id"),
        "assumptions": f"completions use {EXPECTED_FILL:.0%} of max_tokens on average; "
                       f"decode at batch {batch} runs at {decode_tps:.0f} tokens/s"
                       + ("" if calibration else " (a default: no calibration on this machine yet)"),
    }


def _prompt_tokens(template: str, plan: EvalPlan, wf: Any, item: int, count: TokenCounter) -> int:
    row = plan.dataset.rows[item]
    from app.eval.datasets import item_inputs

    try:
        text = render_template(template, {**item_inputs(row, wf.binding, wf.workflow.inputs)})
    except Exception:
        text = template
    return count(text)


def _throughput_at(table: dict[Any, Any], batch: int) -> float:
    """Tokens/s at `batch`, interpolated in log-batch between the measured batch sizes (flat beyond them)."""
    points = sorted((int(k), float(v)) for k, v in table.items())
    if batch <= points[0][0]:
        return points[0][1]
    for (b0, t0), (b1, t1) in itertools.pairwise(points):
        if batch <= b1:
            w = (math.log(batch) - math.log(b0)) / (math.log(b1) - math.log(b0))
            return t0 + w * (t1 - t0)
    return points[-1][1]


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


def calibrate(backend: Any, path: Path | None = None) -> dict[str, Any]:
    """Measure decode throughput at batch 1 and 8 and prefill speed on this machine (a few seconds), and
    cache it under the model's id; later evaluations of the same model reuse it."""
    from backends.base import SamplingParams

    target = path or calibration_path()
    prompt = "Write a short story about a lighthouse keeper who finds a message in a bottle."
    decode: dict[int, float] = {}
    prefill_tps = DEFAULT_PREFILL_TPS
    for batch in (1, CALIBRATION_BATCH):
        params = SamplingParams(max_tokens=CALIBRATION_TOKENS, temperature=0.8, seed=batch)
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
    try:
        data = json.loads(target.read_text(encoding="utf-8")) if target.exists() else {}
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    data[backend.model_id] = entry
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(target, json.dumps(data, indent=1))
    except OSError as exc:
        log.warning("could not cache the calibration in %s: %s", target, exc)
    return entry


def completion_ceiling(workflow: Any, registry: NodeRegistry) -> int:
    """The most completion tokens one run of `workflow` can generate, from its nodes' params (no model needed):
    what `metagen tune` keeps a candidate's compute grid within."""
    return sum(_calls_and_tokens(node, _resolved(node, registry))[1] for node in workflow.nodes)
