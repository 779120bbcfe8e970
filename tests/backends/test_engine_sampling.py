"""The llama.cpp engine on the bundled model: seeds, shared prompt evaluation, stops, limits, grammars,
logprobs against scoring, streaming, chat vs raw prompts."""

from __future__ import annotations

import json
import uuid

import pytest

from backends.base import BackendError, ModelSpec, SamplingParams
from backends.llama.models.bundled import bundled_model_path

pytestmark = pytest.mark.model

QUESTION = [{"role": "user", "content": "Name three colours."}]


def fresh_prompt(text: str) -> list[dict[str, str]]:
    """A chat prompt no earlier test has cached (a unique tag in the system message)."""
    return [{"role": "system", "content": f"Session {uuid.uuid4().hex[:8]}."}, {"role": "user", "content": text}]


def small_engine(**options: object):
    from backends.llama.worker.llama_backend import LlamaBackend

    opts = tuple(sorted({"kv_size": 1024, "n_seq_max": 8, **options}.items()))
    return LlamaBackend(bundled_model_path(), ModelSpec(device="cpu", n_ctx=512, options=opts))


def test_same_seed_same_text_and_different_seeds_differ() -> None:
    """Two engines in the same state (a fresh process each time a workflow runs) give the same samples."""
    params = SamplingParams(max_tokens=16, temperature=0.9, seed=7)
    texts = []
    for _ in range(2):
        engine = small_engine()
        try:
            result = engine.generate(QUESTION, params, n=4)
        finally:
            engine.close()
        assert [c.seed for c in result.completions] == [7, 8, 9, 10]
        texts.append([c.text for c in result.completions])
    assert texts[0] == texts[1]
    assert len(set(texts[0])) >= 3  # distinct seeds give distinct samples


def test_repeats_are_bit_identical_with_flash_attention() -> None:
    """With flash attention a repeated request, whose prompt now comes from the prefix cache, reproduces
    the first one exactly (logprobs included)."""
    engine = small_engine(flash_attn="on")
    try:
        params = SamplingParams(max_tokens=16, temperature=0.9, seed=11, logprobs=0)
        first = engine.generate(QUESTION, params, n=3)
        again = engine.generate(QUESTION, params, n=3)
    finally:
        engine.close()
    assert again.usage.prompt_tokens_cached == again.usage.prompt_tokens  # served from the prefix cache
    assert [c.text for c in first.completions] == [c.text for c in again.completions]
    for a, b in zip(first.completions, again.completions, strict=True):
        assert [lp.logprob for lp in a.logprobs] == [lp.logprob for lp in b.logprobs]


def test_explicit_seeds_are_used(llama) -> None:
    result = llama.generate(QUESTION, SamplingParams(max_tokens=4, temperature=1.0), n=3, seeds=[42, 5, 42])
    assert [c.seed for c in result.completions] == [42, 5, 42]
    with pytest.raises(ValueError, match="2 seeds for n=3"):
        llama.generate(QUESTION, SamplingParams(max_tokens=4), n=3, seeds=[1, 2])


def test_equal_seeds_in_one_batch_give_equal_samples_with_flash_attention() -> None:
    engine = small_engine(flash_attn="on")
    try:
        result = engine.generate(QUESTION, SamplingParams(max_tokens=12, temperature=1.0), n=3, seeds=[42, 5, 42])
    finally:
        engine.close()
    first, other, same = (c.text for c in result.completions)
    assert first == same and first != other


def test_n_samples_share_one_prompt_evaluation(llama) -> None:
    prompt = fresh_prompt("Write a short poem about the sea.")
    n_prompt = len(llama.tokenize(llama.render_prompt(prompt)))
    before = llama.engine.stats["prompt_tokens_evaluated"]
    result = llama.generate(prompt, SamplingParams(max_tokens=8, temperature=0.8), n=8)
    usage = result.usage
    assert usage.prompt_tokens == n_prompt
    assert usage.prompt_tokens_evaluated + usage.prompt_tokens_cached == n_prompt  # once, not 8 times
    assert llama.engine.stats["prompt_tokens_evaluated"] - before == usage.prompt_tokens_evaluated
    assert usage.completion_tokens == sum(c.completion_tokens for c in result.completions) == 64
    assert usage.prefill_s > 0 and usage.decode_s > 0


