"""Speculative decoding with a draft model (the bundled model drafting for itself): greedy output unchanged, sampled
output unchanged for a seed although most drafts are rejected (so the target's and the draft's KV caches follow the
rejections), a grammar, cancel, and the draft sequences given back."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from backends.base import CancelledError, CancelToken, ModelSpec, SamplingParams, SpeculativeSpec
from tests.backends.test_speculative import COUNTING, TOPICS, engine, repeat_prompt

pytestmark = pytest.mark.model

SELF_DRAFT = SpeculativeSpec(method="draft", k=4, draft=ModelSpec(source="bundled", device="cpu"), draft_alias="small",
                             adaptive=False)


@pytest.fixture(scope="module")
def plain() -> Iterator[object]:
    backend = engine(None)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def drafted() -> Iterator[object]:
    backend = engine(SELF_DRAFT)
    yield backend
    backend.close()


def test_the_draft_model_is_loaded_beside_the_target(drafted) -> None:  # type: ignore[no-untyped-def]
    assert drafted.drafter is not None
    assert drafted.drafter.n_vocab == drafted.model.n_vocab
    assert drafted.memory_bytes() > drafted.model.size_bytes + drafted.drafter.model.size_bytes


def test_greedy_text_is_the_same_with_a_draft_model(plain, drafted) -> None:  # type: ignore[no-untyped-def]
    """The model drafting for itself greedily: the same tokens as plain greedy, and nearly every draft accepted."""
    params = SamplingParams(max_tokens=40)
    differ, drafted_n, accepted = 0, 0, 0
    for topic in TOPICS[:6]:
        a = plain.generate(repeat_prompt(topic), params).completions[0]
        result = drafted.generate(repeat_prompt(topic), params)
        drafted_n += result.usage.draft_tokens
        accepted += result.usage.draft_accepted
        differ += a.tokens != result.completions[0].tokens
    print(f"draft-model greedy: {differ} of 6 prompts differ; drafted {drafted_n}, accepted {accepted}")
    assert differ <= 1  # a near-tie flipped by batched numerics at most
    assert drafted_n > 100
    assert accepted >= 0.9 * drafted_n


def test_rejected_drafts_leave_both_kv_caches_right(plain, drafted) -> None:  # type: ignore[no-untyped-def]
    """Sampling the target at temperature 1 rejects many greedy drafts; a seed still gives the plain run's sample
    (a stale cell in the target's KV would change it), and the draft model keeps proposing tokens that are
    accepted after rejections (a stale cell in the draft's KV would make its drafts wrong)."""
    params = SamplingParams(max_tokens=40, temperature=1.0, top_k=0, top_p=1.0)
    rejected, accepted = 0, 0
    for seed in range(4):
        a = plain.generate(COUNTING, params, seeds=[seed]).completions[0]
        result = drafted.generate(COUNTING, params, seeds=[seed])
        rejected += result.usage.draft_tokens - result.usage.draft_accepted
        accepted += result.usage.draft_accepted
        assert result.completions[0].tokens == a.tokens, seed
    assert rejected >= 10
    assert accepted >= 10
    assert drafted.drafter.decode_failures == 0


def test_a_trimmed_draft_sequence_drafts_like_a_fresh_one(drafted) -> None:  # type: ignore[no-untyped-def]
    """After the target rejects part of a draft, the draft sequence is cut back to the common tokens: its KV cells
    are exactly the tokens it remembers, and its next draft equals that of a sequence that never saw the rejected
    tokens. (Called from the test thread while the engine is idle, on keys no request uses.)"""
    draft = drafted.drafter
    tokens = drafted.model.tokenize("One, two, three, four, five, six, seven")
    other = drafted.model.tokenize(" Once upon a time there was", add_special=False)
    try:
        [first] = draft.propose([("t1", tokens, 6)])
        assert len(first) == 6
        diverged = [*tokens, *first[:2], *other]
        [again] = draft.propose([("t1", diverged, 4)])
        seq_id, have = draft._seqs["t1"]
        assert int(draft.lib.llama_memory_seq_pos_max(draft.mem, seq_id)) == len(have) - 1
        assert have[: len(diverged)] == diverged
        [fresh] = draft.propose([("t2", diverged, 4)])
        assert again == fresh
        assert draft.decode_failures == 0
    finally:
        draft.release("t1")
        draft.release("t2")


def test_several_samples_each_get_their_own_draft_sequence(drafted) -> None:  # type: ignore[no-untyped-def]
    """Each sample drafts on its own draft sequence; the 2nd to 4th copy the prompt's draft cells from the first."""
    shared = drafted.drafter.tokens_shared
    result = drafted.generate(COUNTING, SamplingParams(max_tokens=24, temperature=0.8), n=4, seeds=[1, 2, 3, 4])
    assert drafted.drafter.tokens_shared - shared >= 3 * (result.usage.prompt_tokens - 1)
    assert all(c.draft_tokens > 0 for c in result.completions)
    assert drafted.drafter._seqs == {}  # every draft sequence was given back
    assert len(drafted.drafter._free) == drafted.engine.n_seq_max
    greedy = drafted.generate(repeat_prompt("trees"), SamplingParams(max_tokens=24), n=3)  # drafts on copied cells
    # cells copied wrongly would reject nearly every draft; right ones accept most (55 of 63 on an AVX2-only EPYC,
    # where the batched target and the one-sequence draft differ in more near-ties than on AVX-512)
    assert greedy.usage.draft_accepted >= 0.75 * greedy.usage.draft_tokens > 0


def test_grammar_constrained_draft_model_output_satisfies_the_grammar(drafted) -> None:  # type: ignore[no-untyped-def]
    grammar = 'root ::= ("yes" | "no") (", " ("yes" | "no"))*'
    prompt = "Answer with a list: yes, no, yes, yes, no, no, yes, no, yes, yes, no, no, yes, no. Again:"
    result = drafted.generate(prompt, SamplingParams(max_tokens=20, grammar=grammar), n=2)
    assert result.usage.draft_accepted > 0
    for c in result.completions:
        assert re.fullmatch(r"(yes|no)(, (yes|no))*(,( (y|ye|n)?)?)?", c.text), c.text


def test_cancel_with_a_draft_model_frees_both_models(drafted) -> None:  # type: ignore[no-untyped-def]
    cancel = CancelToken()
    seen: list[str] = []

    def on_token(index: int, piece: str) -> None:
        seen.append(piece)
        if len(seen) == 6:
            cancel.cancel("stop here")

    with pytest.raises(CancelledError, match="stop here"):
        drafted.generate(COUNTING, SamplingParams(max_tokens=200, temperature=0.8), n=3, on_token=on_token,
                         cancel=cancel)
    assert not drafted.busy
    assert drafted.drafter._seqs == {}
    result = drafted.generate(COUNTING, SamplingParams(max_tokens=8))
    assert result.completions[0].completion_tokens == 8
