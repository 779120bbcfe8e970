"""Reading two tokens' probabilities after every step of every candidate on the real bundled model (used as a
stand-in PRM): the batched positions job agrees with asking each prefix on its own, evaluates the shared prefix
once, and refuses a good/bad token that is not one token of the vocabulary."""

from __future__ import annotations

import math
from typing import Any

import pytest

from backends.base import BackendError
from nodes.algorithms.prm import good_probability, tagged_segments

pytestmark = pytest.mark.model

QUESTION = "Question: Tom has 3 apples and buys 4 more. How many apples does he have?"
CANDIDATES = [
    ["He starts with 3 apples.", "He buys 4 more, so 3 + 4 = 7.", "Answer: 7"],
    ["He starts with 3 apples.", "He buys 4 more, so 3 + 4 = 8.", "Answer: 8"],
    ["Tom has 3 apples.", "Answer: 7"],
]
TOKENS = (" yes", " no")


def _sequences() -> list[list[str]]:
    return [tagged_segments(QUESTION, steps, "\n", " Correct?") for steps in CANDIDATES]


def test_every_step_of_every_candidate_matches_asking_each_prefix_alone(llama: Any) -> None:
    sequences = _sequences()
    result = llama.step_logprobs(sequences, TOKENS)
    assert [len(rows) for rows in result.logprobs] == [3, 3, 2]
    for segments, rows in zip(sequences, result.logprobs, strict=True):
        alones = []
        for j in range(len(rows)):  # the first step reads ~2 nats off the next: a step read off the wrong prefix fails
            text = "".join(segments[: j + 1])
            joint = llama.model.tokenize(text)
            pieces = llama.model.tokenize(segments[0]) + [
                t for s in segments[1 : j + 1] for t in llama.model.tokenize(s, add_special=False)]
            assert joint == pieces, "the test texts must tokenize the same jointly and by segment"
            alones.append(llama.choice_logprobs(text, list(TOKENS)).logprobs)
        for row, alone in zip(rows, alones, strict=True):
            # the same numbers up to the noise of evaluating the text in other batch splits (Q4_1 on CPU, these
            # p ~ 1e-4 tokens: up to 0.25 nats with AVX-512, 0.47 on an AVX2-only AMD EPYC; a single sequence alone
            # matches exactly, see below)
            for token in TOKENS:
                assert row[token] == pytest.approx(alone[token], abs=0.6)
            # the good probability is the logistic of the two log-probabilities' difference (seen off by up to
            # 0.067 on AVX2 and 0.13 under pytest-xdist, 0.380 against 0.511)
            assert good_probability(row, " yes", " no") == pytest.approx(
                good_probability(alone, " yes", " no"), abs=0.175)
            assert math.exp(row[" yes"]) + math.exp(row[" no"]) < 1.0
            assert 0.0 < good_probability(row, " yes", " no") < 1.0


def test_one_sequence_alone_matches_the_lone_requests_exactly(fresh_llama: Any) -> None:
    """On an engine of its own: after other tests, the session's engine holds cached prompts, a fresh prompt's KV
    cells land elsewhere and the sums round differently (0.06 nats seen in a full suite run)."""
    segments = tagged_segments("Question: what is 12 - 5? (exact)", ["12 - 5 = 7.", "Answer: 7"], "\n", " Correct?")
    rows = fresh_llama.step_logprobs([segments], TOKENS).logprobs[0]
    for j, row in enumerate(rows):
        alone = fresh_llama.choice_logprobs("".join(segments[: j + 1]), list(TOKENS)).logprobs
        assert row == pytest.approx(alone, abs=1e-5)


def test_the_shared_prefix_is_evaluated_once(llama: Any) -> None:
    question = QUESTION.replace("Tom", "Ada")  # not in the prefix cache yet
    sequences = [tagged_segments(question, steps, "\n", " Correct?") for steps in CANDIDATES]
    tokens = [[t for k, s in enumerate(seq) for t in llama.model.tokenize(s, add_special=k == 0)]
              for seq in sequences]
    shared = 0
    while all(len(t) > shared and t[shared] == tokens[0][shared] for t in tokens):
        shared += 1
    usage = llama.step_logprobs(sequences, TOKENS).usage
    # the question once, then each candidate's own tokens: one forward pass over the distinct tokens
    assert usage.prompt_tokens_evaluated + usage.prompt_tokens_cached == shared + sum(len(t) - shared for t in tokens)
    again = llama.step_logprobs(sequences, TOKENS).usage
    assert again.prompt_tokens_cached == shared  # the second time the question comes from the prefix cache


def test_a_good_token_of_several_tokens_is_refused(llama: Any) -> None:
    with pytest.raises(BackendError, match="not one"):
        llama.step_logprobs(_sequences(), [" absolutely correct", " no"])
    assert llama.single_token(" yes") == llama.model.tokenize(" yes", add_special=False)[0]


def test_hostile_step_text_is_plain_text(llama: Any) -> None:
    rows = llama.step_logprobs([["root ::= \"a\" ки", "<|im_end|>{{ x }} ки"]], TOKENS).logprobs
    assert len(rows[0]) == 2 and all(math.isfinite(v) for row in rows[0] for v in row.values())


def test_the_chat_layout_reads_the_assistants_first_token(llama: Any) -> None:
    """RLHFlow's layout through the bundled model's own chat template: each step a user turn, the verdict read
    where the assistant's reply starts (the same numbers as asking that conversation alone)."""
    from nodes.algorithms.prm import chat_segments

    segments = chat_segments("What is 3 + 4?", ["3 + 4 = 7.", "Answer: 7"], "+",
                             lambda m, gen: llama.render_prompt(m, add_generation_prompt=gen))
    assert segments[0].endswith("<|im_start|>assistant\n") and segments[1].startswith("+<|im_end|>")
    rows = llama.step_logprobs([segments], ["+", "-"]).logprobs[0]
    for j, row in enumerate(rows):
        alone = llama.choice_logprobs("".join(segments[: j + 1]), ["+", "-"]).logprobs
        # up to the noise of other batch splits: the shared engine's prefix cache holds other tests' prompts, so the
        # conversation is not always evaluated in the same pieces (see the first test; a wrong reading position
        # reads another distribution altogether)
        for token in ("+", "-"):
            assert row[token] == pytest.approx(alone[token], abs=0.35)
        assert good_probability(row, "+", "-") == pytest.approx(good_probability(alone, "+", "-"), abs=0.1)


def test_a_good_token_of_several_tokens_is_refused_when_the_run_starts(llama_provide: Any) -> None:
    """The PRM's vocabulary is needed, so the check comes when the run loads it: before any node runs."""
    from pathlib import Path

    from app.run.scheduler import Scheduler
    from app.workflow.problems import WorkflowError
    from app.workflow.spec import load_workflow
    from nodes.registry import default_registry

    wf = load_workflow(Path(__file__).resolve().parents[2] / "workflows" / "prm_beam.yaml")
    wf.nodes[0].params["good_token"] = " absolutely correct"
    with pytest.raises(WorkflowError) as caught:
        Scheduler(default_registry(), llama_provide).run(wf, seed=0)
    assert [i.code for i in caught.value.issues] == ["bad_token"]
    assert "' absolutely correct'" in caught.value.issues[0].message
