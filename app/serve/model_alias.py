"""Which model a request's `model` names: the server's aliases (`metagen serve --alias NAME=MODEL`) first, then the
workflows and model files (`catalog.find_model`); a `claude-*` or `gpt-*` name that is none of them answers with the
default model (`--auto`'s target, else the bundled model) with a warning, so agents that send their vendor's model
names (Claude Code's `claude-sonnet-4-5`, Codex's `gpt-5-codex`) work out of the box."""

from __future__ import annotations

from app.serve.catalog import FileModel, WorkflowModel, find_model
from app.serve.config import ServeConfig
from app.serve.errors import ApiError
from app.serve.params import ApiRequest
from app.serve.tuned import AUTO_MODEL
from app.service.model_names import BUNDLED_ALIAS
from app.service.studio import StudioService
from app.share.policy import SharePolicy

VENDOR_PREFIXES = ("claude-", "gpt-")
"""Model names of other vendors' APIs that the default model answers (those not served here by that name)."""


def parse_alias(text: str) -> tuple[str, str]:
    """`NAME=MODEL` of --alias; ValueError saying what to fix."""
    name, sep, model = text.partition("=")
    if not sep or not name.strip() or not model.strip():
        raise ValueError(f"--alias takes NAME=MODEL (a model name clients send, = , a workflow or model file "
                         f"served here), got {text!r}")
    return name.strip(), model.strip()


def default_model(config: ServeConfig) -> str:
    """What a vendor's model name answers with: `--auto`'s target when the server names one, else the bundled
    model."""
    return AUTO_MODEL if config.auto is not None else BUNDLED_ALIAS


def resolve_model(service: StudioService, policy: SharePolicy, config: ServeConfig,
                  req: ApiRequest) -> WorkflowModel | FileModel:
    """The target of `req.model` (a warning added to `req.warnings` when a default answers); ApiError 404 when
    nothing does."""
    wanted = req.model
    aliases = dict(config.aliases)
    if wanted in aliases:
        return find_model(service, policy, aliases[wanted], config.auto)
    try:
        return find_model(service, policy, wanted, config.auto)
    except ApiError as exc:
        if exc.status != 404 or not wanted.lower().startswith(VENDOR_PREFIXES):
            raise
        fallback = default_model(config)
        try:
            target = find_model(service, policy, fallback, config.auto)
        except ApiError:
            raise exc from None
    req.warnings.append(f"model {wanted!r} answered by {target.name!r}: no workflow or model file has that name "
                        "(metagen serve --alias NAME=MODEL names another)")
    return target
