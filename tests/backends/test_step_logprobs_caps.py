"""The PRM's positions request on the real bundled model stops early (issue 32, 2): tokenising a text longer than
the context ends at the first segment past it, and a cancel is obeyed between segments."""

from __future__ import annotations

from typing import Any

import pytest

from backends.base import BackendError, CancelledError, CancelToken
from nodes.algorithms.prm import tagged_segments

pytestmark = pytest.mark.model

TOKENS = (" yes", " no")


class CountingTokenizer:
    """Wraps the model's tokenize, counting calls."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.real = model.tokenize
        self.calls = 0

    def __call__(self, *args: Any, **kw: Any) -> Any:
        self.calls += 1
        return self.real(*args, **kw)


@pytest.fixture()
def counted(llama: Any, monkeypatch: pytest.MonkeyPatch) -> CountingTokenizer:
    counter = CountingTokenizer(llama.model)
    monkeypatch.setattr(llama.model, "tokenize", counter)
    return counter


def _long_sequence(steps: int) -> list[str]:
    return tagged_segments("Question: add the numbers.", [f"Step {i}: 1 + {i} = {i + 1}." for i in range(steps)],
                           "\n", " Correct?")


def test_a_text_past_the_context_stops_tokenising_at_the_context(llama: Any, counted: CountingTokenizer) -> None:
    with pytest.raises(BackendError, match="Context overflow"):
        llama.step_logprobs([_long_sequence(2000)], TOKENS)  # ~30,000 tokens against a context of 1,024
    assert counted.calls < 200  # the old code tokenised all 2,000 segments first


def test_a_cancel_stops_tokenising(llama: Any, counted: CountingTokenizer) -> None:
    cancel = CancelToken()
    cancel.cancel("cancelled by the user")
    with pytest.raises(CancelledError):
        llama.step_logprobs([_long_sequence(50)], TOKENS, cancel=cancel)
    assert counted.calls <= len(TOKENS)  # the good / bad tokens' own check, no segment


def test_a_short_text_still_scores_after_the_checks(llama: Any) -> None:
    rows = llama.step_logprobs([_long_sequence(3)], TOKENS).logprobs[0]
    assert len(rows) == 3 and all(set(row) == set(TOKENS) for row in rows)


def test_the_bundled_template_lays_many_steps_out_in_three_renderings(llama: Any) -> None:
    from nodes.algorithms.prm import _conversation, chat_segments

    renders: list[int] = []

    def render(messages: list[dict[str, str]], gen: bool) -> str:
        renders.append(len(messages))
        return llama.render_prompt(messages, add_generation_prompt=gen)

    steps = [f"Step {i}: 1 + {i} = {i + 1}." for i in range(200)]
    segments = chat_segments("Question: add.", steps, "+", render)
    assert len(renders) == 3  # the turn-by-turn layout would render 200 times (20,000 messages)
    assert "".join(segments) == llama.render_prompt(_conversation("Question: add.", steps, "+"))
    assert segments[5].startswith("+") and "Step 5: 1 + 5 = 6." in segments[5]  # the verdict on step 4, then step 5


def test_a_cancel_stops_the_positions_job_midway(llama: Any) -> None:
    import threading

    cancel = CancelToken()
    sequences = [tagged_segments(f"Question {k}: add the numbers.",
                                 [f"Step {i}: {k} + {i} = {k + i}." for i in range(40)], "\n", " Correct?")
                 for k in range(32)]  # ~22,000 tokens to evaluate: seconds of work on a CPU
    timer = threading.Timer(0.3, cancel.cancel, args=("cancelled by the user",))
    timer.start()
    try:
        with pytest.raises(CancelledError):
            llama.step_logprobs(sequences, TOKENS, cancel=cancel)
    finally:
        timer.cancel()
    assert llama.step_logprobs([_long_sequence(2)], TOKENS).logprobs[0]  # the engine serves the next request