def test_prefix_cache_reuses_a_shared_header(llama) -> None:
    header = "You are a careful grader. " * 20 + f"Case {uuid.uuid4().hex[:8]}.\n"
    first = llama.generate(header + "Grade answer A.", SamplingParams(max_tokens=2))
    second = llama.generate(header + "Grade answer B.", SamplingParams(max_tokens=2))
    n_header = len(llama.tokenize(header))
    assert first.usage.prompt_tokens_cached == 0
    assert second.usage.prompt_tokens_cached >= n_header - 2
    assert second.usage.prompt_tokens_evaluated <= second.usage.prompt_tokens - n_header + 2


def test_idle_cached_prompts_expire_without_flash_attention() -> None:
    """Without flash attention every decoded token attends over every used KV cell, so a kept prompt that
    is not reused within the expiry window is dropped; with flash attention it stays."""
    header = "You are a careful grader. " * 20 + f"Case {uuid.uuid4().hex[:8]}.\n"
    for flash, expect_reuse in (("off", False), ("on", True)):
        window = {"prefix_cache_expiry": 20} if flash == "off" else {}  # the default window is ~120 tokens
        engine = small_engine(flash_attn=flash, **window)
        try:
            engine.generate(header + "Grade answer A.", SamplingParams(max_tokens=2))
            engine.generate("Count to ten:", SamplingParams(max_tokens=8, temperature=0.8), n=4)  # 32 tokens
            again = engine.generate(header + "Grade answer B.", SamplingParams(max_tokens=2))
            stats = engine.info()["engine"]
        finally:
            engine.close()
        assert (again.usage.prompt_tokens_cached > 100) is expect_reuse, flash
        assert (stats["prefix_expired"] > 0) is not expect_reuse, flash
        assert stats["prefix_expiry_tokens"] == (20 if flash == "off" else None)


def test_max_tokens_is_honoured(llama) -> None:
    result = llama.generate("Once upon a time", SamplingParams(max_tokens=5, temperature=0.7), n=3)
    for completion in result.completions:
        assert completion.completion_tokens == 5 and len(completion.tokens) == 5
        assert completion.finish_reason == "length"


def test_stop_string_cuts_the_text(fresh_exact_llama) -> None:
    llama = fresh_exact_llama
    params = SamplingParams(max_tokens=30)
    whole = llama.generate(QUESTION, params).completions[0]
    full = whole.text
    words = full.split()
    assert len(words) >= 4, full
    assert whole.stop == ""
    stop = words[3]
    stopped = llama.generate(QUESTION, SamplingParams(max_tokens=30, stop=("never-written", stop))).completions[0]
    assert stopped.finish_reason == "stop"
    assert stopped.text == full[: full.index(stop)]
    assert stopped.stop == stop  # which stop string ended it (early exit of thinking tells reflection from the close)


def test_end_of_generation_token_finishes_a_chat_reply(llama) -> None:
    result = llama.generate([{"role": "user", "content": "Say hi."}], SamplingParams(max_tokens=60))
    completion = result.completions[0]
    assert completion.finish_reason == "eog"
    assert "<|im_end|>" not in completion.text and completion.text.strip()


def test_gbnf_grammar_constrains_the_output(llama) -> None:
    grammar = 'root ::= ("yes" | "no") "."'
    params = SamplingParams(max_tokens=8, temperature=1.0, grammar=grammar)
    result = llama.generate("Is water wet? Answer:", params, n=4)
    for completion in result.completions:
        assert completion.text in ("yes.", "no."), completion.text
        assert completion.finish_reason == "eog"


def test_json_schema_output_parses(llama) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    }
    params = SamplingParams(max_tokens=60, temperature=0.7, json_schema=json.dumps(schema))
    result = llama.generate([{"role": "user", "content": "Describe a person as JSON."}], params, n=2)
    for completion in result.completions:
        data = json.loads(completion.text)
        assert isinstance(data["name"], str) and isinstance(data["age"], int)


