"""Which models score and which generate: a rank-pooling GGUF (`pooling: rank`) or a remote `api: rerank` /
`api: pooling` entry serves only `method: reward_model` (verifier) / `scorer: reward_model` (search), and those
need one; checked before any model loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.workflow.model_specs import DEFAULT_MODEL_ALIAS
from app.workflow.problems import Issue
from app.workflow.spec import NodeSpec, Workflow
from backends.base import ModelFileError
from backends.llama.models.gguf import read_gguf_header
from backends.llama.worker.rank_backend import rank_head_problem

SCORING_APIS = ("rerank", "pooling")
GENERATING_KINDS = ("generator", "sampler", "search", "refiner")
"""Kinds whose own model writes text."""
MODEL_METHODS = ("llm_judge", "likelihood", "prm", "length")
"""Verifier methods that run a generator (its logits or its tokenizer)."""


def is_reward_entry(entry: Any) -> bool:
    """A `models:` entry that scores (rank pooling, or a remote rerank / pooling API) and cannot generate."""
    return isinstance(entry, dict) and (entry.get("pooling") == "rank" or (
        entry.get("source") == "openai" and entry.get("api") in SCORING_APIS))


def _scorer(node: NodeSpec) -> tuple[str, Any, str]:
    """(param naming the scoring method, the method, param naming the scoring model) of a node."""
    if node.kind == "verifier":
        return "method", node.params.get("method", "llm_judge"), "model"
    return "scorer", node.params.get("scorer"), "judge_model"


def file_issues(wf: Workflow) -> list[Issue]:
    """A local GGUF's head against its `pooling:` (read from the file's header, when the file is there):
    `rank_needs_head` for `pooling: rank` on a generator, `rank_model_generates` for a rank model without it."""
    issues: list[Issue] = []
    for alias, entry in wf.models.items():
        path = entry.get("path") if isinstance(entry, dict) and entry.get("source", "path") == "path" else None
        if not isinstance(path, str) or not path:
            continue
        try:
            problem = rank_head_problem(read_gguf_header(Path(path).expanduser()))
        except (ModelFileError, OSError, ValueError):
            continue  # a missing or damaged file is reported when the model loads
        line = wf.line_of("models", alias, "pooling") or wf.line_of("models", alias)
        if entry.get("pooling") == "rank" and problem:
            issues.append(Issue("rank_needs_head", f"model {alias!r} has pooling: rank but {problem}",
                                "point `path:` at a reranker / reward-model GGUF, or remove `pooling: rank`",
                                line=line))
        elif entry.get("pooling") != "rank" and not problem:
            issues.append(Issue("rank_model_generates", f"model {alias!r} is a rank model (its GGUF has a "
                                "classification head) but has no `pooling: rank`, so it would be run as a generator",
                                "add `pooling: rank` and score with it (verifier method reward_model)", line=line))
    return issues


def reward_model_issues(wf: Workflow) -> list[Issue]:
    """`not_a_reward_model` where reward_model scoring names a generator, `rank_model_generates` where a node
    would generate (or read logits) with a rank / reward model, `prm_needs_local_model` for a remote PRM,
    `unknown_model` for a scoring model alias
    (`model` / `judge_model`) that `models:` does not declare; and the models' files (`file_issues`)."""
    default = next(iter(wf.models), DEFAULT_MODEL_ALIAS)
    issues: list[Issue] = file_issues(wf)
    for i, node in enumerate(wf.nodes):
        if node.kind not in (*GENERATING_KINDS, "verifier"):
            continue
        own = node.model or default
        method_key, method, model_key = _scorer(node)
        scorer_alias = str(node.params.get(model_key) or own)
        if node.params.get(model_key) and wf.models and scorer_alias not in wf.models:
            issues.append(Issue("unknown_model", f"{model_key} {scorer_alias!r} is not declared",
                                f"declare it under `models:` or name one of {', '.join(map(repr, wf.models))}",
                                node_id=node.id, line=wf.line_of("nodes", i, "params", model_key)))
            continue
        scorer_entry = wf.models.get(scorer_alias, {"source": "bundled"})
        if method == "reward_model" and not is_reward_entry(scorer_entry):
            issues.append(Issue(
                "not_a_reward_model", f"{method_key} reward_model scores with model {scorer_alias!r}, a generator",
                "declare the reward model under `models:` as `{path: X.gguf, pooling: rank}` or `{source: openai, "
                f"base_url: ..., model: ..., api: rerank}}` (or api: pooling) and name it in `{model_key}:`",
                node_id=node.id, line=wf.line_of("nodes", i, "params", model_key) or wf.line_of("nodes", i)))
        generating = own if node.kind in GENERATING_KINDS else None
        if node.kind == "verifier" and method in MODEL_METHODS:
            generating = scorer_alias
        elif node.kind == "search" and method in MODEL_METHODS and is_reward_entry(scorer_entry):
            generating = scorer_alias
        if generating is not None and is_reward_entry(wf.models.get(generating)):
            issues.append(Issue(
                "rank_model_generates", f"model {generating!r} is a rank / reward model (it scores, it has no text "
                f"to write) but {node.kind} {node.id!r} would generate or read token probabilities with it",
                "give this node a generator model; use the rank model with a verifier `method: reward_model`",
                node_id=node.id, line=wf.line_of("nodes", i, "model") or wf.line_of("nodes", i)))
        elif method == "prm" and isinstance(scorer_entry, dict) and scorer_entry.get("source") == "openai":
            issues.append(Issue(
                "prm_needs_local_model", f"{method_key} prm reads token probabilities at every step of a prompt, "
                f"which the remote server of model {scorer_alias!r} cannot return",
                "run the PRM as a local GGUF (`{path: prm.gguf}`), or score with `method: reward_model` through the "
                "server's `api: pooling` (a PRM served by vLLM as a reward model)",
                node_id=node.id, line=wf.line_of("nodes", i, "params", model_key) or wf.line_of("nodes", i)))
    return issues
