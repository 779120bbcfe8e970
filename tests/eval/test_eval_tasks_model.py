"""A task preset and the math metric on the real bundled model (llama.cpp): `--task math500` from a pre-filled,
offline datasets cache, graded by math-verify in its worker; every item gets a verdict with a reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.eval.plan import WorkflowSource, make_plan
from app.eval.runner import Evaluation
from app.eval.store import EvalStore
from app.run.scheduler import Scheduler
from app.traces.store import TraceStore
from nodes.registry import default_registry
from tests.eval.hub_cache import prefill

pytestmark = pytest.mark.model
pytest.importorskip("math_verify")
ROOT = Path(__file__).resolve().parents[2]
ROWS = [{"problem": "What is $1 + 1$?", "answer": "2", "subject": "Algebra", "level": 1, "unique_id": "a/1"},
        {"problem": "Write one half as a fraction.", "answer": "\\frac{1}{2}", "subject": "Algebra", "level": 1,
         "unique_id": "a/2"}]


def test_math500_preset_on_the_bundled_model(llama_provide: Any, hub_cache: Path, tmp_path: Path) -> None:
    prefill(hub_cache, "HuggingFaceH4/MATH-500", "default", {"test": ROWS})
    registry = default_registry()
    wf = WorkflowSource(path=ROOT / "workflows" / "chain_of_thought.yaml")
    plan = make_plan([wf], None, registry=registry, metric=None, task="math500")
    assert plan.metric.name == "math" and [r["answer"] for r in plan.dataset.rows] == ["2", "\\frac{1}{2}"]
    traces = TraceStore(str(tmp_path / "t.db"))
    try:
        store = EvalStore(traces.engine)
        evaluation = Evaluation(plan, Scheduler(registry, llama_provide), store, observers=[traces])
        evaluation.run()
        items = store.get(evaluation.eval_id)["items"]
    finally:
        traces.close()
    assert len(items) == 2
    for item in items:  # a verdict either way, with why when wrong (no crash, no hang)
        assert item["correct"] in (True, False, 0, 1)
        assert item["correct"] or item["detail"]
