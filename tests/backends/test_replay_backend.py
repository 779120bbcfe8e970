"""The recording wrapper and ReplayBackend on the scripted fake: every call answered again from its JSON record,
samples found per seed, only the calls not recorded sent to the fallback model, and misses that say what changed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backends.base import ModelSpec, SamplingParams
from backends.beam_search import BeamSettings
from backends.fake import FakeBackend
from backends.replay.backend import ReplayBackend, ReplayCounts, ReplayMissError, ReplayTable
from backends.replay.calls import RecordingBackend, model_ref

SPEC = ModelSpec(source="fake")
REF = model_ref(SPEC)
PARAMS = SamplingParams(max_tokens=12, temperature=0.7, logprobs=2, token_stats=True, stop=("\n\n",))


class Counting:
    """A fake that counts the samples it is asked for (the 'model' of a replay with a fallback)."""

    def __init__(self) -> None:
        self.backend = FakeBackend(reply_fn=lambda prompt, seed: f"reply {seed % 5} to {prompt[-12:]}")
        self.samples: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def generate(self, prompt: Any, params: SamplingParams, n: int = 1, seeds: Any = None, **kw: Any) -> Any:
        self.samples.extend(seeds or [])
        return self.backend.generate(prompt, params, n=n, seeds=seeds, **kw)


def _record(calls: Any) -> tuple[list[dict[str, Any]], Counting]:
    """Run `calls(backend)` on a recording wrapper around a fake; the entries as they come back from JSON."""
    model = Counting()
    entries: list[dict[str, Any]] = []
    recording = RecordingBackend(model, REF, lambda node, entry: entries.append(entry)).for_node("think")
    calls(recording)
    return json.loads(json.dumps(entries)), model


def _replay(entries: list[dict[str, Any]], fallback: Any = None, node: str = "think") -> ReplayBackend:
    table = ReplayTable(entries, {REF: {"model_id": "fake-model"}})
    return ReplayBackend(table, REF, ReplayCounts(), fallback).for_node(node)


def test_every_method_answers_as_recorded() -> None:
    messages = [{"role": "user", "content": "What is 2 + 2?"}]
    got: dict[str, Any] = {}

    def calls(b: Any) -> None:
        got["generate"] = b.generate(messages, PARAMS, n=3, seeds=[7, 8, 9])
        got["score"] = b.score("2 + 2 =", [" 4", " 5"])
        got["choice"] = b.choice_logprobs("Is it right?", [" yes", " no"])
        got["steps"] = b.step_logprobs([["Q: 1+1", " step 1", " step 2"]], ["+", "-"])
        got["beam"] = b.beam_search("Count:", SamplingParams(max_tokens=4), BeamSettings(n=2, max_tokens=4))
        got["render"] = b.render_prompt(messages)
        got["tokens"] = b.tokenize("one two three")

    entries, _ = _record(calls)
    replay = _replay(entries)
    assert replay.generate(messages, PARAMS, n=3, seeds=[7, 8, 9]) == got["generate"]
    assert replay.score("2 + 2 =", [" 4", " 5"]) == got["score"]
    assert replay.choice_logprobs("Is it right?", [" yes", " no"]) == got["choice"]
    assert replay.step_logprobs([["Q: 1+1", " step 1", " step 2"]], ["+", "-"]) == got["steps"]
    beam = replay.beam_search("Count:", SamplingParams(max_tokens=4), BeamSettings(n=2, max_tokens=4))
    assert beam == got["beam"]
    assert replay.render_prompt(messages) == got["render"]
    assert replay.tokenize("one two three") == got["tokens"]
    assert replay.model_id == "fake-model"
    assert replay.counts.to_json() == {"replayed": 3 + 2 + 1 + 1 + 2, "model": 0}


def test_samples_are_found_per_seed_and_only_new_ones_drawn() -> None:
    entries, _ = _record(lambda b: b.generate("Think.", PARAMS, n=4, seeds=[10, 11, 12, 13]))
    model = Counting()
    replay = _replay(entries, fallback=lambda: model)
    original = FakeBackend(reply_fn=lambda prompt, seed: f"reply {seed % 5} to {prompt[-12:]}")
    result = replay.generate("Think.", PARAMS, n=3, seeds=[12, 13, 14])  # two recorded, one new
    assert model.samples == [14]
    expected = original.generate("Think.", PARAMS, n=3, seeds=[12, 13, 14]).completions
    assert [c.text for c in result.completions] == [c.text for c in expected]
    assert replay.counts.to_json() == {"replayed": 2, "model": 1}


def test_a_changed_request_misses_and_says_what_changed() -> None:
    entries, _ = _record(lambda b: b.generate("Think step by step.", PARAMS, n=2, seeds=[1, 2]))
    replay = _replay(entries)
    with pytest.raises(ReplayMissError) as prompt_changed:
        replay.generate("Think carefully.", PARAMS, n=2, seeds=[1, 2])
    message = str(prompt_changed.value)
    assert "node 'think'" in message and "changed prompt" in message and "Think carefully" in message
    with pytest.raises(ReplayMissError) as hotter:
        replay.generate("Think step by step.", SamplingParams(**{**PARAMS.__dict__, "temperature": 0.9}), n=2,
                        seeds=[1, 2])
    assert "temperature 0.7 → 0.9" in str(hotter.value)
    with pytest.raises(ReplayMissError) as new_seeds:
        replay.generate("Think step by step.", PARAMS, n=3, seeds=[1, 2, 3])
    assert "seeds never drawn ([3]" in str(new_seeds.value)
    with pytest.raises(ReplayMissError) as other_node:
        _replay(entries, node="judge").score("x", ["y"])
    assert "node 'judge' made no model call when recorded" in str(other_node.value)


def test_another_model_entry_misses() -> None:
    entries, _ = _record(lambda b: b.generate("Hi.", PARAMS, n=1, seeds=[5]))
    other = model_ref(ModelSpec(source="fake", n_ctx=2048))
    table = ReplayTable(entries, {})
    with pytest.raises(ReplayMissError, match="another model entry"):
        ReplayBackend(table, other, ReplayCounts()).for_node("think").generate("Hi.", PARAMS, n=1, seeds=[5])


def test_cached_samples_are_recorded_as_samples() -> None:
    model = Counting()
    entries: list[dict[str, Any]] = []
    recording = RecordingBackend(model, REF, lambda node, entry: entries.append(entry)).for_node("think")
    drawn = model.backend.generate("Hi.", PARAMS, n=2, seeds=[3, 4])
    recording.note_cached("Hi.", PARAMS, [3, 4], drawn.completions, drawn.prompt_text)
    replay = _replay(json.loads(json.dumps(entries)))
    assert replay.generate("Hi.", PARAMS, n=2, seeds=[3, 4]).completions == drawn.completions
    assert model.samples == []


def test_cached_scores_and_judge_answers_are_recorded() -> None:
    model = Counting()
    entries: list[dict[str, Any]] = []
    recording = RecordingBackend(model, REF, lambda node, entry: entries.append(entry)).for_node("judge")
    scored = model.backend.score("2 + 2 =", [" 4", " 5"])
    judged = model.backend.choice_logprobs("Right?", [" yes", " no"])
    recording.note_cached_call("score", ("2 + 2 =", [" 4", " 5"]), scored)
    recording.note_cached_call("choice_logprobs", ("Right?", [" yes", " no"]), judged)
    replay = _replay(json.loads(json.dumps(entries)), node="judge")
    assert replay.score("2 + 2 =", [" 5"]).scores == scored.scores[1:]
    assert replay.choice_logprobs("Right?", [" yes", " no"]).logprobs == judged.logprobs
    assert replay.counts.to_json() == {"replayed": 2, "model": 0}


def test_a_model_that_cannot_load_is_a_miss_that_says_so() -> None:
    from backends.base import ModelFileError

    def missing() -> Any:
        raise ModelFileError("model file /nowhere.gguf is missing")

    entries, _ = _record(lambda b: b.generate("Hi.", PARAMS, n=1, seeds=[5]))
    with pytest.raises(ReplayMissError) as caught:
        _replay(entries, fallback=missing).generate("Hello.", PARAMS, n=1, seeds=[5])
    assert "changed prompt" in str(caught.value) and "the model cannot be used (model file /nowhere.gguf" in str(
        caught.value)
