"""Checks that need a loaded model's vocabulary, made when a run starts and before any node runs: a PRM's
`good_token` / `bad_token` must each be one token of that PRM (else `bad_token`, with the pieces it splits into)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.workflow.model_specs import DEFAULT_MODEL_ALIAS
from app.workflow.problems import Issue
from app.workflow.spec import Workflow
from backends.base import BackendError, LLMBackend, ModelSpec


def _prm_nodes(wf: Workflow) -> list[tuple[int, Any, str]]:
    """(index, node, the param naming its PRM) of every node scoring with `prm`."""
    out = []
    for i, node in enumerate(wf.nodes):
        if node.kind == "verifier" and node.params.get("method") == "prm":
            out.append((i, node, "model"))
        elif node.kind == "search" and node.params.get("scorer") == "prm":
            out.append((i, node, "judge_model"))
    return out


def prm_token_issues(wf: Workflow, specs: dict[str, ModelSpec],
                     provide: Callable[[ModelSpec], LLMBackend]) -> list[Issue]:
    """`bad_token` for each good/bad token that is not one token of its PRM's vocabulary (the PRM is loaded: the
    run would load it anyway). Backends without a vocabulary check (remote ones) are left to the node."""
    default = next(iter(specs), DEFAULT_MODEL_ALIAS)
    issues: list[Issue] = []
    for i, node, model_key in _prm_nodes(wf):
        alias = str(node.params.get(model_key) or node.model or default)
        spec = specs.get(alias)
        if spec is None:
            continue
        try:
            check = getattr(provide(spec), "single_token", None)
        except Exception:  # a model that cannot load fails its node, as without this check
            continue
        if check is None:
            continue
        for key, fallback in (("good_token", "+"), ("bad_token", "-")):
            token = node.params.get(key, fallback)
            try:
                check(str(token))
            except BackendError as exc:
                issues.append(Issue("bad_token", f"{key} {token!r} is not one token of model {alias!r}: {exc}",
                                    f"pick a {key} that is a single token of the PRM (Math-Shepherd: '+' / '-'; "
                                    "mind the leading space)", node_id=node.id,
                                    line=wf.line_of("nodes", i, "params", key) or wf.line_of("nodes", i)))
    return issues
