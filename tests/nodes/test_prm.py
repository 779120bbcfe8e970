"""Process reward scoring: the pure step functions by hand-computed cases, and the verifier / search `prm` and
`reward_model` methods through the scheduler on the scripted fake backend."""

from __future__ import annotations

import math
from typing import Any

import pytest

from app.run.events import EventRecorder
from app.run.scheduler import FAILED, SUCCEEDED, Scheduler
from app.workflow.problems import WorkflowError
from app.workflow.spec import workflow_from_dict
from app.workflow.validation import validate
from backends.base import RankResult, Usage
from backends.fake import FakeBackend
from nodes.algorithms import prm
from nodes.registry import default_registry

REGISTRY = default_registry()


# ------------------------------------------------------------------ pure functions


def test_split_steps_drops_blank_steps_and_keeps_one_for_an_empty_text() -> None:
    assert prm.split_steps("a = 1\n\n b = 2 \n\n\n\nc", "\n\n") == ["a = 1", "b = 2", "c"]
    assert prm.split_steps("  ", "\n\n") == [""]
    assert prm.split_steps("one step", "\n\n") == ["one step"]


@pytest.mark.parametrize(("how", "expected"), [
    ("last", 0.5), ("min", 0.2), ("prod", 0.9 * 0.2 * 0.5), ("mean", (0.9 + 0.2 + 0.5) / 3),
])
def test_aggregate_by_hand(how: str, expected: float) -> None:
    assert prm.aggregate([0.9, 0.2, 0.5], how) == pytest.approx(expected)


def test_aggregate_refuses_unknown_and_empty() -> None:
    with pytest.raises(ValueError, match="unknown aggregate"):
        prm.aggregate([0.5], "max")
    with pytest.raises(ValueError):
        prm.aggregate([], "last")


def test_good_probability_normalises_the_two_tokens() -> None:
    # p(good) = 0.3, p(bad) = 0.1 -> 0.75, whatever else the vocabulary holds
    assert prm.good_probability({"+": math.log(0.3), "-": math.log(0.1)}, "+", "-") == pytest.approx(0.75)
    assert prm.good_probability({"+": -math.inf, "-": -math.inf}, "+", "-") == 0.5
    assert prm.good_probability({"+": -1000.0, "-": -1.0}, "+", "-") == pytest.approx(0.0)


def test_tagged_segments_follow_math_shepherd() -> None:
    segments = prm.tagged_segments("Q?", ["s1", "s2"], "\n\n", " ки")
    assert segments == ["Q? s1 ки", "\n\ns2 ки"]
    assert "".join(segments) == "Q? s1 ки\n\ns2 ки"


def test_chat_segments_end_where_each_verdict_starts() -> None:
    def render(messages: list[dict[str, str]], gen: bool) -> str:
        text = "".join(f"<{m['role']}>{m['content']}</>" for m in messages)
        return text + ("<assistant>" if gen else "")

    segments = prm.chat_segments("Q?", ["s1", "s2"], "+", render)
    assert segments == ["<user>Q? s1</><assistant>", "+</><user>s2</><assistant>"]


def test_chat_segments_refuse_a_template_that_rewrites_earlier_turns() -> None:
    def render(messages: list[dict[str, str]], gen: bool) -> str:
        return f"{len(messages)} turns: " + "|".join(m["content"] for m in messages)

    with pytest.raises(prm.PrmLayoutError):
        prm.chat_segments("Q?", ["s1", "s2"], "+", render)


# ------------------------------------------------------------------ verifier on the fake backend


def _step_fn(text: str, token: str) -> float:
    """p(+) = 0.8 after a step that contains 'ok', 0.2 otherwise; p(-) the rest."""
    last = text.rsplit("\n\n", 1)[-1]
    good = 0.8 if "ok" in last else 0.2
    return math.log(good if token == "+" else 1.0 - good)


def _workflow(verifier_params: dict[str, Any], replies: list[str] | None = None) -> Any:
    return workflow_from_dict({
        "version": 1, "name": "t", "inputs": {"question": {"type": "text", "default": "What is 3 + 4?"}},
        "nodes": [
            {"id": "s", "kind": "sampler", "params": {"n": 2, "prompt": "{question}"},
             "inputs": {"question": "inputs.question"}},
            {"id": "v", "kind": "verifier", "params": verifier_params,
             "inputs": {"candidates": "s.candidates", "question": "inputs.question"}},
        ],
        "outputs": {"scores": "v.scores", "cands": "v.candidates"},
    })


def _run(wf: Any, backend: FakeBackend) -> tuple[Any, EventRecorder]:
    rec = EventRecorder(skip=("token",))
    scheduler = Scheduler(REGISTRY, lambda spec: backend)
    return scheduler.run(wf, seed=0, observers=[rec]), rec