def test_bad_grammar_and_params_are_clear_errors(llama) -> None:
    with pytest.raises(BackendError, match="grammar does not parse"):
        llama.generate("x", SamplingParams(grammar="root ::= ("))
    with pytest.raises(BackendError, match="json_schema is not valid JSON"):
        llama.generate("x", SamplingParams(json_schema="{nope"))
    with pytest.raises(BackendError, match="top_p must be in"):
        llama.generate("x", SamplingParams(top_p=0.0))
    with pytest.raises(BackendError, match="at least 1"):
        llama.generate("x", SamplingParams(), n=0)


def test_logprobs_agree_with_scoring(llama) -> None:
    """Reported logprobs are of the model's own distribution (before temperature and top-k), so scoring
    the sampled text must give about the same log-likelihood; batch shapes change float rounding only."""
    params = SamplingParams(max_tokens=16, temperature=1.3, top_k=20, logprobs=0)
    result = llama.generate(QUESTION, params, n=3, seeds=[1, 2, 3])
    texts = [c.text for c in result.completions]
    scores = llama.score(QUESTION, texts)
    for completion, score in zip(result.completions, scores.scores, strict=True):
        prefix_text = result.prompt_text
        same = llama._continuation_tokens(prefix_text, llama.tokenize(prefix_text), completion.text)
        if same != completion.tokens:  # text re-tokenizes differently: compare counts only
            continue
        reported = [lp.logprob for lp in completion.logprobs]
        assert score.n_tokens == len(reported)
        for a, b in zip(reported, score.token_logprobs, strict=True):
            assert abs(a - b) < 0.3
        assert abs(sum(reported) - score.logprob) < 0.05 * len(reported) + 0.1


def test_top_logprobs_are_sorted_alternatives(llama) -> None:
    params = SamplingParams(max_tokens=4, logprobs=3)
    completion = llama.generate(QUESTION, params).completions[0]
    assert completion.logprobs is not None and len(completion.logprobs) == 4
    for entry in completion.logprobs:
        values = [lp for _, lp in entry.top]
        assert len(values) == 3 and values == sorted(values, reverse=True)
        assert abs(entry.logprob - values[0]) < 1e-6  # greedy picks the most likely token
        assert entry.token == entry.top[0][0]


def test_streamed_pieces_add_up_to_the_text(llama) -> None:
    pieces: dict[int, list[str]] = {0: [], 1: []}
    params = SamplingParams(max_tokens=20, temperature=0.8, stop=(".",))
    result = llama.generate(QUESTION, params, n=2, on_token=lambda i, text: pieces[i].append(text))
    for i, completion in enumerate(result.completions):
        assert "".join(pieces[i]) == completion.text


def test_chat_template_and_raw_mode(fresh_exact_llama) -> None:
    llama = fresh_exact_llama
    rendered = llama.render_prompt(QUESTION)
    assert rendered.startswith("<|im_start|>") and rendered.endswith("<|im_start|>assistant\n")
    assert not llama.render_prompt(QUESTION, add_generation_prompt=False).endswith("assistant\n")
    assert llama.render_prompt("plain text") == "plain text"
    raw = llama.generate(rendered, SamplingParams(max_tokens=6))
    chat = llama.generate(QUESTION, SamplingParams(max_tokens=6))
    assert raw.completions[0].text == chat.completions[0].text
    with pytest.raises(BackendError, match="role"):
        llama.render_prompt([{"content": "no role"}])


def test_info_reports_model_device_build_and_engine(llama) -> None:
    llama.generate("Hi", SamplingParams(max_tokens=1))
    info = llama.info()
    assert info["backend"] == "llama.cpp"
    assert info["model"]["quantization"] == "Q4_1"
    assert info["device"]["device"] == "cpu" and info["device"]["n_gpu_layers"] == 0
    assert info["device"]["flash_attn"] is True  # llama.cpp's "auto" turns it on for CPU
    assert info["engine"]["prefix_expiry_tokens"] is None  # kept prompts cost nothing with flash attention
    assert "gpu_offload" in info["build"] and info["build"]["system_info"]
    assert info["engine"]["requests"] >= 1
    assert llama.model_id.startswith("SmolLM2-135M-Instruct.Q4_1.gguf#") and "@cpu" in llama.model_id
