"""Token statistics and the confidence stop on the real bundled model: recorded from the logits the sampler already
has, consistent with the logprobs path, and a stopped sample's remaining tokens are never generated."""

from __future__ import annotations

import math

import pytest

from backends.base import SamplingParams

pytestmark = pytest.mark.model

PROMPT = [{"role": "user", "content": "What is 12 + 7? Think step by step."}]


def test_token_stats_are_recorded_per_token_and_agree_with_logprobs(llama) -> None:  # type: ignore[no-untyped-def]
    params = SamplingParams(max_tokens=24, temperature=0.8, seed=5, logprobs=0, token_stats=True)
    result = llama.generate(PROMPT, params, n=3)
    for c in result.completions:
        stats = c.token_stats
        assert stats is not None and len(stats) == c.completion_tokens == len(c.logprobs or [])
        for lp, mine in zip(c.logprobs or [], stats.logprob, strict=True):
            assert mine == pytest.approx(lp.logprob, abs=1e-4)
        # DeepConf's confidence (-mean log p of the top 20) is positive; entropy is within [0, log V]
        assert all(v > 0 for v in stats.confidence)
        assert all(0 <= h <= math.log(49152) for h in stats.entropy)
        # self-certainty, KL(uniform || p) = -log V - mean log p over the whole vocabulary, recorded in the same
        # pass: one per token, never negative, and at least C - log V (the mean over all tokens is at most the
        # mean over the 20 most likely, whose negative is C)
        assert len(stats.self_certainty) == c.completion_tokens and all(v >= 0 for v in stats.self_certainty)
        assert all(kl >= conf - math.log(49152) - 1e-4 for kl, conf in zip(stats.self_certainty, stats.confidence,
                                                                             strict=True))
    plain = llama.generate(PROMPT, SamplingParams(max_tokens=8, temperature=0.8, seed=5), n=1)
    assert plain.completions[0].token_stats is None


def test_confidence_stop_cuts_samples_at_the_first_full_window_below_the_threshold(llama) -> None:  # type: ignore[no-untyped-def]
    params = SamplingParams(max_tokens=40, temperature=0.8, seed=1, confidence_stop=(4, 1e6))
    result = llama.generate(PROMPT, params, n=4)
    assert [c.finish_reason for c in result.completions] == ["low_confidence"] * 4
    assert [c.completion_tokens for c in result.completions] == [4] * 4
    assert result.usage.completion_tokens == 16  # the stopped samples' other tokens were never decoded


def test_an_unreachable_threshold_changes_nothing(fresh_exact_llama) -> None:  # type: ignore[no-untyped-def]
    """The two compared requests both start with the prompt cached (a first request puts it there): on the shared
    engine, after other tests, the first of them once evaluated it in other cells and sampled another text."""
    base = SamplingParams(max_tokens=24, temperature=0.8, seed=9)
    fresh_exact_llama.generate(PROMPT, base, n=2)
    free = fresh_exact_llama.generate(PROMPT, base, n=2)
    guarded = fresh_exact_llama.generate(PROMPT, SamplingParams(**{**base.__dict__, "confidence_stop": (4, -1e6)}),
                                         n=2)
    assert [c.text for c in guarded.completions] == [c.text for c in free.completions]
    assert all(c.finish_reason != "low_confidence" for c in guarded.completions)
