"""Model calls as data: each backend request's canonical form and its result as JSON, the keys that identify them,
and RecordingBackend, which passes every call to a backend and hands a copy of it to a sink (run bundles, replay).

An entry is one backend request: {"node", "method", "model", "request", "result"} (plus "cached": true for samples
a run took from its sample cache). `model` is `model_ref(spec)`: a digest of the model entry, so a replay knows
which model a call was for without loading it. The keys are computed from entries (`entry_keys`): a generate
request is keyed as a whole and each of its samples on its own (prompt, params without the request's seed, the
sample's seed), so a sample is found again however many were drawn with it; a score request likewise per
continuation; the others as a whole."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, fields, is_dataclass
from typing import Any

from backends.base import (
    CancelToken,
    ChoiceResult,
    Completion,
    ContinuationScore,
    GenerateResult,
    ModelSpec,
    Prompt,
    RankResult,
    SamplingParams,
    ScoreResult,
    StepLogprobsResult,
    TokenCallback,
    TokenLogprob,
    TokenStats,
    Usage,
    default_seeds,
)
from backends.beam_search import BeamHypothesis, BeamResult, BeamSettings
from backends.tools.types import ToolRequest

Entry = dict[str, Any]
Sink = Callable[[str | None, Entry], None]
"""sink(node_id, entry): where a recording backend hands each call it made."""

LM_METHODS = ("generate", "score", "choice_logprobs", "step_logprobs", "beam_search", "rank")
"""The methods that are model calls (counted as LM calls); the others (render_prompt, render_tool_prompt,
tokenize, info) only read the model's template or vocabulary."""
OPTIONAL_METHODS = ("step_logprobs", "beam_search", "rank")
"""Methods some backends lack (remote servers): a wrapper has them only where its backend does."""


