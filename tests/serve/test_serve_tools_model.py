"""Tool calling through a real `metagen serve` (issue 49): the bundled SmolLM2 answers a required tool choice with a
schema-valid call on chat completions (openai SDK) and streamed on the Messages door (anthropic SDK), and Gemma 3
270M from the models folder is loaded with its 32k training context, so an agent's 20k-token prompt fits and a
longer one is refused in Anthropic's words before any decoding. Generations are kept short."""

from __future__ import annotations

import json
import os
from typing import Any

import anthropic
import pytest

from tests.second_model import GEMMA_FILE, gemma_model_path
from tests.serve.conftest import API_KEY, ServeProcess

pytestmark = pytest.mark.model

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.fixture(scope="module")
def real(serve_factory: Any) -> ServeProcess:
    server: ServeProcess = serve_factory(api_key=API_KEY)
    models = server.home / "models"
    models.mkdir(exist_ok=True)
    os.symlink(gemma_model_path(), models / GEMMA_FILE)  # the folder is scanned on each request
    return server


def _anthropic(server: ServeProcess) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url.removesuffix("/v1"), api_key=API_KEY, max_retries=0,
                               timeout=300)


def test_the_bundled_model_calls_the_required_tool_on_chat(real: ServeProcess) -> None:
    completion = real.client().chat.completions.create(
        model=MODEL_FILE, max_tokens=64, seed=1, tool_choice="required",
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[{"type": "function", "function": {"name": "get_weather", "description": "Current weather of a city.",
                                                 "parameters": WEATHER}}])
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "get_weather" and isinstance(json.loads(call.function.arguments)["city"], str)


def test_the_bundled_model_streams_a_tool_use_on_messages(real: ServeProcess) -> None:
    with _anthropic(real).messages.stream(
            model="claude-sonnet-4-5", max_tokens=32000, tool_choice={"type": "any"},
            messages=[{"role": "user", "content": "What is the weather in Paris?"}],
            tools=[{"name": "get_weather", "description": "Current weather of a city.",
                    "input_schema": WEATHER}]) as stream:
        message = stream.get_final_message()
    uses = [b for b in message.content if b.type == "tool_use"]
    assert message.stop_reason == "tool_use" and uses and uses[0].name == "get_weather"
    assert isinstance(uses[0].input["city"], str) and message.model == MODEL_FILE  # type: ignore[index]


def test_gemma_takes_an_agents_prompt_and_refuses_a_longer_one(real: ServeProcess) -> None:
    client = _anthropic(real)
    agent_prompt = [{"role": "user", "content": "word " * 20_000}]
    counted = client.messages.count_tokens(model=GEMMA_FILE, messages=agent_prompt)  # type: ignore[arg-type]
    assert counted.input_tokens > 20_000
    with pytest.raises(anthropic.BadRequestError) as too_long:
        client.messages.create(model=GEMMA_FILE, max_tokens=16,
                               messages=[{"role": "user", "content": "word " * 40_000}])
    message = too_long.value.body["error"]["message"]
    assert message.startswith("prompt is too long: ") and message.endswith(" tokens > 32768 maximum"), message


@pytest.mark.parametrize("model", [MODEL_FILE, GEMMA_FILE])
def test_an_agents_next_turn_reuses_the_previous_prompt_from_the_kv_cache(real: ServeProcess, model: str) -> None:
    """The second turn (the first + the assistant's call + the tool's result) renders the first turn's prompt as its
    prefix, so the engine's prefix cache covers it (the chat template rendering is prefix-stable)."""
    client = real.client()
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather of a city.",
                                               "parameters": WEATHER}}]
    turns: list[Any] = [{"role": "system", "content": "You are a helpful agent."},
                        {"role": "user", "content": "What is the weather in Paris?"}]

    def turn() -> Any:
        return client.chat.completions.create(model=model, messages=turns, tools=tools, tool_choice="required",
                                              parallel_tool_calls=False, max_tokens=64, seed=1)

    first = turn()
    (call,) = first.choices[0].message.tool_calls or []
    turns += [first.choices[0].message.model_dump(exclude_none=True),
              {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21C"}]
    second = turn()
    assert first.usage is not None and second.usage is not None
    cached = second.usage.prompt_tokens_details.cached_tokens if second.usage.prompt_tokens_details else 0
    assert second.usage.prompt_tokens > first.usage.prompt_tokens
    assert cached is not None and first.usage.prompt_tokens - 4 <= cached <= second.usage.prompt_tokens, \
        (first.usage, second.usage)
