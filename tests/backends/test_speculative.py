"""Speculative decoding in the llama.cpp engine on the bundled model: greedy output unchanged (near-ties counted),
the sampled distribution kept (chi-square, with a control showing the test can fail), the KV cache right after
rejected drafts, grammars, cancel, and the draft counters that traces read."""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from backends.base import CancelledError, CancelToken, ModelSpec, SamplingParams, SpeculativeSpec
from backends.llama.models.bundled import bundled_model_path
from backends.llama.worker.engine_jobs import GenerateJob
from backends.llama.worker.speculative import NgramPool
from backends.llama.worker.speculative_job import SpeculativeGenerateJob

pytestmark = pytest.mark.model

TOPICS = ["the water cycle", "photosynthesis", "a cat", "the moon", "bread baking", "rain", "a bicycle", "chess",
          "volcanoes", "the ocean", "trees", "music", "a library", "winter", "bees", "a train", "the sun", "coffee",
          "mountains", "a river"]
COUNTING = [{"role": "user", "content": "Continue the pattern: 1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2"}]


def engine(speculative: SpeculativeSpec | None, n_seq_max: int = 16, prefix_cache_tokens: int = 0):  # type: ignore[no-untyped-def]
    """Prompts are not kept between requests by default: llama.cpp's flash attention rounds differently over a
    KV cache laid out by earlier requests (measured: a plain engine's own logprobs then move by up to 0.18 nats
    against a fresh evaluation), so the two engines compared here start every request from the same layout."""
    from backends.llama.worker.llama_backend import LlamaBackend

    options = (("kv_size", 4096), ("n_seq_max", n_seq_max), ("prefix_cache_tokens", prefix_cache_tokens))
    return LlamaBackend(bundled_model_path(), ModelSpec(device="cpu", n_ctx=1024, flash_attn=True, options=options,
                                                        speculative=speculative))


DRAW_BATCH = 50
"""Samples per request in the distribution test: 4 requests of 50 draw the 200 samples of each arm (one request of
16 at a time evaluated the prompt 4 times as often and took 3 times the decode steps)."""
DRAW_TOKENS = 8


@pytest.fixture(scope="module")
def plain() -> Iterator[object]:
    backend = engine(None, n_seq_max=64)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def spec() -> Iterator[object]:
    backend = engine(SpeculativeSpec(k=4, ngram=2, adaptive=False), n_seq_max=64)
    yield backend
    backend.close()


def repeat_prompt(topic: str) -> list[dict[str, str]]:
    """A copy task (where n-gram drafts are accepted) with a free part (where they are not)."""
    note = (f"Here is a short note about {topic}. People often talk about {topic} when they meet, and they "
            "remember it for a long time.")
    return [{"role": "user", "content": f"Copy this text exactly, then add one sentence of your own:\n{note}"}]


def test_greedy_text_is_the_same_with_and_without_speculation(plain, spec) -> None:  # type: ignore[no-untyped-def]
    """Over 20 prompts: the same tokens. Allowed: a flip of a near-tie by llama.cpp's numerics (its top two tokens
    within 0.3 nats in the plain run), at most 2 of 20; measured on this machine: 0 of 20, every logprob equal."""
    params = SamplingParams(max_tokens=48, logprobs=2)
    differ, drafted, accepted = 0, 0, 0
    for topic in TOPICS:
        a = plain.generate(repeat_prompt(topic), params).completions[0]
        result = spec.generate(repeat_prompt(topic), params)
        b = result.completions[0]
        drafted += result.usage.draft_tokens
        accepted += result.usage.draft_accepted
        if a.tokens == b.tokens:
            assert a.text == b.text
            continue
        differ += 1
        at = next(i for i, (x, y) in enumerate(zip(a.tokens, b.tokens, strict=False)) if x != y)
        top = a.logprobs[at].top  # type: ignore[index]
        assert top[0][1] - top[1][1] < 0.3, f"{topic!r}: not a near-tie at token {at}: {top}"
    print(f"speculative greedy: {differ} of {len(TOPICS)} prompts differ (near-ties); drafted {drafted}, "
          f"accepted {accepted}")
    assert differ <= 2
    assert accepted > 200  # the drafts were really verified and used


