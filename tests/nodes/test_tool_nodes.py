"""Tool-calling nodes through the scheduler on the scripted fake (which renders tools in llama.cpp's generic JSON
form and is answered with generic-JSON calls): the sampler's tool_calls mode, the tool_schema verifier (method and
kind), the tool_calls voter, the examples, and the samples view of their trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.run.events import EventRecorder
from app.run.scheduler import SUCCEEDED, RunResult, Scheduler
from app.traces.store import TraceStore
from app.viz.samples import samples_html
from app.workflow.spec import load_workflow, workflow_from_dict
from app.workflow.validation import validate
from backends.base import GenerateResult, SamplingParams
from backends.fake import FakeBackend
from backends.tools.types import parse_answer_json
from nodes.registry import default_registry

REGISTRY = default_registry()
WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
QUESTION = "What is the weather like in Paris today, in celsius?"


def calls(*items: tuple[str, dict[str, Any]]) -> str:
    return json.dumps({"tool_calls": [{"name": n, "arguments": a} for n, a in items]})


EIGHT = [
    calls(("get_weather", {"city": "Paris", "unit": "celsius"})),
    calls(("get_weather", {"city": "Lyon"})),
    calls(("get_weather", {"city": "paris"})),  # the same call as the first: unit at its default, case
    calls(("get_forecast", {"city": "Paris"})),  # no such tool: rejected
    calls(("get_weather", {"unit": "celsius", "city": "Paris"})),  # reordered
    calls(("get_weather", {"city": "Lyon"})),
    calls(("get_weather", {"city": "Paris", "country": "FR"})),  # unknown argument: rejected
    '{"response": "I cannot look that up."}',
]
"""A tool_self_consistency run's eight samples: Paris 3, Lyon 2, a text answer 1, two invalid calls."""


