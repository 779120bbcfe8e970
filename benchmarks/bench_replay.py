"""Replay speed: a 64-call run of self-consistency on the bundled model, then its bundle replayed without the model
in the same process (issue 50: at most 5 % of the original run's time). The model is loaded and warmed before the
original run is timed, so the figure compares a run's own time with its replay's (reading the bundle file
included). Exits 1 when the replay takes more than 5 %.

    .venv/bin/python benchmarks/bench_replay.py [CALLS] [MAX_TOKENS]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

from app.run.providers import LlamaProvider
from app.run.replay import replay_bundle
from app.run.scheduler import Scheduler
from app.traces import TraceStore
from app.traces.bundle import read_bundle, write_bundle
from app.workflow.spec import load_workflow_text
from backends.base import ModelSpec, SamplingParams
from nodes.base import to_jsonable
from nodes.registry import default_registry

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 0.05


def workflow_text(calls: int, max_tokens: int) -> str:
    data = yaml.safe_load((ROOT / "workflows" / "self_consistency.yaml").read_text(encoding="utf-8"))
    data["nodes"][0]["params"].update(n=calls, max_tokens=max_tokens, adaptive="off")
    for key in ("batch_size", "min_samples"):
        data["nodes"][0]["params"].pop(key, None)
    return yaml.safe_dump(data, sort_keys=False)


def main() -> int:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    max_tokens = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    wf = load_workflow_text(workflow_text(calls, max_tokens))
    provide = LlamaProvider()
    try:
        provide(ModelSpec(source="bundled")).generate("Warm up.", SamplingParams(max_tokens=4))
        with tempfile.TemporaryDirectory() as folder, TraceStore(Path(folder) / "traces.db") as store:
            started = time.perf_counter()
            result = Scheduler(default_registry(), provide).run(wf, observers=[store], seed=1)
            original = time.perf_counter() - started
            assert result.status == "succeeded", result.error
            target = Path(folder) / "run.bundle.json.gz"
            write_bundle(target, store.export_bundle(result.run_id))
            size = target.stat().st_size
            started = time.perf_counter()
            outcome = replay_bundle(read_bundle(target))
            replayed = time.perf_counter() - started
    finally:
        provide.close()
    same = to_jsonable(outcome.result.outputs) == to_jsonable(result.outputs)
    ratio = replayed / original
    print(json.dumps({"lm_calls": result.stats.lm_calls, "completion_tokens": result.stats.completion_tokens,
                      "original_s": round(original, 3), "replay_s": round(replayed, 4), "ratio": round(ratio, 4),
                      "limit": LIMIT, "bundle_bytes": size, "calls": outcome.calls.to_json(),
                      "outputs_identical": same}))
    print(f"{result.stats.lm_calls} LM calls: run {original:.2f}s, replay {replayed * 1000:.0f} ms "
          f"= {ratio:.1%} of the run (limit {LIMIT:.0%}); outputs identical: {same}", file=sys.stderr)
    return 0 if ratio <= LIMIT and same else 1


if __name__ == "__main__":
    sys.exit(main())
