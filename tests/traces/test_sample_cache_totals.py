"""A request whose first sample came from the sample cache keeps its prompt tokens in the trace and the run summary
(issue 32): the samples it did draw carry the request's evaluated prompt, and the summary counts its prompt once."""

from __future__ import annotations

from collections.abc import Callable

from app.run.scheduler import Scheduler
from app.traces import TraceStore
from app.viz.summary import run_summary
from app.workflow.spec import load_workflow_text


def test_prompt_tokens_survive_a_cached_first_sample(sc_yaml: str, make_scheduler: Callable[..., Scheduler],
                                                     store: TraceStore) -> None:
    scheduler = make_scheduler()
    alone = scheduler.run(load_workflow_text(sc_yaml.replace("n: 6,", "n: 1,")), seed=3, observers=[store])
    more = scheduler.run(load_workflow_text(sc_yaml), seed=3, observers=[store])  # sample 0 from the sample cache
    assert alone.status == more.status == "succeeded"
    assert store.flush()
    first, second = store.get_run(alone.run_id), store.get_run(more.run_id)
    assert len(second["lm_calls"]) == 5 and {c["sample_index"] for c in second["lm_calls"]} == {1, 2, 3, 4, 5}
    drawn_alone, drawn_more = run_summary(first), run_summary(second)
    assert drawn_alone["prompt_tokens"] > 0
    # the request of 5 drew the same prompt as the request of 1: the same prompt tokens, counted once
    assert drawn_more["prompt_tokens"] == drawn_alone["prompt_tokens"]
    assert drawn_more["prompt_tokens_evaluated"] == more.stats.prompt_tokens_evaluated > 0
    assert second["run"]["prompt_tokens_evaluated"] == drawn_more["prompt_tokens_evaluated"]
    assert sum(c["prompt_tokens_evaluated"] > 0 for c in second["lm_calls"]) == 1  # on the request's first call
