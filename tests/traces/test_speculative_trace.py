"""A workflow whose model entry decodes speculatively: each LM call in the trace records drafted and accepted
tokens, the token view marks accepted draft tokens, and the run's token counters are unchanged in meaning."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.run.providers import llama_provider
from app.run.scheduler import Scheduler
from app.traces import TraceStore
from app.viz.tokens import token_view_body
from app.workflow.spec import load_workflow_text
from backends.pool import ModelPool
from nodes.registry import default_registry

pytestmark = pytest.mark.model

WORKFLOW = """\
version: 1
name: speculative-copy
models:
  main: {source: bundled, n_ctx: 1024, speculative: {method: ngram, k: 4, ngram: 2, adaptive: true}}
nodes:
  - id: copy
    kind: sampler
    params: {n: 3, temperature: 0.5, max_tokens: 40, logprobs: true,
             prompt: "Copy this text exactly: The cat sat on the mat. The cat sat on the mat. The cat sat on the mat."}
outputs:
  texts: copy.candidates
"""


def test_lm_calls_record_drafted_and_accepted_tokens(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "traces.db")
    pool = ModelPool()
    try:
        result = Scheduler(default_registry(), llama_provider(pool)).run(load_workflow_text(WORKFLOW), seed=1,
                                                                         observers=[store])
        assert result.status == "succeeded", result
        record = store.get_run(result.run_id)
        calls = record["lm_calls"]
        assert len(calls) == 3
        fields = [call["tag"]["extra"] for call in calls]  # what the event held beside the table's columns
        for call, spec in zip(calls, fields, strict=True):
            flags = spec["accepted_draft"]
            assert len(flags) == call["completion_tokens"]
            assert sum(flags) == spec["draft_accepted"] <= spec["draft_tokens"]
            assert spec["acceptance_rate"] == pytest.approx(spec["draft_accepted"] / spec["draft_tokens"], abs=1e-4)
        assert sum(f["draft_accepted"] for f in fields) > 0
        assert result.stats.completion_tokens == sum(c["completion_tokens"] for c in calls)  # drafts not counted
        assert result.stats.draft_tokens == sum(f["draft_tokens"] for f in fields)  # the run's totals
        assert result.stats.draft_accepted == sum(f["draft_accepted"] for f in fields)
        assert result.stats.acceptance_rate == result.stats.draft_accepted / result.stats.draft_tokens
        assert record["run"]["stats"]["draft_accepted"] == result.stats.draft_accepted  # kept with the run
        call, spec = next((c, f) for c, f in zip(calls, fields, strict=True) if f["draft_accepted"])
        html = token_view_body(record, call["call_id"])
        assert html.count("data-draft=1") == spec["draft_accepted"]
        assert "draft tokens accepted" in html
        [loaded] = pool.loaded()
        assert "ngram k=4 ngram=2 adaptive" in loaded["speculative"]
        assert "draft tokens accepted" in loaded["speculative"]
    finally:
        pool.close()
        store.close()
