"""POST /v1/rerank with a local rank model file (a GGUF with a classification head, run with rank pooling): the
Jina / Cohere shape that llama-server, TEI and vLLM answer, so a `source: openai` entry with `api: rerank` can
point at metagen serve; and the refusal of rank models on the completion routes."""

from __future__ import annotations

import uuid
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.serve.access import Caller, gate_for
from app.serve.catalog import FileModel
from app.serve.config import ServeConfig
from app.serve.errors import ApiError, bad_param
from app.serve.jobs import Job
from app.service.studio import StudioService
from backends.base import RankResult
from backends.llama.models.gguf import read_gguf_header
from backends.llama.worker.rank_backend import rank_head_problem

MAX_DOCUMENTS = 1000


def is_rank_file(model: FileModel) -> bool:
    if not model.spec.path:
        return False  # the bundled model generates
    try:
        return rank_head_problem(read_gguf_header(Path(model.spec.path))) is None
    except Exception:  # an unreadable file is reported when it loads
        return False


def refuse_rank_generation(model: FileModel) -> None:
    """A rank model has no text to write: the completion routes send it to /v1/rerank."""
    if is_rank_file(model):
        raise ApiError(400, f"{model.name!r} is a rank model (a classification head, no text to write): score "
                       "with it on POST /v1/rerank", param="model", code="model_not_supported")


def _parse(body: object) -> tuple[str, str, list[str], int | None]:
    if not isinstance(body, dict):
        raise bad_param("query", "the body must be a JSON object {model, query, documents}")
    model, query, documents, top_n = body.get("model"), body.get("query"), body.get("documents"), body.get("top_n")
    if not isinstance(model, str) or not model:
        raise bad_param("model", "model must name a rank model file (GET /v1/models lists them)",
                        "missing_required_parameter")
    if not isinstance(query, str):
        raise bad_param("query", "query must be a string", "missing_required_parameter")
    if not isinstance(documents, list) or not documents or len(documents) > MAX_DOCUMENTS:
        raise bad_param("documents", f"documents must be a list of 1 to {MAX_DOCUMENTS} strings")
    texts = [d.get("text") if isinstance(d, dict) else d for d in documents]
    if not all(isinstance(t, str) for t in texts):
        raise bad_param("documents", "each document must be a string (or {text: ...})")
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
        raise bad_param("top_n", "top_n must be a positive integer")
    return model, query, [str(t) for t in texts], top_n


def _rank(job: Job, service: StudioService, model: FileModel, query: str, documents: list[str]) -> RankResult:
    spec = replace(model.spec, pooling="rank")
    return service.scheduler.provider(spec).rank(query, documents, cancel=job.token())  # type: ignore[attr-defined]


async def rerank(request: Request, service: StudioService, config: ServeConfig, caller: Caller, model: FileModel,
                 body: object) -> Response:
    _, query, documents, top_n = _parse(body)
    if not is_rank_file(model):
        raise ApiError(400, f"{model.name!r} is a generator, not a rank model: /v1/rerank takes a GGUF with a "
                       "classification head (a reranker or reward model)", param="model", code="model_not_supported")
    job = Job(gate_for(caller, config), f"rerank-{model.name}")
    job.start(partial(_rank, service=service, model=model, query=query, documents=documents))
    await job.admitted()
    result: RankResult = await job.result(request)
    ranked = sorted(range(len(documents)), key=lambda i: -result.scores[i])[: top_n or len(documents)]
    results: list[dict[str, Any]] = [{"index": i, "relevance_score": result.scores[i],
                                      "document": {"text": documents[i]}} for i in ranked]
    tokens = result.usage.prompt_tokens
    return JSONResponse({"id": f"rerank-{uuid.uuid4().hex[:24]}", "object": "list", "model": model.name,
                         "results": results, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
