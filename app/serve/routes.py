"""The /v1 routes as one ASGI app: GET /models, POST /chat/completions, /completions, /rerank (rank model
files), /responses (GET / DELETE /responses/{id}) and /messages (Anthropic's); every path answers JSON, errors in
the OpenAI shape (Anthropic's on /messages) and never a traceback. Beside it GET /health."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from app.serve.access import Caller, check_access
from app.serve.catalog import FileModel, find_model, list_models
from app.serve.config import ServeConfig
from app.serve.errors import ApiError, route_error
from app.serve.failures import api_error
from app.serve.jobs import ClientGoneError
from app.serve.messages import count_tokens, create_message
from app.serve.messages_shapes import error_response
from app.serve.model_alias import resolve_model
from app.serve.params import parse_chat, parse_completion
from app.serve.plain import plain_completion
from app.serve.rerank import refuse_rank_generation, rerank
from app.serve.responses import create_response, delete_response, get_response
from app.serve.workflow_chat import workflow_chat
from app.service.studio import StudioService

log = logging.getLogger(__name__)

API_PREFIX = "/v1"
CLIENT_CLOSED = 499
"""Logged for a request whose client left (nobody receives the response)."""

Handler = Callable[[Request, Caller], Awaitable[Response]]
Endpoint = Callable[[Request], Awaitable[Response]]
Render = Callable[[ApiError], Response]
"""How an endpoint answers an error (OpenAI's shape unless a route's API has its own)."""


async def read_json(request: Request, limit: int) -> object:
    """The request body as JSON; 413 over `limit` bytes, 400 when it is not JSON."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the request body is {int(declared)} bytes; this server takes at most {limit}",
                       code="request_too_large")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"the request body is over {limit} bytes, the most this server takes",
                           code="request_too_large")
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks) or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}", code="invalid_json") from None
    except RecursionError:
        raise ApiError(400, "the request body is nested too deeply to read (JSON of a few levels is all the API "
                       "takes)", code="invalid_json") from None
    except ValueError:  # Python refuses integers of more than 4,300 digits
        raise ApiError(400, "the request body has a number with too many digits (a seed or count is a 64-bit "
                       "integer)", code="invalid_json") from None


def _endpoints(service: StudioService, config: ServeConfig) -> Callable[[Handler, Render], Endpoint]:
    """Makes a route's endpoint from a handler: the caller's access checked first, every error rendered in the
    door's shape (`render`), a client that went away logged, not reported."""

    def endpoint(handler: Handler, render: Render = ApiError.response) -> Endpoint:
        async def run(request: Request) -> Response:
            try:
                caller = check_access(request, config, service.policy)
                return await handler(request, caller)
            except (ClientGoneError, ClientDisconnect):
                log.info("%s %s: the client disconnected (%d)", request.method, request.url.path, CLIENT_CLOSED)
                return Response(status_code=CLIENT_CLOSED)
            except Exception as exc:
                return render(api_error(exc, "a request"))

        return run

    return endpoint


def create_api(service: StudioService, config: ServeConfig) -> Starlette:
    """The ASGI app of the routes (mount it at /v1)."""
    endpoint = _endpoints(service, config)

    async def models(request: Request, caller: Caller) -> Response:
        return JSONResponse({"object": "list", "data": list_models(service, caller.policy, config.auto)})

    async def model(request: Request, caller: Caller) -> Response:
        wanted = request.path_params["model_id"]
        for entry in list_models(service, caller.policy, config.auto):
            if entry["id"] == wanted:
                return JSONResponse(entry)
        raise ApiError(404, f"the model {wanted!r} does not exist (GET /v1/models lists them)", param="model",
                       code="model_not_found")

    async def chat(request: Request, caller: Caller) -> Response:
        req = parse_chat(await read_json(request, config.max_body_bytes), config.max_n)
        target = resolve_model(service, caller.policy, config, req)
        if isinstance(target, FileModel):
            refuse_rank_generation(target)
            return await plain_completion(request, service, config, caller, target, req, chat=True)
        return await workflow_chat(request, service, config, caller, target, req)

    async def completions(request: Request, caller: Caller) -> Response:
        req = parse_completion(await read_json(request, config.max_body_bytes), config.max_n)
        target = find_model(service, caller.policy, req.model, config.auto)
        if not isinstance(target, FileModel):
            raise ApiError(400, f"{req.model!r} is a workflow: workflows answer on /v1/chat/completions; "
                           "/v1/completions takes a model file", param="model", code="model_not_supported")
        refuse_rank_generation(target)
        return await plain_completion(request, service, config, caller, target, req, chat=False)

    async def rerank_route(request: Request, caller: Caller) -> Response:
        body = await read_json(request, config.max_body_bytes)
        name = body.get("model") if isinstance(body, dict) else None
        target = find_model(service, caller.policy, name if isinstance(name, str) else "")
        if not isinstance(target, FileModel):
            raise ApiError(400, f"{name!r} is a workflow: /v1/rerank takes a rank model file", param="model",
                           code="model_not_supported")
        return await rerank(request, service, config, caller, target, body)

    return Starlette(routes=[
        Route("/models", endpoint(models), methods=["GET"]),
        Route("/models/{model_id:path}", endpoint(model), methods=["GET"]),
        Route("/chat/completions", endpoint(chat), methods=["POST"]),
        Route("/completions", endpoint(completions), methods=["POST"]),
        Route("/rerank", endpoint(rerank_route), methods=["POST"]),
        *_door_routes(service, config, endpoint),
    ], exception_handlers={HTTPException: route_error, Exception: route_error})


def _door_routes(service: StudioService, config: ServeConfig,
                 endpoint: Callable[[Handler, Render], Endpoint]) -> list[BaseRoute]:
    """POST /responses, GET / DELETE /responses/{id}, POST /messages and /messages/count_tokens (errors in
    Anthropic's shape)."""

    async def responses(request: Request, caller: Caller) -> Response:
        return await create_response(request, service, config, caller, await read_json(request, config.max_body_bytes))

    async def stored(request: Request, caller: Caller) -> Response:
        return await get_response(request, service, config)

    async def forget(request: Request, caller: Caller) -> Response:
        return await delete_response(request, service, config)

    async def messages(request: Request, caller: Caller) -> Response:
        return await create_message(request, service, config, caller, await read_json(request, config.max_body_bytes))

    async def tokens(request: Request, caller: Caller) -> Response:
        return await count_tokens(request, service, config, caller, await read_json(request, config.max_body_bytes))

    return [Route("/responses", endpoint(responses, ApiError.response), methods=["POST"]),
            Route("/responses/{response_id}", endpoint(stored, ApiError.response), methods=["GET"]),
            Route("/responses/{response_id}", endpoint(forget, ApiError.response), methods=["DELETE"]),
            Route("/messages", endpoint(messages, error_response), methods=["POST"]),
            Route("/messages/count_tokens", endpoint(tokens, error_response), methods=["POST"])]


HEALTH_PATH = "/health"
"""Answers as long as the server runs: the page's connection check (static/connection.js) fetches it."""


async def health(request: Request) -> Response:
    return JSONResponse({"ok": True}, headers={"Cache-Control": "no-store"})


def api_routes(service: StudioService, config: ServeConfig) -> list[BaseRoute]:
    """The routes to put in front of another app's (the studio's Gradio server): /v1 and /health."""
    return [Route(HEALTH_PATH, health, methods=["GET"]), Mount(API_PREFIX, app=create_api(service, config))]
