"""The remote backend against llama-cpp-python's own OpenAI server (a real process on the bundled model): what the
probe finds, generation (streamed, n > 1 without server-side n, stop strings, grammars, JSON schemas), judges,
scoring, cancel, and the errors of a wrong port, a wrong key and a slow answer."""

from __future__ import annotations

import json
import math
import threading
import time

import pytest

from backends.base import BackendError, CancelledError, CancelToken, ModelSpec, SamplingParams
from backends.remote.openai_backend import OpenAIBackend
from tests.remote.conftest import API_KEY, KEY_ENV, LlamaServer, free_port

pytestmark = pytest.mark.model

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def remote(llama_server: LlamaServer) -> OpenAIBackend:
    backend = OpenAIBackend(llama_server.spec())
    yield backend
    backend.close()


def test_the_probe_finds_what_llama_cpp_server_does(remote: OpenAIBackend) -> None:
    caps = remote.caps
    assert caps.kind == "llama_cpp_python"
    assert (caps.completions, caps.chat, caps.n) == (True, True, False)  # it ignores n: Metagen fans out
    assert caps.logprobs and caps.top_logprobs and caps.chat_logprobs
    assert caps.echo == "misaligned"  # echo logprobs are off by one token on a model without BOS
    assert (caps.grammar, caps.json_schema, caps.forced_logprobs) == ("grammar", "grammar", True)
    assert caps.score_method == "forced"
    assert (caps.stream, caps.stream_usage, caps.tokenize) == (True, False, "/extras/tokenize")
    assert remote.caps is caps  # probed once, cached
    info = remote.info()
    assert info["model_id"] == remote.model_id == f"openai:{remote.base_url}#smol"
    assert info["api_key_env"] == KEY_ENV
    assert API_KEY not in json.dumps(info) and API_KEY not in remote.model_id


def test_streamed_generation_reports_tokens_and_usage(remote: OpenAIBackend) -> None:
    pieces: list[tuple[int, str]] = []
    result = remote.generate("The capital of France is", SamplingParams(max_tokens=6, temperature=0),
                             on_token=lambda i, t: pieces.append((i, t)), cancel=CancelToken())
    (c,) = result.completions
    assert "Paris" in c.text
    assert "".join(t for _, t in pieces) == c.text and {i for i, _ in pieces} == {0}
    assert c.finish_reason == "length" and c.completion_tokens == 6
    assert result.usage.prompt_tokens == len(remote.tokenize("The capital of France is")) == 5
    assert result.usage.completion_tokens == 6 and result.usage.tokens_used == 11
    plain = remote.generate("The capital of France is", SamplingParams(max_tokens=6, temperature=0))
    assert plain.completions[0].text == c.text and plain.usage.completion_tokens == 6  # usage from the server


def test_n_samples_without_server_side_n_are_seeded_requests(remote: OpenAIBackend) -> None:
    params = SamplingParams(max_tokens=8, temperature=1.0, top_k=0, seed=7)
    # the requests run at once and the server serves them in any order: the first evaluates the prompt afresh, the
    # others reuse its prefix cache (logits that differ in the last bits, enough to flip a temperature-1 sample), so
    # the prompt is cached first and every request below reads the same prefix
    remote.generate(QUESTION, SamplingParams(max_tokens=1, temperature=0))
    seen: set[int] = set()
    first = remote.generate(QUESTION, params, n=4, on_token=lambda i, t: seen.add(i), cancel=CancelToken())
    assert [c.seed for c in first.completions] == [7, 8, 9, 10]
    assert seen == {0, 1, 2, 3}
    assert len({c.text for c in first.completions}) >= 2
    again = remote.generate(QUESTION, params, n=2, seeds=[9, 10])
    # a seed per sample: re-requested with their seeds, the samples come back. One of the two may flip: how much of
    # the prompt+sample the server's one-slot cache reuses depends on the sample before, and the logits then differ in
    # the last bits (seen once in a full suite run). Without per-sample seeds neither would come back.
    same = [a.text == b.text for a, b in zip(again.completions, first.completions[2:], strict=True)]
    assert sum(same) >= 1, ([c.text for c in again.completions], [c.text for c in first.completions[2:]])
    assert first.usage.completion_tokens == sum(c.completion_tokens for c in first.completions) == 32


def test_stop_strings_cut_the_text(remote: OpenAIBackend) -> None:
    result = remote.generate("Count: 1, 2, 3, 4, 5,", SamplingParams(max_tokens=16, temperature=0, stop=(",",)))
    (c,) = result.completions
    assert "," not in c.text and c.text.strip() == "6"
    assert c.finish_reason == "stop"


def test_json_schema_and_grammar_constrain_the_output(remote: OpenAIBackend) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Lyon"]},
                                               "rank": {"type": "integer"}}, "required": ["city", "rank"]}
    result = remote.generate(QUESTION, SamplingParams(max_tokens=40, temperature=0, json_schema=json.dumps(schema)))
    value = json.loads(result.completions[0].text)
    assert value["city"] in ("Paris", "Lyon") and isinstance(value["rank"], int)
    yes_no = remote.generate("Is water wet?", SamplingParams(max_tokens=4, temperature=0.8, seed=3,
                                                            grammar='root ::= "yes" | "no"'), n=3)
    assert {c.text for c in yes_no.completions} <= {"yes", "no"}
    with pytest.raises(BackendError, match="grammar does not parse"):
        remote.generate("x", SamplingParams(max_tokens=4, grammar="root ::= ("))


TOLERANCE = 0.3
"""Nats between the server's and the engine's log-probabilities of the same text (numerics differ by CPU)."""


