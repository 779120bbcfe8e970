"""Workflow checks of the sampler's `method: beam` that need more than the node's params: a remote model cannot
run it (refused), and a temperature given with it is ignored (a warning)."""

from __future__ import annotations

from app.workflow.model_specs import DEFAULT_MODEL_ALIAS
from app.workflow.problems import Issue
from app.workflow.spec import Workflow

SAMPLING_KNOBS = ("temperature", "top_k", "top_p", "min_p", "typical_p", "repeat_penalty")
"""Sampler params a beam search does not use (it always takes the most likely tokens)."""


def beam_issues(wf: Workflow) -> list[Issue]:
    """`beam_needs_local_model` for a beam sampler on a remote server's model, `beam_ignores_sampling` (a warning)
    for sampling knobs set on one."""
    default = next(iter(wf.models), DEFAULT_MODEL_ALIAS)
    issues: list[Issue] = []
    for i, node in enumerate(wf.nodes):
        if node.kind != "sampler" or not isinstance(node.params, dict) or node.params.get("method") != "beam":
            continue
        alias = node.model or default
        entry = wf.models.get(alias)
        if isinstance(entry, dict) and entry.get("source") == "openai":
            issues.append(Issue(
                "beam_needs_local_model", f"sampler {node.id!r} runs a token-level beam search, which needs every "
                f"beam's next-token log-probabilities and forked KV caches that the remote server of model "
                f"{alias!r} cannot give",
                "run it on a local GGUF (the bundled model or `{path: model.gguf}`), or use method: sample with "
                "n samples and a voter / verifier on the remote model",
                node_id=node.id, line=wf.line_of("nodes", i, "model") or wf.line_of("nodes", i)))
        for knob in SAMPLING_KNOBS:
            if knob in node.params:
                issues.append(Issue(
                    "beam_ignores_sampling", f"sampler {node.id!r} has method: beam, which ignores {knob} (a beam "
                    "always extends the most likely tokens)", f"remove {knob}, or use method: sample to sample",
                    node_id=node.id, line=wf.line_of("nodes", i, "params", knob), severity="warning"))
    return issues
