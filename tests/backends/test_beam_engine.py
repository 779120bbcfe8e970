"""Beam search on the real engine with the bundled model: n=1 is greedy, a tiny grammar's beam is the exhaustive
search, diverse groups diverge, runs repeat, cancel stops it, and every sequence it took is free again after."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from backends.base import BackendError, CancelledError, CancelToken, SamplingParams
from backends.beam_search import BeamSettings

pytestmark = pytest.mark.model

QUESTION = [{"role": "user", "content": "What is 7 times 8? Answer with the number."}]
DIGITS = 'root ::= [0-3] [0-3] [0-3]'


def free_and_empty(backend: Any) -> tuple[int, list[int]]:
    """Free plus parked sequence ids, and the ids holding KV cells that no prefix source accounts for."""
    engine = backend.engine
    table = engine.table
    stray = [s for s in range(engine.n_seq_max) if s not in table.sources
             and engine.lib.llama_memory_seq_pos_max(engine.mem, s) >= 0]
    return table.n_free + table.n_parked, stray


def test_width_one_is_greedy_token_for_token(fresh_exact_llama: Any) -> None:
    params = SamplingParams(max_tokens=32)
    greedy = fresh_exact_llama.generate(QUESTION, params).completions[0]
    beam = fresh_exact_llama.beam_search(QUESTION, params, BeamSettings(n=1)).hypotheses
    assert len(beam) == 1
    assert beam[0].tokens == greedy.tokens
    assert beam[0].text == greedy.text


def test_tiny_grammar_beam_equals_exhaustive_search(llama: Any) -> None:
    """Width 16 keeps every 2-digit prefix of [0-3], so the beam's 16 best must be the 16 best of all 64."""
    before = free_and_empty(llama)
    result = llama.beam_search(QUESTION, SamplingParams(max_tokens=3, grammar=DIGITS),
                               BeamSettings(n=16, length_penalty=1.0))
    assert free_and_empty(llama) == before
    texts = [f"{a}{b}{c}" for a in "0123" for b in "0123" for c in "0123"]
    scored = llama.score(QUESTION, texts).scores
    assert all(s.n_tokens == 3 for s in scored)  # every digit is one token of this vocabulary
    truth = sorted(((s.logprob / 3, t) for s, t in zip(scored, texts, strict=True)), key=lambda x: -x[0])
    got = [(h.score, h.text) for h in result.hypotheses]
    assert len(got) == 16
    assert got[0][1] == truth[0][1]
    for (score, _), (true_score, _) in zip(got, truth[:16], strict=True):
        assert score == pytest.approx(true_score, abs=2e-3)
    assert all(h.text.isdigit() and len(h.text) == 3 for h in result.hypotheses)


def test_diverse_groups_start_with_distinct_tokens(llama: Any) -> None:
    settings = BeamSettings(n=4, groups=4, diversity_penalty=100.0)
    result = llama.beam_search(QUESTION, SamplingParams(max_tokens=6), settings)
    first = [n["token"] for n in result.tree["nodes"] if n["step"] == 1]
    assert len(first) == 4 and len(set(first)) == 4
    plain = llama.beam_search(QUESTION, SamplingParams(max_tokens=6), BeamSettings(n=4, groups=4))
    assert len({n["token"] for n in plain.tree["nodes"] if n["step"] == 1}) == 1  # no penalty: one first token


def test_runs_repeat_exactly(exact_llama: Any) -> None:
    """The same search from the same engine state repeats bit for bit. The first run only brings the engine to that
    state: what earlier tests left in the session's KV cells decides which cells a fresh prompt lands in, and flash
    attention sums over cells in cell order, so a first run after other tests may round differently (seen in CI after
    test_engine_sampling and test_token_stats) and flip a near-tie between beams."""
    settings = BeamSettings(n=4, groups=2, diversity_penalty=0.5)
    runs = [exact_llama.beam_search(QUESTION, SamplingParams(max_tokens=16), settings) for _ in range(3)]
    assert [(h.text, h.score) for h in runs[1].hypotheses] == [(h.text, h.score) for h in runs[2].hypotheses]
    scores = [h.score for h in runs[1].hypotheses]
    assert scores == sorted(scores, reverse=True)
    assert runs[2].usage.prompt_tokens_cached > 0  # the prompt came from the prefix cache


def test_cancel_mid_search_frees_everything(llama: Any) -> None:
    before = free_and_empty(llama)
    cancel = CancelToken()
    errors: list[BaseException] = []
    start_tokens = llama.engine.stats["completion_tokens"]

    def search() -> None:
        try:
            llama.beam_search("Once upon a time, in a land far away,", SamplingParams(max_tokens=400),
                              BeamSettings(n=4, length_penalty=2.0), cancel=cancel)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=search)
    thread.start()
    deadline = time.monotonic() + 120
    while llama.engine.stats["completion_tokens"] - start_tokens < 40 and thread.is_alive() \
            and time.monotonic() < deadline:
        time.sleep(0.01)
    cancel.cancel("user pressed stop")
    thread.join(120)
    assert errors and isinstance(errors[0], CancelledError)
    assert free_and_empty(llama) == before


def test_too_many_beams_and_bad_groups_are_refused(llama: Any) -> None:
    with pytest.raises(BackendError, match="parallel sequences"):
        llama.beam_search(QUESTION, SamplingParams(max_tokens=4), BeamSettings(n=40))
    with pytest.raises(BackendError, match="must divide n"):
        llama.beam_search(QUESTION, SamplingParams(max_tokens=4), BeamSettings(n=4, groups=3))


def test_concurrent_beam_requests_share_decode_steps(llama: Any) -> None:
    """Two beam requests at once run in the same steps: their decode calls overlap instead of adding up."""
    prompts = ["List three fruits:", "List three colours:"]
    settings = BeamSettings(n=4, length_penalty=1.0)
    params = SamplingParams(max_tokens=24)
    for p in prompts:  # prompts cached, so both searches start decoding at once
        llama.generate(p, SamplingParams(max_tokens=1))
    calls = llama.engine.stats["decode_calls"]
    for p in prompts:
        llama.beam_search(p, params, settings)
    sequential = llama.engine.stats["decode_calls"] - calls
    calls = llama.engine.stats["decode_calls"]
    results: dict[int, Any] = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, llama.beam_search(prompts[i], params,
                                                                                             settings)))
               for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    together = llama.engine.stats["decode_calls"] - calls
    assert len(results) == 2 and all(len(results[i].hypotheses) == 4 for i in range(2))
    assert together < sequential


def test_grammar_and_json_schema_bound_every_beam(llama: Any) -> None:
    """A grammar allowing two answers: every beam spells one of them (a word may be spelt by several token paths,
    and width 8 holds all of them, so both words come back), ended by the end token; a JSON schema likewise."""
    result = llama.beam_search(QUESTION, SamplingParams(max_tokens=8, grammar='root ::= "yes" | "no"'),
                               BeamSettings(n=8))
    assert {h.text for h in result.hypotheses} == {"no", "yes"}
    assert all(h.finish_reason == "eog" for h in result.hypotheses)
    schema = SamplingParams(max_tokens=8, json_schema='{"type": "boolean"}')
    texts = {h.text.strip() for h in llama.beam_search(QUESTION, schema, BeamSettings(n=4)).hypotheses}
    assert texts and texts <= {"true", "false"}
