"""ReplayBackend: answers model calls from recorded ones (backends.replay.calls entries, a run bundle's `calls`),
sending those not recorded to a fallback model when there is one, and counting which were which. A call that is
neither recorded nor answerable fails with ReplayMissError, which names the node and what differs from the
calls that node made when recorded."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from backends.base import (
    BackendError,
    CancelToken,
    ChoiceResult,
    Completion,
    ContinuationScore,
    GenerateResult,
    LLMBackend,
    Prompt,
    RankResult,
    SamplingParams,
    ScoreResult,
    StepLogprobsResult,
    TokenCallback,
    Usage,
)
from backends.beam_search import BeamResult, BeamSettings
from backends.replay.calls import (
    LM_METHODS,
    Entry,
    canonical_request,
    completion_from,
    entry_keys,
    generate_request,
    request_key,
    result_from,
    sample_key,
    score_item_key,
)
from backends.tools.types import ToolRequest

Fallback = Callable[[], LLMBackend] | None
"""Gives the model that answers calls not recorded (resolved on the first such call only), or None: no model."""


class ReplayMissError(BackendError):
    """A call the recording does not hold, with no model to answer it."""


@dataclass
class ReplayCounts:
    """Model calls (one per sample, scored continuation, choice query ...) answered from the recording or by the
    model; thread-safe."""

    replayed: int = 0
    model: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, replayed: int = 0, model: int = 0) -> None:
        with self._lock:
            self.replayed += replayed
            self.model += model

    def to_json(self) -> dict[str, int]:
        return {"replayed": self.replayed, "model": self.model}


class ReplayTable:
    """Recorded entries indexed by their keys (backends.replay.calls.entry_keys), and by node for explanations."""

    def __init__(self, entries: Sequence[Entry], models: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.models = {str(k): dict(v) for k, v in (models or {}).items()}
        self.requests: dict[str, Entry] = {}
        self.samples: dict[str, tuple[Entry, int]] = {}
        self.scores: dict[str, tuple[Entry, int]] = {}
        self.by_node: dict[tuple[str | None, str], list[Entry]] = {}
        for entry in entries:
            for kind, key, j in entry_keys(entry):
                if kind == "request":
                    if key not in self.requests or self.requests[key].get("cached"):  # an asked call wins
                        self.requests[key] = entry
                elif kind == "sample":
                    self.samples.setdefault(key, (entry, j))
                else:
                    self.scores.setdefault(key, (entry, j))
            self.by_node.setdefault((entry.get("node"), entry["method"]), []).append(entry)

    def model_id(self, model: str) -> str:
        return str(self.models.get(model, {}).get("model_id") or f"replay:{model}")


class ReplayBackend:
    """One model entry of a replayed run (`model`: its model_ref): every call answered from `table` where it was
    recorded, else by `fallback()`'s model, else a ReplayMissError."""

    def __init__(self, table: ReplayTable, model: str, counts: ReplayCounts, fallback: Fallback = None,
                 node: str | None = None, _shared: dict[str, Any] | None = None) -> None:
        self._table = table
        self._model = model
        self.counts = counts
        self._node = node
        self._shared = _shared if _shared is not None else {"fallback": fallback, "backend": None,
                                                             "lock": threading.Lock()}

    def for_node(self, node_id: str) -> ReplayBackend:
        """This backend as one node sees it (named in a miss)."""
        return ReplayBackend(self._table, self._model, self.counts, node=node_id, _shared=self._shared)

    @property
    def model_id(self) -> str:
        return self._table.model_id(self._model)

    # -- the fallback and the misses
    def _model_backend(self, method: str, request: Entry) -> LLMBackend:
        shared = self._shared
        with shared["lock"]:
            if shared["backend"] is None:
                if shared["fallback"] is None:
                    raise ReplayMissError(self._explain(method, request))
                try:
                    shared["backend"] = shared["fallback"]()
                except BackendError as exc:  # no model file, no engine: the miss is the news, the cause its detail
                    raise ReplayMissError(self._explain(method, request, f"the model cannot be used ({exc})")) \
                        from None
            backend: LLMBackend = shared["backend"]
        bind = getattr(backend, "for_node", None)
        return bind(self._node) if callable(bind) and self._node is not None else backend

    def _explain(self, method: str, request: Entry, why: str = "no model is available to answer it") -> str:
        where = f"node {self._node!r}" if self._node else "the run"
        recorded = self._table.by_node.get((self._node, method), [])
        if not recorded:
            made = sorted(m for (node, m) in self._table.by_node if node == self._node)
            what = (f"made no {method} call when recorded (it made: {', '.join(made)})" if made else
                    "made no model call when recorded (a node added or renamed, or one the recorded run did not "
                    "reach)")
        else:
            what = "asks " + describe_change(method, recorded, request, self._model)
        return (f"{where} {what}; this call is not in the bundle and {why}: replay the recorded workflow "
                "unchanged, or give the edited one with --workflow and a model")

    def _whole(self, method: str, request: Entry, call: Callable[[LLMBackend], Any], count: int) -> Any:
        """A call answered as a whole: recorded, or by the model."""
        entry = self._table.requests.get(request_key(self._model, method, request))
        if entry is not None:
            if method in LM_METHODS:
                self.counts.add(replayed=count)
            return result_from(method, entry["result"])
        result = call(self._model_backend(method, request))
        if method in LM_METHODS:
            self.counts.add(model=_count_of(method, result, count))
        return result

    # -- the protocol
    def generate(self, prompt: Prompt, params: SamplingParams, n: int = 1, seeds: Sequence[int] | None = None,
                 on_token: TokenCallback | None = None, cancel: CancelToken | None = None) -> GenerateResult:
        request = generate_request(prompt, params, n, seeds)
        whole = self._table.requests.get(request_key(self._model, "generate", request))
        if whole is not None and not whole.get("cached"):  # samples from a cache: per sample below
            self.counts.add(replayed=n)
            return result_from("generate", whole["result"])  # type: ignore[no-any-return]
        found: list[Completion | None] = []
        prompt_text = ""
        for seed in request["seeds"]:
            hit = self._table.samples.get(sample_key(self._model, request["prompt"], request["params"], seed))
            found.append(completion_from(hit[0]["result"]["completions"][hit[1]]) if hit else None)
            prompt_text = prompt_text or (hit[0]["result"].get("prompt_text", "") if hit else "")
        missing = [i for i, c in enumerate(found) if c is None]
        usage = Usage(prompt_tokens=max((c.prompt_tokens for c in found if c), default=0),
                      completion_tokens=sum(c.completion_tokens for c in found if c),
                      thinking_tokens=sum(c.thinking_tokens for c in found if c))
        if missing:
            backend = self._model_backend("generate", {**request, "seeds": [request["seeds"][i] for i in missing]})
            drawn = backend.generate(prompt, params, n=len(missing), seeds=[request["seeds"][i] for i in missing],
                                     on_token=on_token, cancel=cancel)
            self.counts.add(model=len(drawn.completions))
            for i, c in zip(missing, drawn.completions, strict=False):
                found[i] = c
            usage.add(drawn.usage)
            prompt_text = drawn.prompt_text
        self.counts.add(replayed=n - len(missing))
        if not prompt_text:
            prompt_text = self.render_prompt(prompt)
        return GenerateResult(prompt_text=prompt_text, completions=[c for c in found if c is not None], usage=usage)

    def score(self, prefix: Prompt, continuations: Sequence[str], cancel: CancelToken | None = None) -> ScoreResult:
        request = canonical_request("score", prefix, continuations)
        whole = self._table.requests.get(request_key(self._model, "score", request))
        if whole is not None:
            self.counts.add(replayed=len(continuations))
            return result_from("score", whole["result"])  # type: ignore[no-any-return]
        found: list[ContinuationScore | None] = []
        for cont in continuations:
            hit = self._table.scores.get(score_item_key(self._model, request["prefix"], cont))
            found.append(ContinuationScore(**hit[0]["result"]["scores"][hit[1]]) if hit else None)
        missing = [i for i, s in enumerate(found) if s is None]
        usage = Usage()
        if missing:
            todo = [continuations[i] for i in missing]
            backend = self._model_backend("score", {**request, "continuations": todo})
            scored = backend.score(prefix, todo, cancel=cancel)
            self.counts.add(model=len(todo))
            for i, s in zip(missing, scored.scores, strict=False):
                found[i] = s
            usage = scored.usage
        self.counts.add(replayed=len(continuations) - len(missing))
        return ScoreResult(scores=[s for s in found if s is not None], usage=usage)

    def choice_logprobs(self, prompt: Prompt, choices: Sequence[str],
                        cancel: CancelToken | None = None) -> ChoiceResult:
        return self._whole("choice_logprobs", canonical_request("choice_logprobs", prompt, choices),  # type: ignore[no-any-return]
                           lambda b: b.choice_logprobs(prompt, choices, cancel=cancel), 1)

    def step_logprobs(self, sequences: Sequence[Sequence[str]], tokens: Sequence[str],
                      cancel: CancelToken | None = None) -> StepLogprobsResult:
        return self._whole("step_logprobs", canonical_request("step_logprobs", sequences, tokens),  # type: ignore[no-any-return]
                           lambda b: b.step_logprobs(sequences, tokens, cancel=cancel),  # type: ignore[attr-defined]
                           len(sequences))

    def beam_search(self, prompt: Prompt, params: SamplingParams, settings: BeamSettings,
                    cancel: CancelToken | None = None) -> BeamResult:
        return self._whole("beam_search", canonical_request("beam_search", prompt, params, settings),  # type: ignore[no-any-return]
                           lambda b: b.beam_search(prompt, params, settings, cancel=cancel),  # type: ignore[attr-defined]
                           settings.n)

    def rank(self, query: str, documents: Sequence[str], cancel: CancelToken | None = None) -> RankResult:
        return self._whole("rank", canonical_request("rank", query, documents),  # type: ignore[no-any-return]
                           lambda b: b.rank(query, documents, cancel=cancel), len(documents))  # type: ignore[attr-defined]

    def render_prompt(self, prompt: Prompt, add_generation_prompt: bool = True) -> str:
        return self._whole("render_prompt", canonical_request("render_prompt", prompt, add_generation_prompt),  # type: ignore[no-any-return]
                           lambda b: b.render_prompt(prompt, add_generation_prompt), 0)

    def render_tool_prompt(self, messages: Sequence[Mapping[str, Any]], request: ToolRequest,
                           add_generation_prompt: bool = True) -> tuple[str, str]:
        canonical = canonical_request("render_tool_prompt", messages, request, add_generation_prompt)
        return self._whole("render_tool_prompt", canonical,  # type: ignore[no-any-return]
                           lambda b: b.render_tool_prompt(messages, request, add_generation_prompt), 0)

    def tokenize(self, text: str) -> list[int]:
        return self._whole("tokenize", canonical_request("tokenize", text),  # type: ignore[no-any-return]
                           lambda b: b.tokenize(text), 0)

    def info(self) -> dict[str, Any]:
        entry = self._table.requests.get(request_key(self._model, "info", {}))
        recorded = dict(entry["result"]) if entry is not None else {}
        return {**recorded, "replay": True, "model_id": self.model_id}