def plain(value: Any) -> Any:
    """A value as plain JSON data: dataclasses as dicts, tuples as lists, mappings with string keys."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if all(type(v) in _SCALARS for v in value):  # token ids, log-probabilities: no walk needed
            return list(value)
        return [plain(v) for v in value]
    return value


_SCALARS = frozenset({int, float, str, bool, type(None)})


def digest(*parts: Any) -> str:
    """The key of canonical parts (sorted-key JSON: the same data gives the same key in every process)."""
    text = json.dumps(plain(list(parts)), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def model_ref(spec: ModelSpec) -> str:
    """The identity of a model entry as replay keys use it (its settings, not the file's bytes)."""
    return digest("model", asdict(spec))[:24]


def sample_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """A request's params as they bear on one sample: the request's seed is replaced by the sample's own."""
    return {k: v for k, v in params.items() if k != "seed"}


def sample_key(model: str, prompt: Any, params: Mapping[str, Any], seed: int) -> str:
    return digest("sample", model, prompt, sample_params(params), seed)


def score_item_key(model: str, prefix: Any, continuation: str) -> str:
    return digest("score", model, prefix, continuation)


def request_key(model: str, method: str, request: Mapping[str, Any]) -> str:
    return digest("request", model, method, request)


def entry_keys(entry: Entry) -> Iterator[tuple[str, str, int]]:
    """(kind, key, item index) of an entry: "request" for the whole request, "sample" per generated sample,
    "score" per scored continuation. A cached entry's request is the part its node took from the cache."""
    model, method, req = entry["model"], entry["method"], entry["request"]
    yield "request", request_key(model, method, req), -1
    if method == "generate":
        for j, seed in enumerate(req["seeds"]):
            yield "sample", sample_key(model, req["prompt"], req["params"], seed), j
    elif method == "score":
        for j, cont in enumerate(req["continuations"]):
            yield "score", score_item_key(model, req["prefix"], cont), j


# ---------------------------------------------------------------- requests in canonical form

def generate_request(prompt: Prompt, params: SamplingParams, n: int, seeds: Sequence[int] | None) -> Entry:
    return {"prompt": plain(prompt), "params": plain(params), "seeds": default_seeds(params, n, seeds)}


def canonical_request(method: str, *args: Any) -> Entry:
    """The canonical request of a call by its method's positional arguments (what a replay looks up)."""
    if method == "generate":
        return generate_request(*args)
    if method == "score":
        return {"prefix": plain(args[0]), "continuations": list(args[1])}
    if method == "choice_logprobs":
        return {"prompt": plain(args[0]), "choices": list(args[1])}
    if method == "step_logprobs":
        return {"sequences": plain(args[0]), "tokens": list(args[1])}
    if method == "beam_search":
        return {"prompt": plain(args[0]), "params": plain(args[1]), "settings": plain(args[2])}
    if method == "rank":
        return {"query": args[0], "documents": list(args[1])}
    if method == "render_prompt":
        return {"prompt": plain(args[0]), "add_generation_prompt": bool(args[1])}
    if method == "render_tool_prompt":
        return {"messages": plain(args[0]), "request": plain(args[1]), "add_generation_prompt": bool(args[2])}
    if method == "tokenize":
        return {"text": args[0]}
    if method == "info":
        return {}
    raise ValueError(f"no canonical form for backend method {method!r}")


# ---------------------------------------------------------------- results as JSON and back

def _usage(data: Mapping[str, Any] | None) -> Usage:
    known = {f.name for f in fields(Usage)}
    return Usage(**{k: v for k, v in (data or {}).items() if k in known})


def completion_from(data: Mapping[str, Any]) -> Completion:
    d = dict(data)
    if d.get("logprobs") is not None:
        d["logprobs"] = [TokenLogprob(token=lp["token"], logprob=lp["logprob"],
                                      top=[(str(t[0]), float(t[1])) for t in lp.get("top") or []])
                         for lp in d["logprobs"]]
    if d.get("token_stats") is not None:
        d["token_stats"] = TokenStats(**d["token_stats"])
    known = {f.name for f in fields(Completion)}
    return Completion(**{k: v for k, v in d.items() if k in known})


def result_from(method: str, data: Any) -> Any:
    """A recorded result as the object the backend method returns."""
    if method == "generate":
        return GenerateResult(prompt_text=data["prompt_text"], usage=_usage(data.get("usage")),
                              completions=[completion_from(c) for c in data["completions"]])
    if method == "score":
        return ScoreResult(scores=[ContinuationScore(**s) for s in data["scores"]], usage=_usage(data.get("usage")))
    if method == "choice_logprobs":
        return ChoiceResult(logprobs=dict(data["logprobs"]), usage=_usage(data.get("usage")))
    if method == "step_logprobs":
        return StepLogprobsResult(logprobs=data["logprobs"], usage=_usage(data.get("usage")))
    if method == "rank":
        return RankResult(scores=list(data["scores"]), usage=_usage(data.get("usage")))
    if method == "beam_search":
        return BeamResult(prompt_text=data["prompt_text"], tree=data.get("tree") or {},
                          hypotheses=[BeamHypothesis(**h) for h in data["hypotheses"]],
                          usage=_usage(data.get("usage")))
    if method == "render_tool_prompt":
        return str(data[0]), str(data[1])
    return data  # render_prompt: str; tokenize: list[int]; info: dict


# ---------------------------------------------------------------- the recording wrapper

class RecordingBackend:
    """A backend that passes every call to `inner` and hands the call (canonical request and result, as JSON) to
    `sink`, tagged with the node that made it (`for_node`). Attributes it does not record are `inner`'s."""

    def __init__(self, inner: Any, model: str, sink: Sink, node: str | None = None) -> None:
        self._inner = inner
        self._model = model
        self._sink = sink
        self._node = node
        self._views: dict[str, RecordingBackend] = {}
        self._lock = threading.Lock()

    def for_node(self, node_id: str) -> RecordingBackend:
        """This backend as seen by one node: its calls are recorded under the node's id."""
        with self._lock:
            view = self._views.get(node_id)
            if view is None:
                bind = getattr(self._inner, "for_node", None)
                inner = bind(node_id) if callable(bind) else self._inner
                view = self._views[node_id] = RecordingBackend(inner, self._model, self._sink, node_id)
            return view

    @property
    def inner(self) -> Any:
        return self._inner

    @property
    def model_id(self) -> str:
        return str(self._inner.model_id)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_inner", "_model", "_sink", "_node", "_views", "_lock"):
            raise AttributeError(name)
        if name in OPTIONAL_METHODS:
            call = getattr(self._inner, name)  # AttributeError where the backend cannot
            if call is None:  # a backend that says it cannot (the attribute set to None)
                return None
            return lambda *args, cancel=None: self._recorded(name, call, args, cancel=cancel)
        return getattr(self._inner, name)

    def _emit(self, method: str, request: Entry, result: Any, **extra: Any) -> None:
        self._sink(self._node, {"node": self._node, "method": method, "model": self._model, "request": request,
                                "result": plain(result), **extra})

    def _recorded(self, method: str, call: Callable[..., Any], args: tuple[Any, ...], **kwargs: Any) -> Any:
        result = call(*args, **kwargs)
        self._emit(method, canonical_request(method, *args), result)
        return result

    def generate(self, prompt: Prompt, params: SamplingParams, n: int = 1, seeds: Sequence[int] | None = None,
                 on_token: TokenCallback | None = None, cancel: CancelToken | None = None) -> GenerateResult:
        result = self._inner.generate(prompt, params, n=n, seeds=seeds, on_token=on_token, cancel=cancel)
        self._emit("generate", generate_request(prompt, params, n, seeds), result)
        return result  # type: ignore[no-any-return]

    def note_cached(self, prompt: Prompt, params: SamplingParams, seeds: Sequence[int],
                    completions: Sequence[Completion], prompt_text: str) -> None:
        """Samples a node took from the run's sample cache (drawn by an earlier run): recorded as samples, so a
        replay, whose cache starts empty, finds them."""
        self._emit("generate", generate_request(prompt, params, len(seeds), seeds),
                   {"prompt_text": prompt_text, "completions": list(completions), "usage": Usage()}, cached=True)

    def note_cached_call(self, method: str, args: tuple[Any, ...], result: Any) -> None:
        """Scores or a judge answer a node took from the run's sample cache, recorded as if asked (no usage)."""
        self._emit(method, canonical_request(method, *args), result, cached=True)

    def score(self, prefix: Prompt, continuations: Sequence[str], cancel: CancelToken | None = None) -> ScoreResult:
        return self._recorded("score", self._inner.score, (prefix, continuations), cancel=cancel)  # type: ignore[no-any-return]

    def choice_logprobs(self, prompt: Prompt, choices: Sequence[str],
                        cancel: CancelToken | None = None) -> ChoiceResult:
        return self._recorded("choice_logprobs", self._inner.choice_logprobs, (prompt, choices),  # type: ignore[no-any-return]
                              cancel=cancel)

    def render_prompt(self, prompt: Prompt, add_generation_prompt: bool = True) -> str:
        return self._recorded("render_prompt", self._inner.render_prompt, (prompt, add_generation_prompt))  # type: ignore[no-any-return]

    def render_tool_prompt(self, messages: Sequence[Mapping[str, Any]], request: ToolRequest,
                           add_generation_prompt: bool = True) -> tuple[str, str]:
        return self._recorded("render_tool_prompt", self._inner.render_tool_prompt,  # type: ignore[no-any-return]
                              (messages, request, add_generation_prompt))

    def tokenize(self, text: str) -> list[int]:
        return self._recorded("tokenize", self._inner.tokenize, (text,))  # type: ignore[no-any-return]

    def info(self) -> dict[str, Any]:
        return self._recorded("info", self._inner.info, ())  # type: ignore[no-any-return]


__all__ = ["BeamSettings", "Entry", "RecordingBackend", "Sink", "canonical_request", "entry_keys", "model_ref",
           "plain", "result_from"]
