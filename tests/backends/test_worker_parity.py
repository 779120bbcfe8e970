"""The engine worker gives what the engine in this process gives, on the real bundled model: the same requests in the
same order on two fresh engines with flash attention (bit-for-bit repeatable) agree exactly — samples and seeds,
streamed pieces, logprobs, grammar, beam search, scoring, choices, PRM positions, speculative decoding — and
concurrent requests from many threads are batched in the worker's engine."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from backends.base import (
    BackendError,
    ModelSpec,
    SamplingParams,
    SpeculativeSpec,
)
from backends.beam_search import BeamSettings
from backends.llama.models.bundled import bundled_model_path
from backends.llama.worker_backend import WorkerBackend

pytestmark = pytest.mark.model

QUESTION = "Question: what is 7 + 5? Answer:"
SPEC = ModelSpec(device="cpu", n_ctx=1024, flash_attn=True,
                 options=(("kv_size", 2048), ("n_seq_max", 8), ("prefix_cache_tokens", 0)),
                 speculative=SpeculativeSpec(k=4, ngram=2, adaptive=False))


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[Any, Any]]:
    from backends.llama.worker.llama_backend import LlamaBackend

    here, there = LlamaBackend(bundled_model_path(), SPEC), WorkerBackend(bundled_model_path(), SPEC)
    yield here, there
    here.close()
    there.close()


def _timeless(value: Any) -> Any:
    """A result with its wall-clock fields zeroed (the only part that may differ)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _timeless(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name in ("time_s", "prefill_s", "decode_s"):
            if name in changes:
                changes[name] = 0.0
        return dataclasses.replace(value, **changes)
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items()}
    return value


REQUESTS: list[tuple[str, Callable[[Any], Any]]] = [
    ("samples with seeds", lambda b: b.generate(QUESTION, SamplingParams(max_tokens=16, temperature=0.9, seed=3),
                                                n=3, seeds=[1, 2, 1])),
    ("logprobs and stats", lambda b: b.generate(QUESTION, SamplingParams(max_tokens=8, logprobs=2,
                                                                         token_stats=True))),
    ("repetitive text (speculative drafts)", lambda b: b.generate(
        "Repeat exactly: the cat sat on the mat, the cat sat on the mat, the cat sat on the mat,",
        SamplingParams(max_tokens=24))),
    ("grammar", lambda b: b.generate(QUESTION, SamplingParams(max_tokens=4, grammar='root ::= [0-9] [0-9]'))),
    ("chat", lambda b: b.generate([{"role": "user", "content": "Say hi."}], SamplingParams(max_tokens=6))),
    ("beam search", lambda b: b.beam_search(QUESTION, SamplingParams(max_tokens=6),
                                            BeamSettings(n=4, groups=2, diversity_penalty=0.5))),
    ("score", lambda b: b.score(QUESTION, [" 12", " 13", " twelve"])),
    ("choices", lambda b: b.choice_logprobs(QUESTION, [" 12", " 13"])),
    ("PRM positions", lambda b: b.step_logprobs([["Tom has 3 apples.", " He eats one.", " Correct?"],
                                                 ["Tom has 3 apples.", " Correct?"]], [" yes", " no"])),
    ("single token", lambda b: b.single_token(" yes")),
    ("render and tokenize", lambda b: (b.render_prompt([{"role": "user", "content": "x"}]), b.tokenize("a b c"))),
]


def test_every_request_kind_answers_as_in_process(pair: tuple[Any, Any]) -> None:
    here, there = pair
    assert there.model_id == here.model_id and there.memory_bytes() == here.memory_bytes()
    assert there.device == here.device
    for name, request in REQUESTS:
        assert _timeless(request(there)) == _timeless(request(here)), name
    drafted = there.engine_stats()
    assert drafted["draft_tokens"] > 0 and drafted["draft_tokens"] == here.engine_stats()["draft_tokens"]


def test_streamed_pieces_and_errors_cross(pair: tuple[Any, Any]) -> None:
    _, there = pair
    pieces: list[tuple[int, str]] = []
    result = there.generate(QUESTION, SamplingParams(max_tokens=12, temperature=0.7), n=2,
                            on_token=lambda i, t: pieces.append((i, t)))
    for i, completion in enumerate(result.completions):
        assert "".join(t for k, t in pieces if k == i) == completion.text
    with pytest.raises(BackendError, match="not one"):
        there.single_token(" absolutely correct")
    with pytest.raises(BackendError, match="grammar"):
        there.generate(QUESTION, SamplingParams(max_tokens=4, grammar="root ::= ("))

    class StopError(Exception):
        pass

    def fail(_i: int, _t: str) -> None:
        raise StopError("the callback's own error")

    with pytest.raises(StopError):
        there.generate("Once upon a time", SamplingParams(max_tokens=200), on_token=fail)
    assert there.generate("Once upon a time", SamplingParams(max_tokens=2)).completions[0].completion_tokens >= 1


def test_requests_from_many_threads_share_decode_steps_in_the_worker(pair: tuple[Any, Any]) -> None:
    _, there = pair
    results: list[Any] = []
    threads = [threading.Thread(target=lambda k=k: results.append(there.generate(
        f"Story {k}: once upon a time", SamplingParams(max_tokens=24, temperature=0.8, seed=k), n=2)))
        for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(len(r.completions) == 2 for r in results)
    assert there.engine_stats()["max_active_requests"] >= 2, "the worker's engine batched the concurrent requests"
    assert not there.busy