def test_judges_and_scores_match_the_embedded_engine(remote: OpenAIBackend) -> None:
    from backends.llama.models.bundled import bundled_model_path
    from backends.llama.worker.llama_backend import LlamaBackend

    local = LlamaBackend(bundled_model_path(), ModelSpec(device="cpu", n_ctx=1024, options=(("n_seq_max", 4),)))
    try:
        prefix = "The capital of France is"
        there = remote.score(prefix, [" Paris.", " London", ""])
        here = local.score(prefix, [" Paris.", " London", ""])
        # the server and the engine lay out their batches differently: their values differ by up to ~0.25 nat on an
        # AVX2-only EPYC (0.05 elsewhere); a misaligned token would be off by whole nats
        for a, b in zip(there.scores, here.scores, strict=True):
            assert a.n_tokens == b.n_tokens
            assert a.logprob == pytest.approx(b.logprob, abs=TOLERANCE)
        assert there.scores[0].logprob > there.scores[1].logprob
        raw = "Question: Is Paris in France? Answer yes or no.\nAnswer:"
        choices = [" No", " Paris", " Paris is", " yes", " perhaps"]
        got = remote.choice_logprobs(raw, choices).logprobs
        want = local.choice_logprobs(raw, choices).logprobs
        for choice in (" No", " Paris", " Paris is"):  # among the top alternatives: the same value
            assert got[choice] == pytest.approx(want[choice], abs=TOLERANCE), choice
        for choice in (" yes", " perhaps"):  # rarer than the top 20: their bound, never below the value
            assert got[choice] >= want[choice] - TOLERANCE, choice
        judged = remote.choice_logprobs([{"role": "user", "content": "Is Paris in France? Reply Yes or No."}],
                                        ["Yes", "No"])
        assert set(judged.logprobs) == {"Yes", "No"} and all(v < 0 for v in judged.logprobs.values())
        assert judged.usage.prompt_tokens > 10
    finally:
        local.close()


def test_cancel_closes_the_stream_and_frees_the_server(remote: OpenAIBackend) -> None:
    cancel = CancelToken()
    seen: list[str] = []

    def on_token(i: int, text: str) -> None:
        seen.append(text)
        if len(seen) == 3:
            cancel.cancel("user cancelled")

    started = time.monotonic()
    with pytest.raises(CancelledError, match="user cancelled"):
        remote.generate("Write a long story about a dragon.", SamplingParams(max_tokens=400, temperature=0.8,
                                                                            grammar='root ::= "ab"{300}'),
                        on_token=on_token, cancel=cancel)
    assert time.monotonic() - started < 15
    assert len(seen) < 20
    # the server stopped generating when the stream closed: a new request is answered at once, not after the
    # ~300 remaining tokens
    started = time.monotonic()
    remote.generate("Hi", SamplingParams(max_tokens=2, temperature=0))
    assert time.monotonic() - started < 5


def test_a_wrong_port_says_nothing_is_listening(llama_server: LlamaServer) -> None:
    backend = OpenAIBackend(llama_server.spec(base_url=f"http://127.0.0.1:{free_port()}/v1"))
    with pytest.raises(BackendError, match=r"could not connect to http://127\.0\.0\.1:\d+/v1 — is the server running"):
        backend.generate("Hi", SamplingParams(max_tokens=2))
    assert "error" in backend.info()
    backend.close()


def test_a_wrong_key_is_a_401_that_names_the_variable(llama_server: LlamaServer, monkeypatch: pytest.MonkeyPatch,
                                                      fresh_caps: object) -> None:
    monkeypatch.setenv("METAGEN_TEST_WRONG_KEY", "not-the-key-41")
    backend = OpenAIBackend(llama_server.spec(api_key_env="METAGEN_TEST_WRONG_KEY"))
    with pytest.raises(BackendError) as caught:
        backend.generate("Hi", SamplingParams(max_tokens=2))
    message = str(caught.value)
    assert "refused the API key (401" in message and "$METAGEN_TEST_WRONG_KEY" in message
    assert "not-the-key-41" not in message
    no_key = OpenAIBackend(llama_server.spec(api_key_env=None))
    with pytest.raises(BackendError, match=r"wants an API key .*api_key_env"):
        no_key.generate("Hi", SamplingParams(max_tokens=2))
    for b in (backend, no_key):
        b.close()


def test_a_slow_answer_hits_timeout_s(llama_server: LlamaServer) -> None:
    probing = OpenAIBackend(llama_server.spec())  # the probe is cached per server: made with the usual timeout (its
    probing.caps  # noqa: B018  grammar-constrained request took over 1 s on an AVX2-only EPYC)
    probing.close()
    backend = OpenAIBackend(llama_server.spec(timeout_s=1))
    backend.caps  # noqa: B018 (the cached probe)
    started = time.monotonic()
    with pytest.raises(BackendError, match=r"within timeout_s=1 seconds"):  # not streamed: one long wait
        backend.generate("Say ab", SamplingParams(max_tokens=150, temperature=0, grammar='root ::= "ab"{150}'))
    assert time.monotonic() - started < 5
    backend.close()
    # the server finishes that answer, then serves the next one
    remote = OpenAIBackend(llama_server.spec())
    assert remote.generate("Hi", SamplingParams(max_tokens=2, temperature=0)).completions
    remote.close()


def test_concurrent_callers_share_the_backend(remote: OpenAIBackend) -> None:
    results: list[str] = []

    def ask(i: int) -> None:
        r = remote.generate(f"{i} + {i} =", SamplingParams(max_tokens=3, temperature=0), on_token=lambda *_: None,
                            cancel=CancelToken())
        results.append(r.completions[0].text)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 4
    assert math.isfinite(remote.score("1 + 1 =", [" 2"]).scores[0].logprob)
