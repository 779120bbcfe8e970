"""The `speculative:` option of a `models:` entry: its schema, its checks (code `bad_speculative`) and its spec."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from app.workflow.problems import Issue
from backends.base import BackendError, ModelSpec, SpeculativeSpec

SPECULATIVE_METHODS = ("ngram", "draft")
K_RANGE = (1, 16)
NGRAM_RANGE = (1, 8)
SPECULATIVE_KEYS = ("method", "k", "ngram", "draft", "adaptive")
LOCAL_SOURCES = ("bundled", "path")
REMOTE_HINT = (
    "remove `speculative:`; a remote server decides speculation itself: start vLLM with "
    "`--speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 4, \"prompt_lookup_max\": 3}'`, "
    "SGLang with `--speculative-algorithm NGRAM` (or EAGLE with `--speculative-draft-model-path`), llama-server "
    "with `--model-draft DRAFT.gguf --draft-max 4` (see docs/remote.md)"
)
EXAMPLE = "speculative: {method: ngram, k: 4, ngram: 3, adaptive: true}"


def _source(entry: Mapping[str, Any]) -> Any:
    return entry.get("source", "path" if entry.get("path") else "bundled")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_speculative(alias: str, entry: Mapping[str, Any], models: Mapping[str, Any],
                      line_of: Callable[..., int | None]) -> list[Issue]:
    """Every problem of the `speculative:` option of model `alias` (none when it has no such option)."""
    option = entry.get("speculative")
    if option is None:
        return []

    def issue(message: str, hint: str, *key: str) -> Issue:
        return Issue("bad_speculative", f"model {alias!r}: {message}", hint,
                     line=line_of("models", alias, "speculative", *key) or line_of("models", alias))

    if not isinstance(option, Mapping):  # MODEL_FIELDS' type check reports it (bad_model)
        return []
    source = _source(entry)
    if source == "openai":
        return [issue("speculative decoding is not set from Metagen for a remote server", REMOTE_HINT)]
    if entry.get("pooling") == "rank":
        return [issue("a rank-pooling model scores candidates and generates nothing, so it has nothing to "
                      "speculate", "remove `speculative:` from this entry")]
    issues = [issue(f"speculative has unknown key {key!r}", f"use only: {', '.join(SPECULATIVE_KEYS)}", str(key))
              for key in option if key not in SPECULATIVE_KEYS]
    method = option.get("method", "ngram")
    if method not in SPECULATIVE_METHODS:
        issues.append(issue(f"speculative method {method!r} is not one of {', '.join(SPECULATIVE_METHODS)}",
                            "write `method: ngram` (prompt lookup, no second model) or `method: draft` with "
                            "`draft: ALIAS`", "method"))
    for key, (low, high) in (("k", K_RANGE), ("ngram", NGRAM_RANGE)):
        value = option.get(key)
        if value is not None and (not _is_int(value) or not low <= value <= high):
            issues.append(issue(f"speculative {key} must be a whole number from {low} to {high}, got {value!r}",
                                f"write `{key}: {4 if key == 'k' else 3}`", key))
    adaptive = option.get("adaptive")
    if adaptive is not None and not isinstance(adaptive, bool):
        issues.append(issue(f"speculative adaptive must be true or false, got {adaptive!r}",
                            "write `adaptive: true`", "adaptive"))
    draft = option.get("draft")
    if method == "draft":
        issues += _draft_issues(alias, entry, draft, models, issue)
    elif draft is not None:
        issues.append(issue("speculative sets a draft model but its method is not 'draft'",
                            "write `method: draft`, or remove `draft:`", "draft"))
    return issues


def _draft_issues(alias: str, entry: Mapping[str, Any], draft: Any, models: Mapping[str, Any],
                  issue: Callable[..., Issue]) -> list[Issue]:
    if not isinstance(draft, str) or not draft:
        return [issue("speculative method 'draft' needs a draft model", "add `draft: ALIAS` naming another entry "
                      "of `models:` (a smaller model with the same tokenizer)", "draft")]
    if draft == alias:
        return [issue(f"speculative draft {draft!r} is the model itself (a cycle)",
                      "name another entry of `models:`; for a self-draft add an entry with the same file and "
                      "different weights", "draft")]
    other = models.get(draft)
    if not isinstance(other, Mapping):
        known = ", ".join(repr(a) for a in models if a != alias) or "none"
        return [issue(f"speculative draft {draft!r} is not an entry of `models:`",
                      f"add it to `models:` or name one of: {known}", "draft")]
    if _source(other) not in LOCAL_SOURCES:
        return [issue(f"speculative draft {draft!r} is not a local model (source {_source(other)!r})",
                      "a draft model runs beside the target in this process: use a bundled or path entry", "draft")]
    if other.get("speculative") is not None:
        return [issue(f"speculative draft {draft!r} is itself speculative",
                      f"remove `speculative:` from {draft!r}", "draft")]
    problem = vocabulary_problem(entry, other)
    if problem:
        return [issue(f"speculative draft {draft!r} {problem}",
                      "a draft model must share the target's tokenizer (same family, e.g. a smaller model of "
                      "the same series)", "draft")]
    return []


def vocabulary_problem(target: Mapping[str, Any], draft: Mapping[str, Any]) -> str | None:
    """Why two local entries' GGUF files have different vocabularies, or None (also when a file cannot be read:
    the model checks report that)."""
    from backends.llama.models.gguf import read_gguf_metadata
    from backends.pool import model_path

    keys = ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.bos_token_id",
            "tokenizer.ggml.eos_token_id")
    try:
        metas = [read_gguf_metadata(model_path(model_spec_stub(e))) for e in (target, draft)]
    except (BackendError, OSError, ValueError, TypeError):
        return None
    for key in keys:
        if metas[0].get(key) != metas[1].get(key):
            return f"has another vocabulary ({key}: {metas[1].get(key)!r} vs the target's {metas[0].get(key)!r})"
    return None


def model_spec_stub(entry: Mapping[str, Any]) -> ModelSpec:
    """Just enough of an entry's spec to find its file."""
    return ModelSpec(source=str(_source(entry)), path=entry.get("path") or None)


def speculative_from_dict(option: Mapping[str, Any] | None, models: Mapping[str, Any],
                          spec_of: Callable[[Mapping[str, Any]], ModelSpec]) -> SpeculativeSpec | None:
    """The spec of a checked `speculative:` option (the draft alias resolved through `models`)."""
    if option is None:
        return None
    method = str(option.get("method", "ngram"))
    draft_alias = option.get("draft")
    draft = None
    if method == "draft":
        if draft_alias not in models:
            raise ValueError(f"speculative draft {draft_alias!r} is not an entry of models:")
        draft = spec_of(models[draft_alias])
    return SpeculativeSpec(method=method, k=int(option.get("k", 4)), ngram=int(option.get("ngram", 3)),
                           draft=draft, draft_alias=draft_alias, adaptive=bool(option.get("adaptive", True)))