def test_same_seed_gives_the_same_samples_with_and_without_speculation(plain, spec) -> None:  # type: ignore[no-untyped-def]
    """Each row is drawn with the sample's own seeded chain, in order, so the random numbers are used as without
    speculation: a seed gives the same sample. (One sequence per request: several sequences' rejected cells are
    refilled out of position order, which changes flash attention's rounding; the chi-square test below covers
    batches of samples.)"""
    params = SamplingParams(max_tokens=32, temperature=0.8, top_k=40, top_p=0.95, min_p=0.02)
    accepted = 0
    for seed in range(6):
        a = plain.generate(COUNTING, params, seeds=[seed]).completions[0]
        result = spec.generate(COUNTING, params, seeds=[seed])
        accepted += result.usage.draft_accepted
        assert result.completions[0].tokens == a.tokens
    assert accepted > 0


def chi2_sf(x: float, dof: int) -> float:
    """P(X >= x) for X ~ chi-square(dof): the regularized upper incomplete gamma Q(dof/2, x/2)."""
    a, z = dof / 2.0, x / 2.0
    if z <= 0:
        return 1.0
    if z < a + 1:  # series for the lower part
        term = total = 1.0 / a
        n = a
        while term > total * 1e-15:
            n += 1
            term *= z / n
            total += term
        return max(0.0, 1.0 - total * math.exp(-z + a * math.log(z) - math.lgamma(a)))
    b, c, d = z + 1 - a, 1e300, 1.0 / (z + 1 - a)  # continued fraction for the upper part
    h = d
    for i in range(1, 500):
        an = -i * (i - a)
        b += 2
        d = 1.0 / (an * d + b)
        c = b + an / c
        h *= d * c
    return h * math.exp(-z + a * math.log(z) - math.lgamma(a))


def homogeneity_p(first: Counter[tuple[int, ...]], second: Counter[tuple[int, ...]]) -> float:
    """The p-value of a chi-square test that two samples of outcomes come from one distribution (outcomes
    seen fewer than 10 times in both together are pooled into one category)."""
    together = first + second
    common = [o for o, c in together.items() if c >= 10]
    cats = [[first[o] for o in common], [second[o] for o in common]]
    rest = [sum(first.values()) - sum(cats[0]), sum(second.values()) - sum(cats[1])]
    if sum(rest) >= 10:
        cats[0].append(rest[0])
        cats[1].append(rest[1])
    n1, n2 = sum(cats[0]), sum(cats[1])
    stat = 0.0
    for c1, c2 in zip(*cats, strict=True):
        col = c1 + c2
        for observed, n in ((c1, n1), (c2, n2)):
            expected = col * n / (n1 + n2)
            stat += (observed - expected) ** 2 / expected
    return chi2_sf(stat, len(cats[0]) - 1)


DRAW_PROMPT = repeat_prompt("the moon")
"""A copy task: n-gram drafts are offered at most positions, and at temperature 1 many are rejected, which is where a
sampler that accepts wrongly shows."""


def draws(backend, params: SamplingParams, first_seed: int, requests: int = 4, n: int = DRAW_BATCH):  # type: ignore[no-untyped-def]
    """`requests` x `n` samples of DRAW_PROMPT (seeds from `first_seed`): their token lists, and the draft tokens
    accepted."""
    samples: list[list[int]] = []
    accepted = 0
    for r in range(requests):
        seeds = [first_seed + r * n + i for i in range(n)]
        result = backend.generate(DRAW_PROMPT, params, n=n, seeds=seeds)
        accepted += result.usage.draft_accepted
        samples.extend(list(c.tokens) for c in result.completions)
    return samples, accepted


