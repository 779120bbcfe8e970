"""The token cap on the real bundled model, through an engine worker: a sampler of n=4 x 300 tokens under a cap of
100 stops near 100 completion tokens (it drew all 1,200 before) and reports what it spent (issue 43, 1.1)."""

from __future__ import annotations

from typing import Any

import pytest

from app.run.node_context import Budget
from app.run.scheduler import Scheduler
from app.workflow.spec import workflow_from_dict
from nodes.registry import default_registry

pytestmark = pytest.mark.model

CAP = 100
N = 4


def test_a_sampler_on_the_engine_stops_near_the_cap(llama_provide: Any) -> None:
    wf = workflow_from_dict({
        "version": 1, "name": "cap", "models": {"main": {"source": "bundled"}},
        "inputs": {"question": {"type": "text", "default": "Write a very long story about a dragon."}},
        "nodes": [{"id": "s", "kind": "sampler", "model": "main", "inputs": {"question": "inputs.question"},
                   "params": {"prompt": "{question}", "n": N, "temperature": 1.0, "max_tokens": 300}}],
        "outputs": {"c": "s.candidates"}})
    result = Scheduler(default_registry(), llama_provide).run(wf, seed=0, budget=Budget(max_tokens=CAP))
    assert result.status == "budget_exceeded", result.error
    s = result.stats
    assert s.prompt_tokens_evaluated > 0 and s.completion_tokens > 0, s  # the cut request's usage, kept
    # the cut crosses a process: a few decode steps of slack under load, never the request's 1,200 tokens
    assert CAP - s.prompt_tokens_evaluated <= s.completion_tokens <= CAP + 4 * N, s