@pytest.mark.parametrize(("how", "first", "second"), [
    ("last", 0.2, 0.8), ("min", 0.2, 0.2), ("prod", 0.8 * 0.2, 0.2 * 0.8), ("mean", 0.5, 0.5),
])
def test_prm_verifier_scores_every_step_in_one_request(how: str, first: float, second: float) -> None:
    backend = FakeBackend(replies=["ok a\n\nbad b", "bad a\n\nok b"], step_fn=_step_fn)
    result, rec = _run(_workflow({"method": "prm", "aggregate": how}), backend)
    assert result.status == SUCCEEDED, result.error
    assert result.outputs["scores"] == pytest.approx([first, second])
    cands = result.outputs["cands"].candidates
    assert cands[0].step_scores == pytest.approx([0.8, 0.2])
    assert cands[1].step_scores == pytest.approx([0.2, 0.8])
    step_calls = [c for c in backend.calls if c["kind"] == "steps"]
    assert len(step_calls) == 1 and step_calls[0]["n"] == 2  # both candidates, every step: one request
    assert "What is 3 + 4? ok a ки\n\nbad b ки" in step_calls[0]["prompt"]  # Math-Shepherd's tagged layout
    event = next(e.data for e in rec.of_type("node_event") if e.data["kind"] == "score")
    assert event["scores"][0]["step_scores"] == pytest.approx([0.8, 0.2])
    calls = [e.data for e in rec.of_type("lm_call") if e.data["purpose"] == "prm"]
    assert len(calls) == 2 and calls[0]["scored_tokens"] == 2


def test_prm_chat_format_lays_steps_out_as_turns() -> None:
    backend = FakeBackend(replies=["ok a\n\nbad b"], step_fn=_step_fn)
    result, _ = _run(_workflow({"method": "prm", "prm_format": "chat", "aggregate": "min"}), backend)
    assert result.status == SUCCEEDED, result.error
    prompt = next(c["prompt"] for c in backend.calls if c["kind"] == "steps")
    assert "<|user|>\nWhat is 3 + 4? ok a\n<|assistant|>\n+\n<|user|>\nbad b\n<|assistant|>\n" in prompt


def test_a_good_token_not_one_token_of_the_prm_is_refused_before_the_run() -> None:
    backend = FakeBackend(replies=["x"], step_fn=_step_fn)
    with pytest.raises(WorkflowError) as caught:
        _run(_workflow({"method": "prm", "good_token": "very good"}), backend)
    (issue,) = caught.value.issues
    assert issue.code == "bad_token" and issue.node_id == "v" and "not one token" in issue.message and issue.hint
    assert backend.calls == []  # nothing sampled before the refusal


def test_prm_on_a_backend_without_step_scoring_names_the_model() -> None:
    class NoSteps(FakeBackend):
        step_logprobs = None  # type: ignore[assignment]

    backend = NoSteps(replies=["x"])
    result, _ = _run(_workflow({"method": "prm"}), backend)
    assert result.status == FAILED and "cannot read token probabilities" in str(result.error)


@pytest.mark.parametrize(("params", "bad"), [
    ({"method": "prm", "aggregate": "sum"}, "aggregate"),
    ({"method": "likelihood", "aggregate": "prod"}, "aggregate"),
    ({"method": "prm", "good_token": ""}, "good_token"),
    ({"method": "prm", "good_token": "+", "bad_token": "+"}, "bad_token"),
    ({"method": "prm", "step_delimiter": ""}, "step_delimiter"),
    ({"method": "prm", "step_tag": ""}, "step_tag"),
    ({"method": "prm", "prm_format": "xml"}, "prm_format"),
    ({"method": "reward_model", "normalize": "softmax"}, "normalize"),
])
def test_bad_prm_params_are_refused_before_running(params: dict[str, Any], bad: str) -> None:
    issues = [i for i in validate(_workflow(params), REGISTRY) if i.code == "bad_param"]
    assert issues
    assert any(f"'{bad}'" in i.message for i in issues), [i.message for i in issues]
    assert all(i.hint for i in issues)


def test_an_undeclared_prm_model_alias_is_refused() -> None:
    wf = _workflow({"method": "prm", "model": "nope"})
    wf.models = {"main": {"source": "fake"}}
    assert [i.code for i in validate(wf, REGISTRY)] == ["unknown_model"]


def test_prm_model_alias_picks_the_prm() -> None:
    wf = _workflow({"method": "prm", "model": "judge"})
    wf.models = {"main": {"source": "fake"}, "judge": {"source": "fake"}}
    seen: list[str | None] = []
    backend = FakeBackend(replies=["ok a"], step_fn=_step_fn)

    def provide(spec: Any) -> FakeBackend:
        seen.append(spec.source)
        return backend

    result = Scheduler(REGISTRY, provide).run(wf, seed=0)
    assert result.status == SUCCEEDED, result.error
    assert result.outputs["scores"] == pytest.approx([0.8, 0.8])


