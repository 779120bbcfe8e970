"""The remote backend against Metagen's own `metagen serve` (a real process): server-side n, logprobs, JSON schemas
through response_format, judges from top logprobs; scoring and GBNF grammars fail with messages naming the limit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.run.scheduler import Scheduler
from app.run.status import FAILED, SUCCEEDED
from backends.base import BackendError, CancelToken, ModelSpec, SamplingParams
from backends.remote.openai_backend import OpenAIBackend
from nodes.registry import default_registry
from tests.remote.test_remote_workflows import LIKELIHOOD, ROOT, SCORE_MESSAGE, remote_workflow
from tests.serve.conftest import ServeProcess, start_serve, stop_serve

pytestmark = pytest.mark.model

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    server = start_serve(tmp_path_factory.mktemp("metagen-serve"), [])
    yield server
    stop_serve(server)


@pytest.fixture(scope="module")
def remote(serve: ServeProcess) -> Iterator[OpenAIBackend]:
    backend = OpenAIBackend(ModelSpec(source="openai", base_url=serve.base_url, model="bundled", timeout_s=120))
    yield backend
    backend.close()


def test_the_probe_finds_what_metagen_serve_does(remote: OpenAIBackend) -> None:
    caps = remote.caps
    assert caps.kind == "metagen"
    assert (caps.completions, caps.chat, caps.n) == (True, True, True)
    assert caps.logprobs and caps.top_logprobs and caps.chat_logprobs
    assert (caps.echo, caps.grammar, caps.json_schema) == ("no", None, "response_format")
    assert (caps.stream, caps.stream_usage) == (True, True)
    assert caps.score_method is None
    assert "best_of_n" in caps.models  # workflows are models there too


def test_server_side_n_evaluates_the_prompt_once(remote: OpenAIBackend) -> None:
    seen: list[tuple[int, str]] = []
    result = remote.generate(QUESTION, SamplingParams(max_tokens=8, temperature=1.0, seed=11), n=4,
                             on_token=lambda i, t: seen.append((i, t)), cancel=CancelToken())
    assert [c.seed for c in result.completions] == [11, 12, 13, 14]
    for i, c in enumerate(result.completions):  # streamed, one choice index per sample
        assert "".join(t for j, t in seen if j == i) == c.text
    usage = result.usage  # one request: the prompt is evaluated once (four requests would count it four times)
    assert usage.prompt_tokens > 5 and usage.prompt_tokens_evaluated + usage.prompt_tokens_cached == usage.prompt_tokens
    assert usage.completion_tokens == sum(c.completion_tokens for c in result.completions) == 32


def test_logprobs_come_back_with_their_alternatives(remote: OpenAIBackend) -> None:
    seen: set[int] = set()
    result = remote.generate(QUESTION, SamplingParams(max_tokens=8, temperature=1.0, seed=11, logprobs=2), n=2,
                             on_token=lambda i, t: seen.add(i), cancel=CancelToken())
    assert seen == {0, 1}  # its stream carries no logprobs: not streamed, each text arrives whole
    for c in result.completions:
        assert c.logprobs and all(len(lp.top) == 2 for lp in c.logprobs)
        assert "".join(lp.token for lp in c.logprobs) == c.text


def test_json_schema_goes_through_response_format(remote: OpenAIBackend) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}},
              "required": ["city"]}
    result = remote.generate(QUESTION, SamplingParams(max_tokens=24, temperature=0, json_schema=json.dumps(schema)))
    assert json.loads(result.completions[0].text)["city"] in ("Paris", "Rome")
    with pytest.raises(BackendError, match=r"takes no GBNF grammar; it does take a JSON schema"):
        remote.generate("x", SamplingParams(max_tokens=2, grammar='root ::= "a"'))


def test_judges_work_and_scoring_names_the_servers_that_can(remote: OpenAIBackend) -> None:
    judged = remote.choice_logprobs([{"role": "user", "content": "Is Paris in France? Reply Yes or No."}],
                                    ["Yes", "No"])
    assert set(judged.logprobs) == {"Yes", "No"} and all(v < 0 for v in judged.logprobs.values())
    raw = remote.choice_logprobs("Is Paris in France? Answer:", [" Yes", " No"])
    assert set(raw.logprobs) == {" Yes", " No"}
    with pytest.raises(BackendError) as caught:
        remote.score("The capital of France is", [" Paris"])
    assert SCORE_MESSAGE in str(caught.value) and "vLLM" in str(caught.value)


def test_workflows_judge_there_and_likelihood_fails_with_the_documented_message(llama_provide: Any,
                                                                                serve: ServeProcess) -> None:
    entry = {"source": "openai", "base_url": serve.base_url, "model": "bundled", "timeout_s": 120}
    scheduler = Scheduler(default_registry(), llama_provide)
    best = remote_workflow((ROOT / "workflows" / "best_of_n.yaml").read_text(encoding="utf-8"), entry)
    result = scheduler.run(best, seed=2)
    assert result.status == SUCCEEDED, result.error
    scored = scheduler.run(remote_workflow(LIKELIHOOD, entry), seed=2)
    assert scored.status == FAILED and SCORE_MESSAGE in (scored.error or "")
    assert Path(serve.log_path).exists()
