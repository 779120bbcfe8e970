"""A real `metagen serve` on the bundled model behind its Responses and Messages doors, each called by its own
client: the openai SDK's `responses.create` (plain, streamed, a conversation continued after a restart), an
openai-agents Agent whose model is a served workflow, and the anthropic SDK's `messages.create` (plain and
streamed). Generations are kept short."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from tests.fresh_loop import run_fresh
from tests.serve.conftest import API_KEY, ServeProcess, start_serve, stop_serve

pytestmark = pytest.mark.model

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
QUESTION = "What is 3 + 4?"


@pytest.fixture(scope="module")
def real(serve_factory: Any) -> ServeProcess:
    return serve_factory(api_key=API_KEY)


def _anthropic(server: ServeProcess) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url.removesuffix("/v1"), api_key=API_KEY, max_retries=0,
                               timeout=300)


def test_responses_create_runs_a_workflow(real: ServeProcess) -> None:
    response = real.client().responses.create(model="chain_of_thought", input=QUESTION, max_output_tokens=16,
                                              extra_body={"seed": 1})
    meta = response.model_dump()["metagen"]
    assert response.status == "completed" and response.output_text == meta["outputs"][0]["answer"]
    assert meta["overrides"]["max_tokens"] == ["think", "answer"]
    assert meta["stats"][0]["lm_calls"] == 2 and response.usage.output_tokens == meta["stats"][0][
        "completion_tokens"]
    assert {r["id"]: r["status"] for r in real.traces()}[meta["run_id"]] == "succeeded"


def test_responses_stream_a_workflows_tokens(real: ServeProcess) -> None:
    events = list(real.client().responses.create(model="story", input="Write one sentence about a cat.",
                                                 max_output_tokens=24, stream=True))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    final = events[-1]
    assert events[0].type == "response.created" and final.type == "response.completed"
    assert len(deltas) > 3 and "".join(deltas) == final.response.output_text
    assert final.response.usage.output_tokens == final.response.model_dump()["metagen"]["stats"][0][
        "completion_tokens"]


def test_a_conversation_continues_after_a_restart(tmp_path: Path) -> None:
    server = start_serve(tmp_path / "home", [], API_KEY)
    try:
        first = server.client().responses.create(model=MODEL_FILE, input="My cat is called Tom.",
                                                 instructions="Answer in one short sentence.", max_output_tokens=12,
                                                 temperature=0)
    finally:
        stop_serve(server)
    server = start_serve(tmp_path / "home", [], API_KEY)
    try:
        second = server.client().responses.create(model=MODEL_FILE, input="What is my cat called?",
                                                  previous_response_id=first.id, max_output_tokens=12, temperature=0)
    finally:
        stop_serve(server)
    assert first.output_text and second.output_text and second.previous_response_id == first.id
    # the earlier turn (question and answer) is part of the second prompt
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens


def test_an_openai_agents_agent_runs_a_served_workflow(real: ServeProcess) -> None:
    from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, set_tracing_disabled

    set_tracing_disabled(True)  # nothing leaves this machine

    async def run() -> Any:
        client = openai.AsyncOpenAI(base_url=real.base_url, api_key=API_KEY, max_retries=0, timeout=300)
        try:
            agent = Agent(name="calculator", instructions="Answer with a number.",
                          model=OpenAIResponsesModel(model="chain_of_thought", openai_client=client),
                          model_settings=ModelSettings(max_tokens=16))
            return await Runner.run(agent, QUESTION)
        finally:
            await client.close()

    result = run_fresh(run)
    stored = real.client().responses.retrieve(result.raw_responses[-1].response_id)
    assert result.final_output == stored.output_text and stored.output_text
    assert stored.model_dump()["metagen"]["status"] == ["succeeded"]


def test_anthropic_messages_create_plain_and_streamed(real: ServeProcess) -> None:
    client = _anthropic(real)
    message = client.messages.create(model="chain_of_thought", max_tokens=16,
                                     messages=[{"role": "user", "content": QUESTION}])
    meta = message.model_dump()["metagen"]
    assert meta["overrides"]["max_tokens"] == ["think"]  # a cap: the answer node's 16 stays as it is
    assert message.content[0].text == meta["outputs"][0]["answer"] and message.stop_reason == "end_turn"
    assert message.usage.output_tokens == meta["stats"][0]["completion_tokens"]
    events = list(client.messages.create(model=MODEL_FILE, max_tokens=16, stream=True,
                                         messages=[{"role": "user", "content": "Write one sentence about a cat."}]))
    pieces = [e.delta.text for e in events if e.type == "content_block_delta"]
    assert [events[0].type, events[1].type] == ["message_start", "content_block_start"] and len(pieces) > 3
    assert [e.type for e in events[-3:]] == ["content_block_stop", "message_delta", "message_stop"]
    final = events[-2]
    assert final.delta.stop_reason in ("end_turn", "max_tokens") and 0 < final.usage.output_tokens <= 16
    assert final.usage.input_tokens + (final.usage.cache_read_input_tokens or 0) > 0  # a cached prompt reads