def draft_matches(backend, samples: list[list[int]]) -> list[int]:  # type: ignore[no-untyped-def]
    """Per sample, how many of its tokens equal what a 2-gram prompt lookup predicts at that position (the drafter's
    own rule, NgramPool, on the sample alone). A function of the sample's tokens only, so a lossless sampler leaves
    its distribution unchanged; at the drafted positions a sampler that accepts drafts too often raises it."""
    prompt = backend.model.tokenize(backend.model.render(DRAW_PROMPT))
    counts = []
    for tokens in samples:
        lookup = NgramPool(prompt, 2, 1)
        counts.append(sum(1 for t in range(len(tokens)) if lookup.draft(0, tokens[:t], 1) == [tokens[t]]))
    return counts


def mean_difference_p(first: list[int], second: list[int]) -> float:
    """Two-sided p-value of Welch's z test that two samples of counts have one mean (hundreds of samples each)."""
    n1, n2 = len(first), len(second)
    m1, m2 = sum(first) / n1, sum(second) / n2
    v1 = sum((x - m1) ** 2 for x in first) / (n1 - 1)
    v2 = sum((x - m2) ** 2 for x in second) / (n2 - 1)
    if v1 + v2 == 0:
        return 1.0 if m1 == m2 else 0.0
    z = (m1 - m2) / math.sqrt(v1 / n1 + v2 / n2)
    return math.erfc(abs(z) / math.sqrt(2))


