"""Evaluation throughput on the bundled model, side by side in one process: an evaluation (items concurrent,
batched by the engine) against the same items run one after another through the scheduler; its completion
tokens/s against llama.cpp's raw batched decode at the same batch size; a sweep n=1,2,4,8 against n=8 alone.

Usage: python benchmarks/bench_eval.py [--items 32] [--n 8] [--max-tokens 48] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_batch_scaling import step_time

from app.eval.datasets import item_inputs
from app.eval.plan import EvalPlan, WorkflowSource, make_plan
from app.eval.runner import Evaluation
from app.eval.store import EvalStore
from app.run.providers import llama_provider
from app.run.scheduler import Scheduler
from app.traces.store import TraceStore
from backends.llama.devices import default_threads
from backends.llama.models.bundled import bundled_model_path
from backends.llama.worker.llama_model import llama_lib
from backends.pool import ModelPool
from nodes.registry import default_registry

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = """version: 1
name: best-of-{n}
models: {{main: {{source: bundled}}}}
inputs:
  question: {{type: text}}
nodes:
- id: think
  kind: sampler
  model: main
  params: {{prompt: "{{question}}\\nThink step by step, then write 'Answer: <number>'.", n: {n}, temperature: 0.8,
           max_tokens: {max_tokens}, extract: last_number, normalize: number}}
  inputs: {{question: inputs.question}}
- id: vote
  kind: voter
  params: {{method: majority, extract: last_number, normalize: number}}
  inputs: {{candidates: think.candidates}}
outputs: {{answer: vote.answer}}
"""


def make(folder: Path, items: int, n: int, max_tokens: int, sweeps: list[str]) -> EvalPlan:
    path = folder / f"best_of_{n}.yaml"
    path.write_text(WORKFLOW.format(n=n, max_tokens=max_tokens), encoding="utf-8")
    return make_plan([WorkflowSource(path=path)], ROOT / "datasets" / "arithmetic.jsonl",
                     registry=default_registry(), metric="number", sweeps=sweeps, limit=items)


def fresh_scheduler() -> Scheduler:
    """A scheduler with its own model pool: no samples or prompts cached from an earlier measurement."""
    return Scheduler(default_registry(), llama_provider(ModelPool()))


def run_evaluation(plan: EvalPlan, folder: Path, concurrency: int, tag: str) -> tuple[float, int]:
    """(seconds, completion tokens) of one evaluation on a fresh scheduler."""
    traces = TraceStore(folder / f"{tag}.db")
    evaluation = Evaluation(plan, fresh_scheduler(), EvalStore(traces.engine), concurrency=concurrency)
    started = time.perf_counter()
    status = evaluation.run()
    elapsed = time.perf_counter() - started
    record = EvalStore(traces.engine).get(evaluation.eval_id)
    traces.close()
    assert status == "succeeded", evaluation.error
    return elapsed, sum(item["completion_tokens"] for item in record["items"])


def run_sequential(plan: EvalPlan) -> tuple[float, int]:
    """(seconds, completion tokens) of the same items run one after another through one scheduler."""
    scheduler = fresh_scheduler()
    wf = plan.workflows[0]
    started = time.perf_counter()
    tokens = 0
    for item in plan.items:
        result = scheduler.run(wf.variants[0], item_inputs(plan.dataset.rows[item], wf.binding, wf.workflow.inputs),
                               seed=plan.seed)
        tokens += result.stats.completion_tokens
    return time.perf_counter() - started, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=32)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-eval-") as tmp:
        folder = Path(tmp)
        plan = make(folder, args.items, args.n, args.max_tokens, [])
        sweep_plan = make(folder, args.items, args.n, args.max_tokens,
                          [f"think.n={','.join(str(2 ** k) for k in range(args.n.bit_length()) if 2 ** k <= args.n)}"])
        print(f"{args.items} items x best-of-{args.n} x {args.max_tokens} tokens, concurrency {args.concurrency}, "
              f"{default_threads()} threads")
        run_evaluation(make(folder, 2, args.n, 8, []), folder, 2, "warmup")
        seq_s, seq_tokens = run_sequential(plan)
        eval_s, eval_tokens = run_evaluation(plan, folder, args.concurrency, "eval")
        sweep_s, sweep_tokens = run_evaluation(sweep_plan, folder, args.concurrency, "sweep")
        print(f"one after another : {seq_s:7.1f} s  {seq_tokens:6d} completion tokens  {seq_tokens / seq_s:6.1f} tok/s")
        print(f"evaluation        : {eval_s:7.1f} s  {eval_tokens:6d} completion tokens  "
              f"{eval_tokens / eval_s:6.1f} tok/s   -> {eval_s / seq_s:.2f}x the sequential time (target <= 0.5x)")
        batch = min(64, args.concurrency * args.n)
        lib = llama_lib()
        model = lib.llama_model_load_from_file(str(bundled_model_path()).encode(), lib.llama_model_default_params())
        raw = {flash: batch / step_time(lib, model, batch, 40, flash, default_threads(), 24) for flash in (True, False)}
        lib.llama_model_free(model)
        best = max(raw.values())
        print(f"raw llama_decode at batch {batch}: {raw[True]:.1f} tok/s flash, {raw[False]:.1f} tok/s no-flash "
              f"-> evaluation {eval_tokens / eval_s / best:.2f}x the faster (target >= 0.85x)")
        print(f"sweep {sweep_plan.axes[0].node}.{sweep_plan.axes[0].param}="
              f"{','.join(map(str, sweep_plan.axes[0].values))}: {sweep_s:7.1f} s  {sweep_tokens:6d} completion "
              f"tokens -> {sweep_s / eval_s:.2f}x n={args.n} alone (target <= 1.1x)")


if __name__ == "__main__":
    main()
