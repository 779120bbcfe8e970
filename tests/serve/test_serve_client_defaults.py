"""Workflow models take what common clients send on every request (issue 24, item 4): `stop` and `top_p` set on
the node that makes the answer where its kind has them, else ignored with an x-metagen-warning header;
`logprobs: false` passes. Driven by the openai SDK and by LangChain's ChatOpenAI against `metagen serve`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.serve.access import check_access
from app.serve.catalog import find_model
from app.serve.config import studio_config
from app.serve.errors import ApiError
from app.serve.params import parse_chat
from app.serve.workflow_request import WARNING_HEADER, prepare
from app.service.studio import StudioService
from tests.serve.conftest import ServeProcess
from tests.serve.test_serve_workflow_request import ROOT, _request

QUESTION = [{"role": "user", "content": "What is 6 times 7?"}]


@pytest.fixture
def service(tmp_path: Path) -> Any:
    studio = StudioService(workflows_dir=tmp_path / "wf", examples_dir=ROOT / "workflows", dry_run=True,
                           trace_db=tmp_path / "t.db", models_dir=tmp_path / "models")
    yield studio
    studio.close()


def _prepare(service: StudioService, name: str, **body: Any) -> Any:
    caller = check_access(_request(), studio_config(service), service.policy)
    req = parse_chat({"model": name, "messages": QUESTION, **body})
    return prepare(service, caller, find_model(service, caller.policy, name), req)


def test_stop_and_top_p_go_onto_the_generator_that_makes_the_answer(service: StudioService) -> None:
    prepared = _prepare(service, "chain_of_thought", stop=["\n\n"], top_p=0.9, logprobs=False)
    answer = prepared.wf.node(prepared.graded.node_id)
    assert (answer.params["stop"], answer.params["top_p"]) == (["\n\n"], 0.9)
    others = [n for n in prepared.wf.nodes if n.id != answer.id]
    assert all("top_p" not in (n.params or {}) for n in others)
    assert prepared.overrides["stop"] == [answer.id] and prepared.warnings == [] and prepared.headers() == {}


def test_a_voter_answer_ignores_them_with_a_warning(service: StudioService) -> None:
    prepared = _prepare(service, "self_consistency", stop="\n", top_p=0.5)
    assert [w.split(" ")[0] for w in prepared.warnings] == ["stop", "top_p"]
    assert "node 'vote' (voter)" in prepared.warnings[0]
    assert all("top_p" not in (n.params or {}) for n in prepared.wf.nodes)
    assert WARNING_HEADER in prepared.headers()


def test_logprobs_true_and_response_format_stay_refused(service: StudioService) -> None:
    for body, param in (({"logprobs": True}, "logprobs"),
                        ({"response_format": {"type": "json_object"}}, "response_format")):
        with pytest.raises(ApiError) as info:
            _prepare(service, "chain_of_thought", **body)
        assert (info.value.status, info.value.param, info.value.code) == (400, param, "unsupported_parameter")


@pytest.fixture(scope="module")
def dry(serve_factory: Any) -> ServeProcess:
    return serve_factory("--dry-run")


def test_the_openai_sdk_with_stop_top_p_and_logprobs_false(dry: ServeProcess) -> None:
    client = dry.client()
    answer = client.chat.completions.create(model="chain_of_thought", messages=QUESTION, stop=["\n\n"], top_p=0.9,
                                            logprobs=False)
    assert answer.choices[0].message.content
    raw = client.chat.completions.with_raw_response.create(model="self_consistency", messages=QUESTION, top_p=0.9)
    assert "top_p ignored" in raw.headers[WARNING_HEADER] and raw.parse().choices[0].message.content
    chunks = list(client.chat.completions.create(model="story", messages=QUESTION, stream=True, stop=["zzz"],
                                                 top_p=0.8, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_langchain_chat_openai_invokes_and_streams_a_workflow(dry: ServeProcess) -> None:
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(model="chain_of_thought", base_url=dry.base_url, api_key="unused", max_retries=0,
                      temperature=0.7, top_p=0.9, timeout=120)
    reply = chat.invoke("What is 6 times 7?", stop=["\n\nQ:"])
    assert isinstance(reply.content, str) and reply.content
    streamed = "".join(str(part.content) for part in chat.stream("What is 6 times 7?"))
    assert streamed
    assert chat.bind(logprobs=False).invoke("What is 6 times 7?").content