@pytest.fixture
def always_accepting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Breaks speculative sampling the way a wrong accept rule would: every draft token is taken as drawn."""
    verify = SpeculativeGenerateJob._verify

    def broken(job: SpeculativeGenerateJob, core: Any, sample: Any) -> None:
        draft, _ = job._drafts.get(sample.index, ([], []))
        rows = iter(range(1 << 30))

        def forced(core_: Any, s: Any, row: int, drawn: Any = None) -> None:
            i, before = next(rows), len(s.tokens)
            GenerateJob._sample_next(job, core_, s, row, drawn)
            if i < len(draft) and len(s.tokens) > before:
                s.tokens[-1] = draft[i]

        job._sample_next = forced  # type: ignore[method-assign]
        try:
            verify(job, core, sample)
        finally:
            del job._sample_next

    monkeypatch.setattr(SpeculativeGenerateJob, "_verify", broken)


def test_speculative_sampling_keeps_the_distribution(plain, spec, request) -> None:  # type: ignore[no-untyped-def]
    """200 draws of an 8-token continuation of a copy task with and without speculation (disjoint seeds, so the test
    compares distributions, not replays of one seed). Two statistics, each at p > 0.001 (the false-alarm rate of a
    correct sampler: 1 in 1,000; with these fixed seeds the test is deterministic): the count of tokens per draw that
    equal the n-gram drafter's prediction (the drafted positions, where speculation acts), and a chi-square
    homogeneity test of the first 4 tokens. The control breaks the sampler (every draft token accepted) and must fail
    the first statistic at p < 1e-6. Measured on a 2-core AMD EPYC: correct p = 1.0 (82 matches in each arm),
    broken p = 1e-15 (93 against 382 draft tokens accepted); with 400 draws per arm 0.95 and 8e-29. The test it
    replaces (chi-square over 4-token outcomes of a counting prompt) passed that broken sampler at p = 0.713: drafts
    touched few draws, and their outcomes were rare ones, pooled."""
    params = SamplingParams(max_tokens=DRAW_TOKENS, temperature=1.0, top_k=0, top_p=0.95)
    base, _ = draws(plain, params, first_seed=0)
    speculative, accepted = draws(spec, params, first_seed=100_000)
    request.getfixturevalue("always_accepting")
    broken, accepted_broken = draws(spec, params, first_seed=200_000)
    p_same = mean_difference_p(draft_matches(plain, base), draft_matches(plain, speculative))
    p_broken = mean_difference_p(draft_matches(plain, base), draft_matches(plain, broken))
    p_outcomes = homogeneity_p(Counter(tuple(t[:4]) for t in base), Counter(tuple(t[:4]) for t in speculative))
    print(f"draft matches: speculative vs plain p = {p_same:.3g}, always-accepting vs plain p = {p_broken:.3g}; "
          f"4-token outcomes p = {p_outcomes:.3g}; {accepted} draft tokens accepted ({accepted_broken} broken)")
    assert accepted > 50  # drafts were accepted in many of the draws
    assert p_broken < 1e-6
    assert p_same > 1e-3
    assert p_outcomes > 1e-3


def test_kv_cache_is_right_after_many_rejections() -> None:
    """Long drafts from a 1-token match are mostly rejected; afterwards the kept sequence holds exactly the
    prompt and output (no stale draft cells), and continuing from it gives what a fresh engine gives."""
    lookup = engine(SpeculativeSpec(k=8, ngram=1, adaptive=False), n_seq_max=4, prefix_cache_tokens=1024)
    fresh = engine(None, n_seq_max=4)
    try:
        prompt = "Alpha beta gamma. Beta gamma alpha. Gamma alpha beta. A story about a robot:"
        result = lookup.generate(prompt, SamplingParams(max_tokens=80))
        rejected = result.usage.draft_tokens - result.usage.draft_accepted
        assert rejected >= 20, result.usage
        eng = lookup.engine
        assert eng.table.sources
        for seq, tokens in eng.table.sources.items():  # the kept sequence: cells = its tokens, no draft left
            assert eng.lib.llama_memory_seq_pos_max(eng.mem, seq) == len(tokens) - 1
        follow = prompt + result.completions[0].text
        again = lookup.generate(follow, SamplingParams(max_tokens=24))
        assert again.usage.prompt_tokens_cached > result.usage.prompt_tokens  # it continued from the kept output
        expected = fresh.generate(follow, SamplingParams(max_tokens=24))
        assert again.completions[0].text == expected.completions[0].text
    finally:
        lookup.close()
        fresh.close()


def test_grammar_constrained_speculative_output_satisfies_the_grammar(spec) -> None:  # type: ignore[no-untyped-def]
    grammar = 'root ::= ("yes" | "no") (", " ("yes" | "no"))*'
    prompt = "Answer with a list: yes, no, yes, yes, no, no, yes, no, yes, yes, no, no, yes, no. Again:"
    for temperature in (0.0, 0.9):
        result = spec.generate(prompt, SamplingParams(max_tokens=30, temperature=temperature, grammar=grammar), n=3)
        assert result.usage.draft_accepted > 0
        for c in result.completions:
            assert re.fullmatch(r"(yes|no)(, (yes|no))*(,( (y|ye|n)?)?)?", c.text), c.text


def test_cancel_mid_speculation_stops_and_frees_the_engine(spec) -> None:  # type: ignore[no-untyped-def]
    cancel = CancelToken()
    seen: list[str] = []

    def on_token(index: int, piece: str) -> None:
        seen.append(piece)
        if len(seen) == 6:
            cancel.cancel("stop here")

    with pytest.raises(CancelledError, match="stop here"):
        spec.generate(COUNTING, SamplingParams(max_tokens=200, temperature=0.8), n=4, on_token=on_token,
                      cancel=cancel)
    assert not spec.busy
    result = spec.generate(COUNTING, SamplingParams(max_tokens=8))
    assert result.completions[0].completion_tokens == 8


def test_draft_counters_reach_the_result_and_the_engine_stats(spec) -> None:  # type: ignore[no-untyped-def]
    before = spec.info()["engine"]
    result = spec.generate(COUNTING, SamplingParams(max_tokens=30, temperature=0.7), n=4)
    after = spec.info()["engine"]
    usage = result.usage
    assert 0 < usage.draft_accepted <= usage.draft_tokens
    assert usage.acceptance_rate == usage.draft_accepted / usage.draft_tokens
    assert sum(c.draft_tokens for c in result.completions) == usage.draft_tokens
    assert sum(sum(c.accepted or []) for c in result.completions) == usage.draft_accepted
    assert all(len(c.accepted or []) == len(c.tokens) for c in result.completions)
    assert usage.completion_tokens == sum(len(c.tokens) for c in result.completions)  # usage: output tokens only
    assert after["draft_tokens"] - before["draft_tokens"] == usage.draft_tokens
    assert after["draft_accepted"] - before["draft_accepted"] == usage.draft_accepted


def test_concurrent_requests_share_the_speculative_batch(spec) -> None:  # type: ignore[no-untyped-def]
    results: dict[int, str] = {}

    def run(i: int) -> None:
        results[i] = spec.generate(repeat_prompt(TOPICS[i]), SamplingParams(max_tokens=24)).completions[0].text

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    alone = {i: spec.generate(repeat_prompt(TOPICS[i]), SamplingParams(max_tokens=24)).completions[0].text
             for i in range(3)}
    # batched numerics may flip near-ties, and on some CPUs early (on an AVX2-only EPYC 2 of 3 answers took another
    # turn at their second token batched): every answer is there, and at least one is the same as alone
    assert all(results[i].strip() for i in range(3)), results
    assert sum(results[i] == alone[i] for i in range(3)) >= 1, (results, alone)


def test_the_grammar_process_says_how_much_of_a_draft_its_grammar_allows(spec) -> None:  # type: ignore[no-untyped-def]
    from backends.llama.worker import grammar_worker

    model = spec.model
    worker = grammar_worker.GrammarWorker(bundled_model_path())
    try:
        worker.wait_ready(lambda: None)
        worker.new(0, 'root ::= "yes, no" | "no"', lambda: None)
        ok = model.tokenize("yes, no", add_special=False)
        assert worker.allowed_prefix(0, ok, lambda: None) == len(ok)
        assert worker.allowed_prefix(0, [*ok[:1], *model.tokenize(" maybe", add_special=False)], lambda: None) == 1
        assert worker.allowed_prefix(0, ok, lambda: None) == len(ok)  # the grammar itself did not move
        worker.accept(0, ok[0])
        assert worker.allowed_prefix(0, ok, lambda: None) == 0  # after "yes", "yes" may not come again
        assert worker.allowed_prefix(0, ok[1:], lambda: None) == len(ok) - 1
    finally:
        worker.kill()


def test_drafts_the_grammar_forbids_never_reach_the_batch(spec, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Issue 32: the pre-check was lost when grammars moved to the grammar process (a sampler chain without its
    grammar let every draft through, to be rejected only after its decode). The prompt puts "maybe" after each
    answer, so the prompt lookup drafts " maybe, ..." that the yes/no grammar forbids."""
    from backends.llama.worker.speculative_job import SpeculativeGenerateJob

    drafts: list[list[int]] = []
    original = SpeculativeGenerateJob.add_draft_tokens

    def recording(self, batch, budget):  # type: ignore[no-untyped-def]
        used = original(self, batch, budget)
        drafts.extend(draft for draft, _rows in self._drafts.values())
        return used

    monkeypatch.setattr(SpeculativeGenerateJob, "add_draft_tokens", recording)
    grammar = 'root ::= ("yes" | "no") (", " ("yes" | "no"))*'
    prompt = "Answer with a list: yes, maybe, no, maybe, yes, maybe, no, maybe, yes, maybe, no. Again: yes, maybe"
    result = spec.generate(prompt, SamplingParams(max_tokens=30, grammar=grammar), n=2)
    for c in result.completions:
        assert re.fullmatch(r"(yes|no)(, (yes|no))*(,( (y|ye|n)?)?)?", c.text), c.text
    assert drafts and result.usage.draft_accepted > 0
    texts = [spec.model.detokenize(draft) for draft in drafts]
    assert all(set(text) <= set("yesno, ") for text in texts), [t for t in texts if set(t) - set("yesno, ")]
