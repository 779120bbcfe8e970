"""On the real bundled model: llama.cpp's prefix cache is shared by all runs, and in share mode a visitor is not
told that another visitor's prompt was cached (finding 4 of round 3: "PIN 4711" confirmed token by token)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.service.studio import StudioService
from app.share.policy import SharePolicy
from app.workflow.spec import load_workflow_text

pytestmark = pytest.mark.model

SECRET = """version: 1
name: secret
inputs:
  question: {type: text}
nodes:
- id: answer
  kind: generator
  params: {prompt: '{question}', max_tokens: 4, temperature: 0}
  inputs: {question: inputs.question}
outputs: {answer: answer.text}
"""
PROMPT = ("My bank PIN is 4711 and my locker code is 9273. Please remember both numbers carefully for me, "
          "and answer only with OK.")


def test_a_visitor_does_not_see_another_visitors_prompt_in_the_cache(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    policy = SharePolicy.for_serving("127.0.0.1", force_share_mode=True, models_folder=models)
    service = StudioService(policy=policy, workflows_dir=tmp_path / "wf", examples_dir=None, models_dir=models,
                            trace_db=tmp_path / "t.db")
    wf = load_workflow_text(SECRET)
    try:
        alice = service.start_run(wf.to_dict(), {"question": PROMPT}, seed=1, visitor="alice")
        assert service.wait_run(alice["run_id"], timeout=300, visitor="alice")["status"] == "succeeded"
        bob = service.start_run(wf.to_dict(), {"question": PROMPT}, seed=2, visitor="bob")
        stats = service.wait_run(bob["run_id"], timeout=300, visitor="bob")["stats"]
        assert stats["prompt_tokens"] > 20
        assert stats["prompt_tokens_cached"] == 0
        assert stats["prompt_tokens_evaluated"] == stats["prompt_tokens"]
        calls = service.trace_store.get_run(bob["run_id"])["lm_calls"]
        assert calls and all(c["prompt_tokens_cached"] == 0 for c in calls)
        # the cache was there to be seen: the owner's own run of the same prompt is told of its hit
        owner = service.scheduler.run(wf, {"question": PROMPT}, seed=3, hide_cache_hits=False)
        assert owner.stats.prompt_tokens_cached > 0
    finally:
        service.close()
