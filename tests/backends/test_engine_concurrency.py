"""The llama.cpp engine under concurrent use: continuous batching, cancel, overflow and full-KV errors that
leave the engine usable, scoring and choice logprobs."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from backends.base import BackendError, CancelledError, CancelToken, ModelSpec, SamplingParams
from backends.llama.models.bundled import bundled_model_path

pytestmark = pytest.mark.model


def test_concurrent_requests_all_complete_with_their_own_params(llama) -> None:
    requests = [
        ("Count to five:", SamplingParams(max_tokens=3, temperature=0.0), 1),
        ("List some fruits:", SamplingParams(max_tokens=6, temperature=0.8, seed=3), 3),
        ("The capital of France is", SamplingParams(max_tokens=10, stop=("\n",)), 1),
        ("Answer yes or no:", SamplingParams(max_tokens=4, grammar='root ::= "yes" | "no"'), 2),
    ]
    before = llama.engine.stats["max_active_requests"]
    llama.engine.stats["max_active_requests"] = 0
    barrier = threading.Barrier(len(requests))

    def run(item: tuple[str, SamplingParams, int]):
        prompt, params, n = item
        barrier.wait()
        return llama.generate(prompt, params, n=n)

    with ThreadPoolExecutor(len(requests)) as pool:
        results = list(pool.map(run, requests))
    assert llama.engine.stats["max_active_requests"] >= 2  # they shared decode steps
    llama.engine.stats["max_active_requests"] = max(before, llama.engine.stats["max_active_requests"])
    counted, fruits, capital, yes_no = results
    assert counted.completions[0].completion_tokens == 3
    assert [c.seed for c in fruits.completions] == [3, 4, 5]
    assert all(c.completion_tokens <= 6 for c in fruits.completions)
    assert "\n" not in capital.completions[0].text
    assert {c.text for c in yes_no.completions} <= {"yes", "no"}


def test_cancel_frees_the_sequences(llama) -> None:
    cancel = CancelToken()
    seen: list[str] = []

    def on_token(index: int, text: str) -> None:
        seen.append(text)
        if len(seen) == 2:
            cancel.cancel("user pressed stop")

    params = SamplingParams(max_tokens=200, temperature=0.8)
    with pytest.raises(CancelledError, match="user pressed stop"):
        llama.generate(f"Tell a long story {uuid.uuid4().hex[:6]}:", params, n=4, on_token=on_token, cancel=cancel)
    engine = llama.engine
    snapshot = engine.snapshot()
    assert snapshot["active_requests"] == 0
    assert engine.table.n_free + engine.table.n_parked == engine.n_seq_max  # nothing leaked
    assert len(seen) < 40
    with pytest.raises(CancelledError):  # an already-cancelled token stops the request before it starts
        llama.generate("Hello", SamplingParams(max_tokens=2), cancel=cancel)
    assert llama.generate("Hello", SamplingParams(max_tokens=2)).completions[0].completion_tokens == 2


def test_context_overflow_is_a_clear_error_and_the_engine_stays_usable(llama) -> None:
    too_long = "word " * 1500  # the test engine's context is 1024 tokens
    with pytest.raises(BackendError, match="Context overflow"):
        llama.generate(too_long, SamplingParams(max_tokens=4))
    with pytest.raises(BackendError, match="Context overflow"):
        llama.score(too_long, [" end"])
    result = llama.generate("Hi there", SamplingParams(max_tokens=3))
    assert result.completions[0].completion_tokens == 3


def test_generation_stops_at_the_context_limit() -> None:
    from backends.llama.worker.llama_backend import LlamaBackend

    backend = LlamaBackend(bundled_model_path(), ModelSpec(device="cpu", n_ctx=48, options=(("kv_size", 256),)))
    try:
        prompt = "one two three four five six seven eight nine ten"
        result = backend.generate(prompt, SamplingParams(max_tokens=500, temperature=1.0, top_k=0))
        completion = result.completions[0]
        assert completion.finish_reason in ("length", "eog")
        assert len(backend.tokenize(prompt)) + completion.completion_tokens <= 48
    finally:
        backend.close()


def test_full_kv_cache_fails_that_request_and_the_next_succeeds() -> None:
    from backends.llama.worker.llama_backend import LlamaBackend

    spec = ModelSpec(device="cpu", n_ctx=128, options=(("kv_size", 128), ("n_seq_max", 8)))
    backend = LlamaBackend(bundled_model_path(), spec)
    try:
        greedy_loop = SamplingParams(max_tokens=120, temperature=1.5, top_k=0)
        with pytest.raises(BackendError, match="KV cache is full"):
            backend.generate("Write numbers:", greedy_loop, n=8)
        assert backend.engine.snapshot()["active_requests"] == 0
        ok = backend.generate("Write numbers:", SamplingParams(max_tokens=4), n=2)
        assert [c.completion_tokens for c in ok.completions] == [4, 4]
    finally:
        backend.close()


def test_score_matches_separate_scoring_and_is_batched(llama) -> None:
    prefix = f"Q: What is the colour of the sky? ({uuid.uuid4().hex[:6]})\nA:"
    candidates = [" Blue.", " The sky is blue.", " Green, obviously.", " I do not know."]
    together = llama.score(prefix, candidates)
    apart = [llama.score(prefix, [c]).scores[0] for c in candidates]
    for joint, alone in zip(together.scores, apart, strict=True):
        assert joint.n_tokens == alone.n_tokens == len(joint.token_logprobs)
        assert joint.logprob == pytest.approx(alone.logprob, abs=0.05 * joint.n_tokens + 0.05)
        assert joint.logprob < 0
    usage = together.usage
    n_prefix = len(llama.tokenize(prefix))
    assert usage.prompt_tokens_evaluated <= n_prefix + sum(s.n_tokens for s in together.scores)  # prefix once
    assert together.scores[0].logprob > together.scores[2].logprob  # the model prefers "Blue" to "Green"


def test_choice_logprobs_are_next_token_probabilities(llama) -> None:
    prompt = "Question: Is fire hot? Answer yes or no.\nAnswer:"
    choices = llama.choice_logprobs(prompt, [" yes", " no"])
    assert set(choices.logprobs) == {" yes", " no"}
    assert all(lp < 0 for lp in choices.logprobs.values())
    import math

    assert sum(math.exp(lp) for lp in choices.logprobs.values()) <= 1.0 + 1e-6
    scored = llama.score(prompt, [" yes"]).scores[0]
    if scored.n_tokens == 1:
        assert scored.logprob == pytest.approx(choices.logprobs[" yes"], abs=1e-4)
    again = llama.choice_logprobs(prompt, [" yes", " no"])  # answered from the cached prompt
    assert again.usage.prompt_tokens_evaluated == 0
    assert again.logprobs == choices.logprobs
    with pytest.raises(BackendError, match="no tokens"):
        llama.choice_logprobs(prompt, [""])


def test_cells_of_other_requests_do_not_change_a_requests_numbers() -> None:
    """The engine shares one KV cache between requests: with the default settings (flash attention, llama.cpp's
    choice on CPU) a prompt's logprobs are the same whether the cache is empty or other requests' cells sit in
    front of it. (Without flash attention this build's numbers move with the cache layout; see devices.py.)"""
    from backends.llama.worker.llama_backend import LlamaBackend

    question = [{"role": "user", "content": "Write a short story about a fox and a crow."}]
    params = SamplingParams(max_tokens=3, temperature=0.0, logprobs=0)
    firsts = []
    for warm_up in (0, 33, 300):
        engine = LlamaBackend(bundled_model_path(), ModelSpec(device="cpu", n_ctx=1024, options=(("kv_size", 2048),)))
        try:
            if warm_up:  # its prompt stays parked in the cache, in the cells in front of the next prompt
                engine.generate("Once upon a time " * (warm_up // 4), SamplingParams(max_tokens=4), n=2)
            result = engine.generate(question, params)
        finally:
            engine.close()
        firsts.append([lp.logprob for lp in result.completions[0].logprobs])
    assert firsts[0] == firsts[1] == firsts[2]
