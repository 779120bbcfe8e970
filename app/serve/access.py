"""Who is calling: an API key check, and whether the request comes from this machine (then the service's own
policy applies) or from another one (then the share-mode rules apply)."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from starlette.requests import Request

from app.serve.config import HOW_TO_SET_A_KEY, ServeConfig
from app.serve.errors import ApiError
from app.serve.key_runs import KeyedGate
from app.share.policy import SharePolicy, is_loopback_host
from app.share.run_gate import RunGate

FORWARDING_HEADERS = ("x-forwarded-for", "forwarded", "x-real-ip")
"""A proxy on this machine passing on someone else's request sets one of these."""


@dataclass(frozen=True)
class Caller:
    remote: bool
    """The request comes from another machine (or through a proxy or share tunnel)."""
    policy: SharePolicy
    """The rules for this request."""
    key: str = ""
    """A digest of the API key it carries ("" on a server without keys): whose stored responses, runs and run
    limit these are."""

    @property
    def share_rules(self) -> bool:
        return self.policy.share_mode


def is_remote(request: Request, config: ServeConfig) -> bool:
    if config.all_remote:
        return True
    host = request.client.host if request.client else ""
    if not host or not is_loopback_host(host):
        return True
    return any(name in request.headers for name in FORWARDING_HEADERS)


def api_key_of(request: Request) -> str | None:
    """The key the request carries: `Authorization: Bearer KEY` (OpenAI clients) or `x-api-key: KEY` (Anthropic
    clients)."""
    value = request.headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.headers.get("x-api-key", "").strip() or None


def key_digest(request: Request, config: ServeConfig) -> str:
    """Who this request is, as a digest of its API key ("" on a server without keys)."""
    key = api_key_of(request) if config.api_keys else None
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32] if key else ""


def gate_for(caller: Caller, config: ServeConfig) -> RunGate | KeyedGate:
    """The run gate a caller's job waits at: under share-mode rules with the per-key run limit in front."""
    limit = caller.policy.max_runs_per_visitor if caller.share_rules else None
    if limit is None:
        return config.gate
    return KeyedGate(config.gate, config.key_runs, caller.key, limit)


def check_access(request: Request, config: ServeConfig, local_policy: SharePolicy) -> Caller:
    """The caller of this request; ApiError 401 when a key is needed and missing or wrong."""
    remote = is_remote(request, config)
    if config.api_keys:
        given = api_key_of(request)
        if given is None:
            raise ApiError(401, "this server needs an API key: send it as `Authorization: Bearer KEY` "
                           "(the openai SDK's api_key) or `x-api-key: KEY` (the anthropic SDK's)",
                           code="missing_api_key")
        if not any(hmac.compare_digest(given.encode(), key.encode()) for key in config.api_keys):
            raise ApiError(401, "incorrect API key provided", code="invalid_api_key")
    elif remote:
        raise ApiError(401, "requests from other machines need an API key, and this server has none: "
                       f"{HOW_TO_SET_A_KEY}", code="missing_api_key")
    key = key_digest(request, config)
    if remote or config.share_rules_everywhere:
        return Caller(remote=remote, policy=config.remote_policy, key=key)
    return Caller(remote=False, policy=local_policy, key=key)
