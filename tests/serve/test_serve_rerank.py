"""`metagen serve` answers POST /v1/rerank for a local rank model (the tiny random-weight BERT cross-encoder of
tests/backends/rank_gguf.py in its models folder), and a `source: openai` entry with `api: rerank` pointed at it
scores like the local model; rank models are refused on the completion routes and generators on /v1/rerank."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from backends.base import ModelSpec
from backends.llama.worker.rank_backend import RankBackend
from backends.remote.openai_backend import OpenAIBackend
from tests.backends.rank_gguf import write_rank_gguf
from tests.serve.conftest import ServeProcess, start_serve, stop_serve

DOCS = ["7", "8 apples", "seven", "3+4=7", "no idea"]
RANK = "tiny-rank.gguf"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    home = tmp_path_factory.mktemp("serve-rerank")
    (home / "models").mkdir()
    write_rank_gguf(home / "models" / RANK)
    process = start_serve(home, [])
    yield process
    stop_serve(process)


@pytest.fixture(scope="module")
def local(server: ServeProcess) -> Iterator[RankBackend]:
    backend = RankBackend(server.home / "models" / RANK)
    yield backend
    backend.close()


def test_rerank_answers_the_jina_cohere_shape(server: ServeProcess, local: RankBackend) -> None:
    with server.http() as http:
        reply = http.post("/rerank", json={"model": RANK, "query": "what is 3+4?", "documents": DOCS, "top_n": 3})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    expected = local.rank("what is 3+4?", DOCS).scores
    results = body["results"]
    assert len(results) == 3 and [r["relevance_score"] for r in results] == sorted(
        [r["relevance_score"] for r in results], reverse=True)
    for r in results:
        assert r["relevance_score"] == pytest.approx(expected[r["index"]], abs=2e-3)
        assert r["document"]["text"] == DOCS[r["index"]]
    assert body["usage"]["prompt_tokens"] > 0


def test_an_api_rerank_entry_scores_through_metagen_serve(server: ServeProcess, local: RankBackend) -> None:
    remote = OpenAIBackend(ModelSpec(source="openai", base_url=server.base_url, model=RANK, api="rerank"))
    assert remote.rank("what is 3+4?", DOCS).scores == pytest.approx(local.rank("what is 3+4?", DOCS).scores,
                                                                     abs=2e-3)


@pytest.mark.parametrize(("path", "payload"), [
    ("/chat/completions", {"model": RANK, "messages": [{"role": "user", "content": "hi"}]}),
    ("/completions", {"model": RANK, "prompt": "hi"}),
])
def test_a_rank_model_is_refused_on_the_completion_routes(server: ServeProcess, path: str, payload: dict) -> None:
    with server.http() as http:
        reply = http.post(path, json=payload)
    assert reply.status_code == 400 and reply.json()["error"]["code"] == "model_not_supported"
    assert "/v1/rerank" in reply.json()["error"]["message"]


def test_a_generator_and_bad_bodies_are_refused_on_rerank(server: ServeProcess) -> None:
    with server.http() as http:
        generator = http.post("/rerank", json={"model": "bundled", "query": "q", "documents": ["a"]})
        empty = http.post("/rerank", json={"model": RANK, "query": "q", "documents": []})
        not_text = http.post("/rerank", json={"model": RANK, "query": "q", "documents": [1]})
    assert generator.status_code == 400 and generator.json()["error"]["code"] == "model_not_supported"
    assert empty.status_code == 400 and empty.json()["error"]["param"] == "documents"
    assert not_text.status_code == 400

