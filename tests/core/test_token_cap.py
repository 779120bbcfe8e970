"""The run's token cap counts streamed tokens as they come: a request is cut at the cap (slack at most one decode step
per sequence) and what cut requests had spent is kept, reported and traced (fake backend; issue 43, 1.1)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from app.run import events as ev
from app.run.events import EventRecorder
from app.run.node_context import Budget
from app.run.providers import fake_provider
from app.run.scheduler import Scheduler
from app.workflow.spec import workflow_from_dict
from backends.base import CancelledError, CancelToken, SamplingParams
from backends.fake import FakeBackend
from nodes.registry import default_registry

REGISTRY = default_registry()
LONG = " ".join(f"w{i}" for i in range(300))
"""A 300-token reply (the fake counts a word as a token)."""


def sampler_wf(n: int = 4, max_tokens: int = 300, nodes: int = 1) -> Any:
    return workflow_from_dict({
        "version": 1, "name": "cap", "inputs": {"question": {"type": "text", "default": "Tell a long story."}},
        "nodes": [{"id": f"s{k}", "kind": "sampler", "inputs": {"question": "inputs.question"},
                   "params": {"prompt": f"{{question}} ({k})", "n": n, "temperature": 0.7, "max_tokens": max_tokens}}
                  for k in range(nodes)],
        "outputs": {f"c{k}": f"s{k}.candidates" for k in range(nodes)}})


def run(wf: Any, budget: Budget, **fake: Any) -> tuple[Any, EventRecorder]:
    rec = EventRecorder(skip=("token",))
    result = Scheduler(REGISTRY, fake_provider(**fake)).run(wf, seed=0, budget=budget, observers=[rec])
    return result, rec


def test_a_sampler_is_cut_at_the_cap_not_after_all_its_tokens() -> None:
    """n=4 x 300 tokens against --max-tokens 100: it drew all 1,200 before (12x the cap)."""
    result, rec = run(sampler_wf(), Budget(max_tokens=100), reply_fn=lambda prompt, seed: LONG)
    assert result.status == "budget_exceeded" and "max_tokens=100" in (result.error or "")
    s = result.stats
    assert s.completion_tokens > 0, "the cut request's usage was lost"
    assert 100 - s.prompt_tokens_evaluated <= s.completion_tokens <= 100 + 4, s  # slack: a decode step per sequence
    assert s.prompt_tokens_evaluated > 0  # its prompt was evaluated, and counts (once the request ends)
    calls = [e.data for e in rec.of_type(ev.LM_CALL)]
    assert calls and all(c["finish_reason"] == "cancelled" for c in calls)
    assert sum(c["completion_tokens"] for c in calls) == s.completion_tokens  # the trace adds up to the report
    (end,) = rec.of_type(ev.RUN_END)
    assert end.data["stats"]["completion_tokens"] == s.completion_tokens


def test_concurrent_requests_share_the_cap_as_they_stream() -> None:
    """Share mode's case: several nodes decoding at once, none finished when the cap passes; before, nothing
    counted until a request returned, so the run went on to its time cap and reported 0 tokens."""
    result, _ = run(sampler_wf(n=8, max_tokens=300, nodes=3), Budget(max_tokens=500, max_seconds=60),
                    reply_fn=lambda prompt, seed: LONG, token_delay_s=0.0005)
    assert result.status == "budget_exceeded" and "max_tokens=500" in (result.error or ""), result.error
    s = result.stats
    assert 0 < s.completion_tokens <= 500 + 3 * 8, s  # the prompts in flight count once their requests end


def test_a_time_cap_keeps_what_the_cut_requests_spent() -> None:
    result, _ = run(sampler_wf(n=2, max_tokens=300), Budget(max_seconds=0.3),
                    reply_fn=lambda prompt, seed: LONG, token_delay_s=0.01)
    assert result.status == "budget_exceeded" and "max_seconds" in (result.error or "")
    assert result.stats.completion_tokens > 0, "the usage of the request cut by the time cap was lost"


def test_share_mode_cap_stops_the_run_and_reports_its_tokens(tmp_path: Path) -> None:
    from app.service.studio import StudioService
    from app.share.policy import SharePolicy

    models = tmp_path / "models"
    models.mkdir()
    policy = SharePolicy.for_serving("127.0.0.1", force_share_mode=True, models_folder=models, max_tokens=400,
                                     max_seconds=60)
    backend = FakeBackend(reply_fn=lambda prompt, seed: LONG, token_delay_s=0.0005)
    service = StudioService(policy=policy, provider=lambda spec: backend, dry_run=True,
                            workflows_dir=tmp_path / "workflows", examples_dir=tmp_path / "no-examples",
                            models_dir=models, trace_db=tmp_path / "traces.db")
    try:
        started = service.start_run(sampler_wf(n=8, max_tokens=300, nodes=2).to_dict())
        final = service.wait_run(started["run_id"], timeout=60)
    finally:
        service.close()
    assert final["status"] == "budget_exceeded" and "max_tokens=400" in (final.get("error") or ""), final
    assert 0 < final["stats"]["completion_tokens"] <= 400 + 2 * 8, final["stats"]


def test_the_fake_stops_within_a_token_and_says_what_it_spent() -> None:
    cancel = CancelToken()
    seen: list[str] = []

    def on_token(index: int, text: str) -> None:
        seen.append(text)
        if len(seen) == 10:
            cancel.cancel("enough")

    fake = FakeBackend(replies=[LONG])
    try:
        fake.generate("q", SamplingParams(max_tokens=300), n=2, on_token=on_token, cancel=cancel)
    except CancelledError as exc:
        assert exc.usage is not None and exc.usage.completion_tokens == 10 and exc.usage.prompt_tokens_evaluated == 1
    else:
        raise AssertionError("the cancel was ignored")
    assert len(seen) == 10


def test_a_user_cancel_is_not_turned_into_a_budget_stop() -> None:
    cancel = CancelToken()
    wf = sampler_wf(n=2)
    rec = EventRecorder(skip=("token",))
    threading.Timer(0.1, cancel.cancel, args=("cancelled by the user",)).start()
    result = Scheduler(REGISTRY, fake_provider(reply_fn=lambda p, s: LONG, token_delay_s=0.005)).run(
        wf, seed=0, budget=Budget(max_tokens=100_000), cancel=cancel, observers=[rec])
    assert result.status == "cancelled" and result.stats.completion_tokens > 0
