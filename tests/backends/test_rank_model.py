"""Reward models with a real rank head: a tiny BERT cross-encoder GGUF written by the test (tests/backends/
rank_gguf.py, random weights, the `gguf` package) loaded by llama.cpp with rank pooling.

What this proves: the plumbing is real — llama.cpp accepts the file as a rank model, the pairs are laid out and
packed into batches (several pairs per llama_decode, more pairs than sequences), each pair gets its own score
back in order, batching does not change a score, the verifier's `method: reward_model` reads them (sigmoid or
raw), and rank models and generators are refused in each other's place with codes. What it cannot prove: that
the scores mean anything (the weights are random), nor that a particular real reranker converts and loads (a
bge-reranker or Qwen3-Reranker GGUF is the check for that)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from app.run.scheduler import SUCCEEDED, Scheduler
from app.workflow.spec import workflow_from_dict
from app.workflow.validation import validate
from backends.base import BackendError, ModelFileError, ModelSpec, SamplingParams
from backends.llama.models.bundled import bundled_model_path
from backends.llama.worker.rank_backend import RankBackend, is_rank_model
from nodes.registry import default_registry
from tests.backends.rank_gguf import write_rank_gguf

REGISTRY = default_registry()
DOCS = ["7", "8 apples", "seven", "the answer is 7.", "12", "3+4=7", "no idea", "?", "7 7 7", "4", "x"]


@pytest.fixture(scope="module")
def rank_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_rank_gguf(tmp_path_factory.mktemp("rank") / "tiny-rank.gguf")


@pytest.fixture(scope="module")
def headless_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_rank_gguf(tmp_path_factory.mktemp("rank") / "tiny-no-head.gguf", head=False)


@pytest.fixture(scope="module")
def ranker(rank_file: Path) -> Any:
    backend = RankBackend(rank_file, ModelSpec(source="path", path=str(rank_file), pooling="rank",
                                               options=(("n_seq_max", 4),)))
    yield backend
    backend.close()


def test_every_pair_gets_its_own_score_in_order_and_batching_changes_none(ranker: Any) -> None:
    result = ranker.rank("what is 3+4?", DOCS)
    assert len(result.scores) == len(DOCS) and all(math.isfinite(s) for s in result.scores)
    assert len({round(s, 6) for s in result.scores}) > len(DOCS) // 2  # random head: the pairs differ
    alone = [ranker.rank("what is 3+4?", [d]).scores[0] for d in DOCS]
    assert result.scores == pytest.approx(alone, abs=2e-3)  # float noise of other batch shapes only
    assert len(ranker._groups([len(ranker.pair_tokens("q", d)) for d in DOCS])) == 3  # 11 pairs, 4 per decode
    assert result.usage.prompt_tokens == sum(len(ranker.pair_tokens("what is 3+4?", d)) for d in DOCS)


def test_the_pair_is_a_cross_encoder_input(ranker: Any) -> None:
    tokens = ranker.pair_tokens("ab", "c")
    assert tokens[0] == 2 and tokens[-1] == 3 and tokens.count(3) == 2  # [CLS] a b [SEP] c [SEP]
    assert ranker.rank("q", ["c"]).scores != ranker.rank("c", ["q"]).scores


def test_a_rank_model_refuses_to_generate(ranker: Any) -> None:
    with pytest.raises(BackendError, match="rank_model_generates"):
        ranker.generate("hi", SamplingParams())


def test_a_generator_cannot_be_loaded_with_rank_pooling(headless_file: Path) -> None:
    assert not is_rank_model(headless_file) and not is_rank_model(bundled_model_path())
    with pytest.raises(ModelFileError, match="rank_needs_head"):
        RankBackend(headless_file)


def _workflow(models: dict[str, Any], verifier: dict[str, Any], sampler_model: str = "gen") -> Any:
    return workflow_from_dict({
        "version": 1, "name": "t", "models": models,
        "inputs": {"question": {"type": "text", "default": "what is 3+4?"}},
        "nodes": [
            {"id": "s", "kind": "sampler", "model": sampler_model, "params": {"n": 3, "prompt": "{question}"},
             "inputs": {"question": "inputs.question"}},
            {"id": "v", "kind": "verifier", "params": verifier,
             "inputs": {"candidates": "s.candidates", "question": "inputs.question"}},
        ],
        "outputs": {"scores": "v.scores"},
    })


def test_the_verifier_scores_candidates_with_the_rank_model(llama_provide: Any, rank_file: Path, ranker: Any) -> None:
    models = {"gen": {"source": "fake"}, "rm": {"path": str(rank_file), "pooling": "rank"}}
    raw_wf = _workflow(models, {"method": "reward_model", "model": "rm", "normalize": "none"})
    assert not [i for i in validate(raw_wf, REGISTRY) if i.severity == "error"]
    scheduler = Scheduler(REGISTRY, llama_provide)
    raw = scheduler.run(raw_wf, seed=0)
    assert raw.status == SUCCEEDED, raw.error
    sig = scheduler.run(_workflow(models, {"method": "reward_model", "model": "rm"}), seed=0)
    assert sig.status == SUCCEEDED, sig.error
    assert sig.outputs["scores"] == pytest.approx([1 / (1 + math.exp(-r)) for r in raw.outputs["scores"]])
    assert all(0 < s < 1 for s in sig.outputs["scores"])


def _codes(wf: Any) -> set[str]:
    return {i.code for i in validate(wf, REGISTRY) if i.severity == "error"}


def test_rank_models_and_generators_are_refused_in_each_others_place(rank_file: Path, headless_file: Path) -> None:
    rm = {"path": str(rank_file), "pooling": "rank"}
    # a reward_model verifier on a generator
    assert "not_a_reward_model" in _codes(_workflow({"gen": {"source": "fake"}}, {"method": "reward_model"}))
    # a sampler generating with the rank model; an llm_judge on it
    assert "rank_model_generates" in _codes(_workflow({"gen": {"source": "fake"}, "rm": rm},
                                                      {"method": "exact"}, sampler_model="rm"))
    assert "rank_model_generates" in _codes(_workflow({"gen": {"source": "fake"}, "rm": rm},
                                                      {"method": "llm_judge", "model": "rm"}))
    # a generator GGUF declared `pooling: rank`; a rank GGUF declared without it
    assert "rank_needs_head" in _codes(_workflow({"gen": {"source": "fake"}, "rm": {
        "path": str(headless_file), "pooling": "rank"}}, {"method": "reward_model", "model": "rm"}))
    assert "rank_model_generates" in _codes(_workflow({"gen": {"source": "fake"}, "rm": {"path": str(rank_file)}},
                                                      {"method": "exact"}))
    # remote entries: pooling: rank is local-only, api must be one of the scoring APIs
    remote = {"source": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    assert "bad_model" in _codes(_workflow({"gen": {"source": "fake"}, "rm": {**remote, "pooling": "rank"}},
                                           {"method": "exact"}))
    assert "bad_model" in _codes(_workflow({"gen": {"source": "fake"}, "rm": {**remote, "api": "rank"}},
                                           {"method": "exact"}))
    assert "not_a_reward_model" in _codes(_workflow({"gen": {"source": "fake"}, "rm": remote},
                                                    {"method": "reward_model", "model": "rm"}))
    assert not _codes(_workflow({"gen": {"source": "fake"}, "rm": {**remote, "api": "rerank"}},
                                {"method": "reward_model", "model": "rm"}))


def test_the_provider_builds_a_rank_backend_that_refuses_to_generate(llama_provide: Any, rank_file: Path) -> None:
    from backends.llama.worker_backend import RankWorkerBackend

    backend = llama_provide(ModelSpec(source="path", path=str(rank_file), pooling="rank"))
    assert isinstance(backend, RankWorkerBackend) and backend.kind == "rank"  # the rank model in a worker of its own
    assert backend.info()["backend"] == "llama.cpp (rank pooling)"
    assert len(backend.rank("a question", ["one answer", "another"]).scores) == 2
    try:
        with pytest.raises(BackendError, match="rank_model_generates"):
            backend.generate("x", SamplingParams())
    finally:
        backend.close()


def _counting_tokenize(ranker: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The lengths of the texts the rank model tokenises (issue 32, finding 7: the query once per document)."""
    seen: list[int] = []
    tokenize = ranker.model.tokenize

    def counting(text: str, *args: Any, **kwargs: Any) -> list[int]:
        seen.append(len(text))
        return tokenize(text, *args, **kwargs)

    monkeypatch.setattr(ranker.model, "tokenize", counting)
    return seen


def test_a_long_query_is_refused_before_any_document_is_tokenised(ranker: Any, monkeypatch: pytest.MonkeyPatch,
                                                                   ) -> None:
    seen = _counting_tokenize(ranker, monkeypatch)
    with pytest.raises(BackendError, match="The query is"):
        ranker.rank("seven " * 20_000, ["7"] * 1000)
    assert len(seen) == 1  # the query, once; no pair was built


def test_the_query_is_tokenised_once_for_many_documents(ranker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    query = "what is 3+4? " * 20
    seen = _counting_tokenize(ranker, monkeypatch)
    result = ranker.rank(query, DOCS * 10)
    assert len(result.scores) == len(DOCS) * 10
    assert sum(1 for n in seen if n >= len(query)) == 1  # not once per pair (nor twice)