def _count_of(method: str, result: Any, asked: int) -> int:
    if method == "beam_search":
        return len(getattr(result, "hypotheses", ())) or asked
    return asked


# ---------------------------------------------------------------- what changed

def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _text_change(old: Any, new: Any) -> str:
    """Where two texts (or chat prompts) first differ, with a little of each around it."""
    a, b = (v if isinstance(v, str) else repr(v) for v in (old, new))
    i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    start = max(0, i - 20)
    return f"at character {i}: recorded {_short(a[start:i + 40])!r} → now {_short(b[start:i + 40])!r}"


def describe_change(method: str, recorded: Sequence[Entry], request: Entry, model: str) -> str:
    """What a request changes against the closest request of the same method the node made when recorded."""

    def differences(entry: Entry) -> list[str]:
        old = entry["request"]
        out = [] if entry.get("model") == model else ["another model entry (its settings changed)"]
        for key in sorted(set(old) | set(request)):
            if old.get(key) == request.get(key):
                continue
            if key in ("prompt", "prefix", "query", "text", "messages"):
                out.append(f"a changed {key} ({_text_change(old.get(key), request.get(key))})")
            elif key == "params" and isinstance(old.get(key), dict) and isinstance(request.get(key), dict):
                p_old, p_new = old[key], request[key]
                changed = [f"{k} {_short(p_old.get(k))} → {_short(p_new.get(k))}"
                           for k in sorted(set(p_old) | set(p_new)) if p_old.get(k) != p_new.get(k)]
                out.append("changed params (" + ", ".join(changed) + ")")
            elif key == "seeds":
                new_seeds = [s for s in request.get("seeds") or [] if s not in (old.get("seeds") or [])]
                out.append(f"samples with seeds never drawn ({_short(new_seeds)}; recorded {_short(old.get('seeds'))})")
            else:
                out.append(f"a changed {key} (recorded {_short(old.get(key))} → now {_short(request.get(key))})")
        return out

    best = min((differences(e) for e in recorded), key=len)
    return " and ".join(best) if best else f"the recorded {method} call again (seed or model differ)"


__all__ = ["ReplayBackend", "ReplayCounts", "ReplayMissError", "ReplayTable", "describe_change"]