class Recording(FakeBackend):
    """The fake, keeping each request's sampling params."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params: list[SamplingParams] = []

    def generate(self, prompt: Any, params: SamplingParams, *args: Any, **kwargs: Any) -> GenerateResult:
        self.params.append(params)
        return super().generate(prompt, params, *args, **kwargs)


def run(wf: Any, backend: FakeBackend, inputs: dict[str, Any] | None = None,
        store: TraceStore | None = None) -> RunResult:
    observers: list[Any] = [EventRecorder(skip=("token",))] + ([store] if store is not None else [])
    result = Scheduler(REGISTRY, lambda spec: backend).run(wf, inputs=inputs or {}, seed=0, observers=observers)
    assert result.status == SUCCEEDED, result.error
    return result


def example(name: str) -> Any:
    return load_workflow(WORKFLOWS / f"{name}.yaml")


def test_self_consistency_votes_over_canonical_calls_and_drops_invalid_ones(tmp_path: Path) -> None:
    backend = Recording(replies=EIGHT)
    store = TraceStore(tmp_path / "traces.db")
    try:
        result = run(example("tool_self_consistency"), backend, store=store)
        assert store.flush()
        record = store.get_run(result.run_id)
    finally:
        store.close()
    answer = parse_answer_json(result.outputs["answer"])
    assert answer is not None and [(c.name, c.arguments) for c in answer.calls] == \
        [("get_weather", {"city": "Paris", "unit": "celsius"})]
    votes = result.outputs["votes"]
    assert [(cl["answer"], cl["members"]) for cl in votes["clusters"]] == [
        ('get_weather(city="paris")', [0, 2, 4]), ('get_weather(city="lyon")', [1, 5]), ("(no call)", [7])]
    assert votes["no_answer"] == [3, 6] and votes["detail"]["rejected"] == [3, 6]
    schema = result.node_outputs["schema"]["candidates"].candidates
    assert [c.score for c in schema] == [1, 1, 1, 0, 1, 1, 0, 1]
    assert "get_forecast: no such tool" in schema[3].meta["tool_schema"]["reason"]
    assert "unknown argument 'country'" in schema[6].meta["tool_schema"]["reason"]
    # one request of n = 8, its prompt the generic form with the tool and the question
    (prompt,) = [c["prompt"] for c in backend.calls if c["kind"] == "generate"]
    assert '"name": "get_weather"' in prompt and QUESTION in prompt and "tool_calls" in prompt
    assert backend.params[0].grammar is None
    html = samples_html(record, "schema")
    assert 'get_weather(city=&quot;Paris&quot;, unit=&quot;celsius&quot;)' in html
    assert "no such tool" in html and "<th>schema</th>" in html and '{&quot;content' not in html
    assert 'get_weather(city=&quot;paris&quot;)' in samples_html(record, "vote")


def test_the_conversation_and_the_tool_choice_come_from_the_inputs() -> None:
    backend = Recording(replies=[calls(("get_weather", {"city": "Oslo"}))])
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "And in Oslo?"}]
    result = run(example("tool_self_consistency"), backend,
                 {"messages": messages, "tool_choice": json.dumps({"type": "function",
                                                                    "function": {"name": "get_weather"}})})
    prompt = backend.calls[0]["prompt"]
    assert "And in Oslo?" in prompt and "Be brief." in prompt and QUESTION not in prompt
    assert "calling the tool `get_weather`" in prompt
    assert result.outputs["votes"]["clusters"][0]["answer"] == 'get_weather(city="oslo")'
    meta = result.node_outputs["sample"]["candidates"].meta["tool_request"]
    assert meta["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}


def test_tool_choice_none_answers_text_and_rejects_nothing_but_calls() -> None:
    backend = Recording(replies=["It is sunny, I think."])
    result = run(example("tool_self_consistency"), backend, {"tool_choice": '"none"'})
    assert "You can call" not in backend.calls[0]["prompt"]  # no tools in play: not even shown
    answer = parse_answer_json(result.outputs["answer"])
    assert answer is not None and answer.calls == () and answer.content == "It is sunny, I think."


def test_required_choice_rejects_text_answers() -> None:
    backend = Recording(replies=['{"response": "no"}', calls(("get_weather", {"city": "Rome"}))])
    result = run(example("tool_self_consistency"), backend, {"tool_choice": '"required"'})
    schema = result.node_outputs["schema"]["candidates"].candidates
    assert [c.score for c in schema] == [0, 1] * 4
    assert "at least one call" in schema[0].meta["tool_schema"]["reason"]
    assert result.outputs["votes"]["clusters"][0]["answer"] == 'get_weather(city="rome")'


def test_constrained_sampling_sends_the_tools_grammar() -> None:
    wf = example("tool_greedy").to_dict()
    wf["nodes"][0]["params"]["constrained"] = True
    backend = Recording(replies=[calls(("get_weather", {"city": "Paris"}))])
    result = run(workflow_from_dict(wf), backend)
    grammar = backend.params[0].grammar
    assert grammar is not None and "tool_calls" in grammar and "get_weather" in grammar and "response" in grammar
    assert parse_answer_json(result.outputs["answer"]).calls[0].arguments == {"city": "Paris"}  # type: ignore[union-attr]


def test_best_of_n_never_picks_an_invalid_call() -> None:
    book = {"restaurant": "Luigi's", "people": 2, "time": "20:00"}
    samples = [calls(("book_table", {**book, "people": "two"})), calls(("book_table", {**book, "time": 8})),
               calls(("book_table", book))] * 2
    backend = Recording(replies=samples, choice_scores={" Yes": -0.1, " No": -3.0, "Yes": -0.1, "No": -3.0})
    result = run(example("tool_best_of_n"), backend)
    schema = result.node_outputs["schema"]["candidates"].candidates
    assert [c.score for c in schema] == [0, 0, 1] * 2  # "two" and 8 are no integer and no string
    best = parse_answer_json(result.outputs["answer"])
    assert best is not None and best.calls[0].arguments == book
    judge_prompts = [c["prompt"] for c in backend.calls if c["kind"] == "choice"]
    # three distinct candidates (each drawn twice: the judge's second verdicts come from the sample cache)
    assert len(judge_prompts) == 3 and all("\nbook_table(people=" in p and '"tool_calls"' not in p
                                           for p in judge_prompts)


def test_tool_calls_needs_a_tools_input_and_chat_mode() -> None:
    wf = workflow_from_dict({
        "version": 1, "name": "t", "inputs": {"question": {"type": "text", "default": "hi"}},
        "nodes": [{"id": "s", "kind": "sampler", "params": {"prompt": "{question}", "tool_calls": True,
                                                             "mode": "raw", "adaptive": "majority",
                                                             "extract": "last_number"},
                   "inputs": {"question": "inputs.question"}}],
        "outputs": {"c": "s.candidates"}})
    messages = " | ".join(i.message for i in validate(wf, REGISTRY))
    assert "tools" in messages and "mode: chat" in messages and "adaptive: off" in messages


@pytest.mark.parametrize("name", ["tool_greedy", "tool_self_consistency", "tool_best_of_n"])
def test_the_examples_validate_and_run_on_the_plain_fake(name: str) -> None:
    wf = example(name)
    assert [i for i in validate(wf, REGISTRY) if i.severity == "error"] == []
    result = run(wf, FakeBackend())
    assert parse_answer_json(next(iter(result.outputs.values()))) is not None


def test_the_tool_schema_kind_checks_against_wired_tools() -> None:
    wf = example("tool_self_consistency").to_dict()
    wf["inputs"]["other_tools"] = {"type": "json", "default": [
        {"type": "function", "function": {"name": "get_forecast", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]}
    wf["nodes"][1] = {"id": "schema", "kind": "tool_schema",
                      "inputs": {"candidates": "sample.candidates", "tools": "inputs.other_tools"}}
    wf["layout"]["inputs.other_tools"] = [40, 440]
    result = run(workflow_from_dict(wf), Recording(replies=EIGHT))
    schema = result.node_outputs["schema"]["candidates"].candidates
    assert [c.score for c in schema] == [0, 0, 0, 1, 0, 0, 0, 1]  # only get_forecast exists now
    assert result.outputs["votes"]["clusters"][0]["answer"] == 'get_forecast(city="paris")'
