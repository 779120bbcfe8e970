"""Remote scoring APIs of OpenAI-compatible servers: `/v1/rerank` (llama-server, TEI, vLLM, metagen serve; the
Jina/Cohere shape) and vLLM's `/pooling` (reward models); request bodies and reply parsing, one batched request
for all documents."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from backends.base import BackendError, CancelToken, RankResult, Usage
from backends.remote.openai_http import RemoteHttp

SCORING_APIS = ("rerank", "pooling")
POOLING_JOIN = "\n\n"
"""/pooling takes plain texts (no chat template): the query and the candidate joined by a blank line."""


def _usage(reply: dict[str, Any]) -> Usage:
    usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
    tokens = usage.get("prompt_tokens") or usage.get("total_tokens") or 0
    tokens = int(tokens) if isinstance(tokens, int | float) else 0
    return Usage(prompt_tokens=tokens, prompt_tokens_evaluated=tokens)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BackendError(f"{where} is not a finite number ({value!r:.80})")
    return float(value)


def parse_rerank(reply: Any, n: int, base_url: str) -> RankResult:
    """`{"results": [{"index", "relevance_score"}]}` (also a bare list, or `score`) -> scores in document order."""
    results = reply.get("results") if isinstance(reply, dict) else reply
    if not isinstance(results, list):
        raise BackendError(f"the server at {base_url} answered /rerank without a `results` list")
    scores: list[float | None] = [None] * n
    for item in results:
        if not isinstance(item, dict) or not isinstance(item.get("index"), int) or not 0 <= item["index"] < n:
            raise BackendError(f"the server at {base_url} answered /rerank with a result of no valid index")
        value = item.get("relevance_score", item.get("score"))
        scores[item["index"]] = _number(value, f"the rerank score of document {item['index']}")
    missing = [i for i, s in enumerate(scores) if s is None]
    if missing:
        raise BackendError(f"the server at {base_url} left documents {missing} out of its /rerank answer")
    return RankResult(scores=[float(s) for s in scores if s is not None],
                      usage=_usage(reply) if isinstance(reply, dict) else Usage())


def _last_number(value: Any, where: str) -> float:
    """The reward in a pooling output: the value itself, or the last number of a (nested) list (a per-token
    reward's final token; a one-label head's only value)."""
    while isinstance(value, list) and value:
        value = value[-1]
    return _number(value, where)


def parse_pooling(reply: Any, n: int, base_url: str) -> RankResult:
    """vLLM's `{"data": [{"index", "data": [...]}]}` -> one reward per input, in input order."""
    data = reply.get("data") if isinstance(reply, dict) else None
    if not isinstance(data, list) or len(data) != n:
        raise BackendError(f"the server at {base_url} answered /pooling without one `data` entry per input")
    scores: list[float | None] = [None] * n
    for k, item in enumerate(data):
        index = item.get("index", k) if isinstance(item, dict) else None
        if not isinstance(index, int) or not 0 <= index < n:
            raise BackendError(f"the server at {base_url} answered /pooling with an entry of no valid index")
        scores[index] = _last_number(item.get("data"), f"the pooling output of input {index}")
    return RankResult(scores=[float(s) for s in scores if s is not None], usage=_usage(reply))


def remote_rank(http: RemoteHttp, model: str, api: str | None, query: str, documents: Sequence[str],
                cancel: CancelToken | None) -> RankResult:
    """Score every document against the query with the entry's `api` (one request)."""
    docs = [str(d) for d in documents]
    if not docs:
        return RankResult(scores=[])
    if api == "rerank":
        body = {"model": model, "query": query, "documents": docs, "top_n": len(docs)}
        return parse_rerank(http.post_json("/rerank", body, cancel), len(docs), http.base_url)
    if api == "pooling":
        body = {"model": model, "input": [f"{query}{POOLING_JOIN}{d}" if query else d for d in docs]}
        return parse_pooling(http.post_json("/pooling", body, cancel, root=True), len(docs), http.base_url)
    raise BackendError(f"[no_scoring_api] model {model!r} at {http.base_url} is declared without a scoring API; add "
                       "`api: rerank` (a /v1/rerank server: llama-server --reranking, TEI, vLLM) or `api: pooling` "
                       "(vLLM's /pooling, reward models) to its `models:` entry")