# ------------------------------------------------------------------ reward_model on the fake backend


REWARD_MODELS = {"main": {"source": "fake"},
                 "rm": {"source": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "rm", "api": "rerank"}}


class _Ranker(FakeBackend):
    """A fake reward model: the raw reward is the number of words of the document."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rank_calls: list[tuple[str, list[str]]] = []

    def rank(self, query: str, documents: list[str], cancel: Any = None) -> RankResult:
        self.rank_calls.append((query, list(documents)))
        return RankResult(scores=[float(len(d.split())) for d in documents], usage=Usage(prompt_tokens=3))


@pytest.mark.parametrize(("normalize", "expected"), [
    ("none", [1.0, 3.0]), ("sigmoid", [1 / (1 + math.exp(-1)), 1 / (1 + math.exp(-3))]),
])
def test_reward_model_scores_all_candidates_in_one_batch(normalize: str, expected: list[float]) -> None:
    backend = _Ranker(replies=["one", "one two three"])
    wf = _workflow({"method": "reward_model", "normalize": normalize, "model": "rm"})
    wf.models = REWARD_MODELS
    result, rec = _run(wf, backend)
    assert result.status == SUCCEEDED, result.error
    assert result.outputs["scores"] == pytest.approx(expected)
    assert backend.rank_calls == [("What is 3 + 4?", ["one", "one two three"])]
    rewards = [e.data["reward"] for e in rec.of_type("lm_call") if e.data["purpose"] == "reward"]
    assert rewards == [1.0, 3.0]


def test_reward_model_on_a_generator_fails_with_the_model_named() -> None:
    wf = _workflow({"method": "reward_model", "model": "rm"})
    wf.models = REWARD_MODELS  # validation sees a reward model; the backend behind it cannot rank
    result, _ = _run(wf, FakeBackend(replies=["x"]))
    assert result.status == FAILED and "cannot score with a reward model" in str(result.error)


# ------------------------------------------------------------------ search with scorer: prm


def test_search_with_prm_scorer_keeps_the_branch_whose_last_step_is_good() -> None:
    def reply(prompt: str, seed: int) -> str:
        if "ok first" in prompt:
            return "ok done Answer: 7"
        if "bad first" in prompt:
            return "bad end Answer: 9"
        return ["ok first\n\n", "bad first\n\n"][seed % 2]  # the step ends at the delimiter

    backend = FakeBackend(reply_fn=reply, step_fn=_step_fn)
    wf = workflow_from_dict({
        "version": 1, "name": "t", "inputs": {"question": {"type": "text", "default": "What is 3 + 4?"}},
        "nodes": [{"id": "tree", "kind": "search", "inputs": {"question": "inputs.question"},
                   "params": {"scorer": "prm", "beam_width": 1, "expand_k": 2, "max_depth": 2}}],
        "outputs": {"answer": "tree.text", "tree": "tree.tree"},
    })
    assert not [i for i in validate(wf, REGISTRY) if i.severity == "error"]
    result, _ = _run(wf, backend)
    assert result.status == SUCCEEDED, result.error
    assert result.outputs["answer"] == "ok first\n\nok done Answer: 7"
    scored = {n["text"]: n["score"] for n in result.outputs["tree"]["nodes"] if n["text"]}
    assert scored["ok first"] == pytest.approx(0.8) and scored["bad first"] == pytest.approx(0.2)
    assert any(c["kind"] == "steps" and c["n"] == 2 for c in backend.calls)  # both children in one request


def test_changing_the_prm_entry_reruns_the_verifier_not_the_cache() -> None:
    backend = FakeBackend(replies=["ok a"], step_fn=_step_fn)
    scheduler = Scheduler(REGISTRY, lambda spec: backend)
    wf = _workflow({"method": "prm", "model": "judge"})
    wf.models = {"main": {"source": "fake"}, "judge": {"source": "fake"}}
    for _ in range(2):
        assert scheduler.run(wf, seed=0).status == SUCCEEDED
    assert sum(c["kind"] == "steps" for c in backend.calls) == 1  # the second run came from the node cache
    wf.models = {"main": {"source": "fake"}, "judge": {"source": "fake", "options": {"variant": 2}}}
    assert scheduler.run(wf, seed=0).status == SUCCEEDED
    assert sum(c["kind"] == "steps" for c in backend.calls) == 2  # another PRM entry: scored again


def test_a_remote_prm_is_refused_at_validation() -> None:
    wf = _workflow({"method": "prm", "model": "remote"})
    wf.models = {"main": {"source": "fake"},
                 "remote": {"source": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "math-shepherd"}}
    assert [i.code for i in validate(wf, REGISTRY)] == ["prm_needs_local_model"]
