"""What a remote OpenAI-compatible server can do: found once per server and model by tiny probe requests, cached."""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from backends.base import BackendError, CancelToken
from backends.remote.openai_http import MalformedAnswerError, RemoteHttp, RemoteStatusError

log = logging.getLogger(__name__)

PROBE_PROMPT = "The capital of France is"
PROBE_GRAMMAR = 'root ::= "QZ"'
PROBE_SCHEMA = {"type": "object", "properties": {"a": {"type": "string", "enum": ["QZ"]}}, "required": ["a"],
                "additionalProperties": False}
PROBE_MAX_S = 120.0
"""The longest a capability probe may take, all its requests together (each answer is size-bounded too)."""
PROBE_ATTEMPTS = 2
OVERLAP_PROMPT = "1, 2, 3, 4, 5, 6,"
"""The long streamed answer of the overlap probe (a count goes on for its max_tokens)."""
OVERLAP_TOKENS = 24

SERVER_NAMES = {
    "llama_cpp_python": "llama-cpp-python (python -m llama_cpp.server)",
    "llama_server": "llama.cpp llama-server",
    "vllm": "vLLM",
    "sglang": "SGLang",
    "ollama": "Ollama",
    "metagen": "Metagen (metagen serve)",
    "openai": "OpenAI API",
    "unknown": "an OpenAI-compatible server",
}
GRAMMAR_METHODS = {
    "llama_cpp_python": ("grammar",),
    "llama_server": ("grammar",),
    "vllm": ("structured_outputs", "guided_grammar"),
    "sglang": ("ebnf",),
    "unknown": ("grammar", "structured_outputs", "guided_grammar", "ebnf"),
}
"""Request fields that carry a GBNF grammar, tried in this order (servers not listed take none)."""
SCHEMA_METHODS = ("response_format", "structured_outputs", "guided_json", "json_schema")
"""Request fields that carry a JSON schema, for servers without a grammar field."""
SAMPLER_EXTRAS = {
    "llama_cpp_python": ("top_k", "min_p", "typical_p", "repeat_penalty"),
    "llama_server": ("top_k", "min_p", "typical_p", "repeat_penalty"),
    "vllm": ("top_k", "min_p", "repetition_penalty"),
    "sglang": ("top_k", "min_p", "repetition_penalty"),
}
"""Sampling settings beyond OpenAI's that each server takes (others get temperature and top_p only)."""
TOKENIZE_ENDPOINTS = {
    "llama_cpp_python": ("/extras/tokenize", "input"),
    "llama_server": ("/tokenize", "content"),
    "vllm": ("/tokenize", "prompt"),
}
"""Tokenizer endpoint (under the server root) and the field of its text."""
DETOKENIZE_ENDPOINTS = {
    "llama_cpp_python": ("/extras/detokenize", "text"),
    "llama_server": ("/detokenize", "content"),
    "vllm": ("/detokenize", "prompt"),
}
"""Detokenizer endpoint (it takes {"tokens": [...]}) and the field of its answer's text."""


@dataclass(frozen=True)
class Capabilities:
    """What one server does for one model; `rows()` is the table `metagen models check` and the Models tab show."""

    kind: str
    model: str = ""
    """The model the probe asked for."""
    models: tuple[str, ...] = ()
    model_listed: bool = True
    completions: bool = False
    chat: bool = False
    n: bool = False
    """The server returns n choices for `n` (else Metagen sends n requests with per-sample seeds)."""
    logprobs: bool = False
    top_logprobs: bool = False
    chat_logprobs: bool = False
    echo: str = "no"
    """"aligned" (echo + logprobs scores the prompt), "misaligned" (answers, but off by one token), "no"."""
    grammar: str | None = None
    json_schema: str | None = None
    forced_logprobs: bool = False
    """Logprobs under a grammar are the model's own (before the constraint): forced decoding can score text."""
    stream: bool = False
    stream_usage: bool = False
    stream_logprobs: bool = False
    """Streamed chunks carry logprobs (else a request that asks for logprobs is not streamed)."""
    interrupts_streams: bool = False
    """The server cuts a streamed answer short when another request arrives (llama_cpp.server's default): requests
    to it are sent unstreamed, which nothing cuts short."""
    tokenize: str | None = None
    probe_s: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def server(self) -> str:
        return SERVER_NAMES.get(self.kind, SERVER_NAMES["unknown"])

    @property
    def sampler_extras(self) -> tuple[str, ...]:
        return SAMPLER_EXTRAS.get(self.kind, ())

    @property
    def score_method(self) -> str | None:
        """How score() works here: "echo", "forced" (decoding under a grammar of the text), or None."""
        if self.completions and self.logprobs and self.echo == "aligned":
            return "echo"
        if self.completions and self.logprobs and self.grammar and self.forced_logprobs:
            return "forced"
        return None

    def choice_method(self, chat: bool) -> str | None:
        """How choice_logprobs() works for a chat (or raw) prompt: "top_logprobs" of one generated token, or None."""
        if chat:
            return "top_logprobs" if self.chat and self.chat_logprobs else None
        if self.completions and self.top_logprobs:
            return "top_logprobs"
        return None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "server": self.server, "score": self.score_method,
                "judge_chat": self.choice_method(True), "judge_raw": self.choice_method(False)}

    def rows(self) -> list[tuple[str, str]]:
        """(feature, what the server does) for people."""
        def yes(flag: bool, how: str = "yes") -> str:
            return how if flag else "no"

        score = {"echo": "yes (prompt logprobs via echo)", "forced": "yes (forced decoding under a grammar)"}
        return [
            ("server", self.server),
            ("chat completions", yes(self.chat)),
            ("raw completions", yes(self.completions, "yes") if self.completions else "no (raw prompts go through "
             "chat)"),
            ("n > 1", "server-side n" if self.n else "n concurrent requests, one seed each"),
            ("logprobs", yes(self.logprobs or self.chat_logprobs) + (", top alternatives" if self.top_logprobs
                                                                     or self.chat_logprobs else "")),
            ("grammar (GBNF)", f"yes (`{self.grammar}` field)" if self.grammar else "no"),
            ("JSON schema", ("yes (converted to a grammar)" if self.json_schema == "grammar" else
                             f"yes (`{self.json_schema}`)") if self.json_schema else "no"),
            ("likelihood verifier (score)", score.get(self.score_method or "", "no")),
            ("LLM judge, chat prompt", yes(self.choice_method(True) is not None, "yes (top logprobs)")),
            ("LLM judge, raw prompt", yes(self.choice_method(False) is not None, "yes (top logprobs)")),
            ("streaming", yes(self.stream) + (", usage reported" if self.stream_usage else
                                              ", usage estimated" if self.stream else "")
             + (", with logprobs" if self.stream_logprobs else "")
             + (" (cut short by other requests: answers are fetched unstreamed)" if self.interrupts_streams else "")),
            ("sampling beyond temperature/top_p", ", ".join(self.sampler_extras) or "not sent"),
            ("tokenizer", f"yes ({self.tokenize})" if self.tokenize else "approximate (4 bytes per token)"),
        ]


def detect_kind(entries: list[dict[str, Any]], http: RemoteHttp) -> str:
    """Which server this is, from the owners /models names (and, where that is ambiguous, one more request)."""
    owners = {str(e.get("owned_by", "")).lower() for e in entries if isinstance(e, dict)}
    for owner, kind in (("vllm", "vllm"), ("sglang", "sglang"), ("llamacpp", "llama_server"),
                        ("metagen", "metagen"), ("ollama", "ollama"), ("library", "ollama")):
        if owner in owners:
            return kind
    if owners & {"openai", "system", "openai-internal"}:
        return "openai"
    try:
        spec = http.get_json("/openapi.json", root=True, attempts=1)
        title = str((spec.get("info") or {}).get("title", "")) if isinstance(spec, dict) else ""
        if "llama.cpp python" in title.lower():
            return "llama_cpp_python"
        if "vllm" in title.lower():
            return "vllm"
    except BackendError:
        pass
    try:
        version = http.get_json("/api/version", root=True, attempts=1)
        if isinstance(version, dict) and "version" in version:
            return "ollama"
    except BackendError:
        pass
    return "unknown"


def _text(choice: dict[str, Any]) -> str:
    if "text" in choice:
        return str(choice.get("text") or "")
    message = choice.get("message") or {}
    return str(message.get("content") or "")


def _first_logprob(choice: dict[str, Any]) -> float | None:
    lp = choice.get("logprobs") or {}
    values = lp.get("token_logprobs")
    if isinstance(values, list) and values and isinstance(values[0], int | float):
        return float(values[0])
    content = lp.get("content")
    if isinstance(content, list) and content and isinstance(content[0], dict):
        value = content[0].get("logprob")
        return float(value) if isinstance(value, int | float) else None
    return None


class _Prober:
    """The probe requests of one server and model (each tiny: 1 to 12 tokens at temperature 0)."""

    def __init__(self, http: RemoteHttp, model: str, kind: str) -> None:
        self.http = http
        self.model = model
        self.kind = kind
        self.malformed: str | None = None
        """The first answer with status 200 that was not an OpenAI-shaped answer (path and a glimpse of it)."""

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """The answer, or None where the server refuses the request (a missing feature). A refused key or a
        server that cannot be reached is no missing feature: those errors go up."""
        try:
            answer = self.http.post_json(path, {"model": self.model, **body}, attempts=PROBE_ATTEMPTS)
        except RemoteStatusError as exc:
            if exc.status in (401, 403):
                raise
            log.debug("probe %s %s refused: %s", path, sorted(body), exc)
            return None
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if isinstance(choices, list) and choices and all(isinstance(c, dict) for c in choices):
            return answer
        if self.malformed is None:
            self.malformed = f"{path} with {str(answer)[:120]!r}"
        return None

    def completion(self, **body: Any) -> dict[str, Any] | None:
        return self.post("/completions", {"prompt": PROBE_PROMPT, "max_tokens": 1, "temperature": 0, **body})

    def chat(self, **body: Any) -> dict[str, Any] | None:
        return self.post("/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1,
                                               "temperature": 0, **body})

    def echo(self, first: dict[str, Any]) -> str:
        """Whether echo + logprobs scores prompt tokens: the logprob it gives the greedy token, once that token is
        part of the prompt, must be the one the plain request gave it."""
        lp = first.get("logprobs") or {}
        tokens, values = lp.get("tokens") or [], lp.get("token_logprobs") or []
        if not tokens or not values or values[0] is None:
            return "no"
        token, expected = str(tokens[0]), float(values[0])
        answer = self.completion(prompt=PROBE_PROMPT + token, logprobs=1, echo=True)
        if answer is None:
            return "no"
        lp = answer["choices"][0].get("logprobs") or {}
        got = prompt_logprobs(lp, len(PROBE_PROMPT), len(PROBE_PROMPT) + len(token))
        if not _text(answer["choices"][0]).startswith(PROBE_PROMPT) or got is None:
            return "no"
        return "aligned" if len(got) == 1 and math.isclose(got[0], expected, abs_tol=0.02, rel_tol=0.01) \
            else "misaligned"

    def constrained(self, fields: dict[str, Any], expect: Any, use_completions: bool,
                    logprobs: bool) -> tuple[bool, bool]:
        """(the constraint held, the first token's logprob is the model's own) for one way of sending it."""
        extra = {"logprobs": 1} if logprobs and use_completions else {}
        if use_completions:
            answer = self.completion(max_tokens=12, **fields, **extra)
        else:
            answer = self.chat(max_tokens=12, **fields)
        if answer is None:
            return False, False
        choice = answer["choices"][0]
        text = _text(choice).strip()
        held = text == expect if isinstance(expect, str) else _json_equals(text, expect)
        first = _first_logprob(choice) if extra else None
        return held, held and first is not None and first < -1.0

    def stream(self, use_completions: bool, logprobs: bool) -> tuple[bool, bool, bool]:
        """(streaming works, the stream ends with usage, streamed chunks carry the logprobs asked for)."""
        path = "/completions" if use_completions else "/chat/completions"
        body: dict[str, Any] = {"model": self.model, "max_tokens": 1, "temperature": 0, "stream": True}
        body.update({"prompt": PROBE_PROMPT} if use_completions else {"messages": [{"role": "user", "content": "Hi"}]})
        usage = {"stream_options": {"include_usage": True}}
        asked = ({"logprobs": 1} if use_completions else {"logprobs": True, "top_logprobs": 1}) if logprobs else {}
        for options in ({**usage, **asked}, usage, asked, {}):
            try:
                with self.http.stream(path, {**body, **options}, attempts=PROBE_ATTEMPTS) as events:
                    seen = list(events)
            except RemoteStatusError as exc:
                if exc.status in (401, 403):
                    raise
                continue
            if seen:
                with_logprobs = bool(asked) and "logprobs" in options and any(
                    (c.get("logprobs") or {}) for e in seen for c in e.get("choices") or [])
                return True, any(isinstance(e.get("usage"), dict) for e in seen), with_logprobs
        return False, False, False

    def interrupts(self, use_completions: bool) -> bool:
        """Whether a second request cuts a running stream short: a long streamed answer, a second streamed request
        sent once its first piece arrived, and the first one's end read (no finish_reason: it was cut)."""
        path = "/completions" if use_completions else "/chat/completions"
        body: dict[str, Any] = {"model": self.model, "max_tokens": OVERLAP_TOKENS, "temperature": 0, "stream": True}
        body.update({"prompt": OVERLAP_PROMPT} if use_completions else
                    {"messages": [{"role": "user", "content": "Count from 1 to 30: " + OVERLAP_PROMPT}]})
        second = {**body, "max_tokens": 1}
        other: threading.Thread | None = None
        finished = False
        try:
            with self.http.stream(path, body, attempts=PROBE_ATTEMPTS) as events:
                for event in events:
                    if other is None:
                        other = threading.Thread(target=self._drain, args=(path, second), daemon=True)
                        other.start()
                    finished = finished or any(c.get("finish_reason") for c in event.get("choices") or []
                                               if isinstance(c, dict))
        except BackendError as exc:
            log.debug("overlap probe on %s: %s", self.http.base_url, exc)
            return False
        finally:
            if other is not None:
                other.join(self.http.timeout_s)
        return other is not None and not finished

    def _drain(self, path: str, body: dict[str, Any]) -> None:
        try:
            with self.http.stream(path, body, attempts=1) as events:
                for _ in events:
                    pass
        except BackendError as exc:
            log.debug("overlap probe's second request on %s: %s", self.http.base_url, exc)

    def tokenize(self) -> str | None:
        endpoint = TOKENIZE_ENDPOINTS.get(self.kind)
        if endpoint is None:
            return None
        path, key = endpoint
        try:
            answer = self.http.post_json(path, {"model": self.model, key: "Hello world"}, root=True,
                                         attempts=PROBE_ATTEMPTS)
        except BackendError:
            return None
        tokens = answer.get("tokens") if isinstance(answer, dict) else None
        return path if isinstance(tokens, list) and tokens else None


def _json_equals(text: str, expect: Any) -> bool:
    try:
        return json.loads(text) == expect
    except (json.JSONDecodeError, RecursionError):
        return False


def grammar_fields(method: str, grammar: str) -> dict[str, Any]:
    """The request fields that carry a GBNF grammar for one method."""
    if method == "structured_outputs":
        return {"structured_outputs": {"grammar": grammar}}
    return {method: grammar}


def schema_fields(method: str, schema: Any) -> dict[str, Any]:
    """The request fields that carry a JSON schema (a dict) for one method (not "grammar": that one converts)."""
    if method == "response_format":
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": "output", "schema": schema, "strict": True}}}
    if method == "structured_outputs":
        return {"structured_outputs": {"json": schema}}
    return {method: schema}


def prompt_logprobs(lp: dict[str, Any], start: int, end: int) -> list[float] | None:
    """The logprobs of the echoed tokens that start within [start, end) of the text (None where a token of that
    span has none: the first token of a prompt never has one)."""
    tokens = lp.get("tokens") or []
    values = lp.get("token_logprobs") or []
    offsets = lp.get("text_offset")
    if not isinstance(offsets, list) or len(offsets) != len(tokens):
        offsets, at = [], 0
        for t in tokens:
            offsets.append(at)
            at += len(str(t))
    out = []
    for offset, value in zip(offsets, values, strict=False):
        if start <= int(offset) < end:
            if not isinstance(value, int | float):
                return None
            out.append(float(value))
    return out


def _completion_caps(p: _Prober) -> dict[str, Any]:
    """What /completions does: plain answers, n, logprobs and top logprobs, echo."""
    completions = p.completion() is not None
    caps: dict[str, Any] = {"completions": completions, "n": False, "logprobs": False, "top_logprobs": False,
                            "echo": "no"}
    if not completions:
        return caps
    answer = p.completion(n=2, temperature=1.0, seed=1)
    caps["n"] = answer is not None and len(answer["choices"]) == 2
    first = p.completion(logprobs=2)
    if first is not None:
        lp = first["choices"][0].get("logprobs") or {}
        caps["logprobs"] = _first_logprob(first["choices"][0]) is not None
        tops = lp.get("top_logprobs") or []
        caps["top_logprobs"] = bool(tops) and isinstance(tops[0], dict) and len(tops[0]) >= 2
        if caps["logprobs"]:
            caps["echo"] = p.echo(first["choices"][0])
    return caps


def _chat_caps(p: _Prober) -> dict[str, Any]:
    """What /chat/completions does: answers at all, and top logprobs."""
    chat_answer = p.chat(logprobs=True, top_logprobs=2)
    chat_logprobs = False
    if chat_answer is not None:
        content = (chat_answer["choices"][0].get("logprobs") or {}).get("content") or []
        chat_logprobs = bool(content) and len(content[0].get("top_logprobs") or []) >= 2
    return {"chat": chat_answer is not None or p.chat() is not None, "chat_logprobs": chat_logprobs}


def _constraint_caps(p: _Prober, kind: str, completions: bool, logprobs: bool) -> dict[str, Any]:
    """Which grammar and JSON-schema fields the server holds to (the first that works, in GRAMMAR_METHODS' and
    SCHEMA_METHODS' order), and whether a grammar forces logprobs of given text."""
    grammar, forced = None, False
    for method in GRAMMAR_METHODS.get(kind, ()):
        held, raw = p.constrained(grammar_fields(method, PROBE_GRAMMAR), "QZ", completions, logprobs)
        if held:
            grammar, forced = method, raw
            break
    json_schema = "grammar" if grammar else None
    if json_schema is None and kind not in ("llama_cpp_python",):
        for method in SCHEMA_METHODS:
            held, _ = p.constrained(schema_fields(method, PROBE_SCHEMA), {"a": "QZ"}, completions, False)
            if held:
                json_schema = method
                break
    return {"grammar": grammar, "json_schema": json_schema, "forced_logprobs": forced}


def _answers_nothing(http: RemoteHttp, model: str, ids: tuple[str, ...], p: _Prober) -> BackendError:
    if p.malformed:
        return MalformedAnswerError(f"the server at {http.base_url} answered {p.malformed}, not an OpenAI-shaped "
                                    "answer (a list of choices); is base_url an OpenAI-compatible API?")
    return BackendError(f"the server at {http.base_url} answered neither /completions nor /chat/completions for "
                        f"model {model!r}; check the model name (it lists: {', '.join(ids[:8]) or 'nothing'}).")


def probe(http: RemoteHttp, model: str) -> Capabilities:
    """Contact the server: list its models, then find what it does for `model` (about ten tiny requests)."""
    started = time.perf_counter()
    listing = http.get_json("/models")
    entries = listing.get("data") if isinstance(listing, dict) else None
    entries = [e for e in entries or [] if isinstance(e, dict)]
    ids = tuple(str(e.get("id")) for e in entries)
    kind = detect_kind(entries, http)
    p = _Prober(http, model, kind)
    notes: list[str] = []
    if ids and model not in ids:
        notes.append(f"the server does not list {model!r} (it lists {', '.join(ids[:8])})")
    plain = _completion_caps(p)
    chat = _chat_caps(p)
    if not plain["completions"] and not chat["chat"]:
        raise _answers_nothing(http, model, ids, p)
    constraints = _constraint_caps(p, kind, plain["completions"], plain["logprobs"])
    stream, stream_usage, stream_logprobs = p.stream(
        plain["completions"], plain["logprobs"] if plain["completions"] else chat["chat_logprobs"])
    if plain["echo"] == "misaligned":
        notes.append("echo logprobs are shifted by one token (llama-cpp-python with a model without BOS); "
                     "scoring uses forced decoding instead" if constraints["grammar"] and constraints["forced_logprobs"]
                     else "echo logprobs are shifted by one token, so they cannot score text")
    interrupts = stream and p.interrupts(plain["completions"])
    if interrupts:
        notes.append("the server cuts a streamed answer short whenever another request arrives (llama_cpp.server "
                     "without --interrupt_requests False): Metagen fetches its answers unstreamed")
    return Capabilities(kind=kind, model=model, models=ids, model_listed=not ids or model in ids, **plain, **chat,
                        **constraints, stream=stream, stream_usage=stream_usage, stream_logprobs=stream_logprobs,
                        interrupts_streams=interrupts, tokenize=p.tokenize(),
                        probe_s=round(time.perf_counter() - started, 3), notes=tuple(notes))


_CACHE: dict[tuple[str, str, str | None], Capabilities] = {}
_CACHE_LOCK = threading.Lock()
_PROBE_LOCKS: dict[tuple[str, str, str | None], threading.Lock] = {}


def capabilities(http: RemoteHttp, model: str, refresh: bool = False,
                 cancel: CancelToken | None = None) -> Capabilities:
    """The server's capabilities for `model`, probed once per (base_url, model, key variable) and cached; concurrent
    callers wait for the one probe. The probe takes at most PROBE_MAX_S (or the server's timeout_s) and stops on
    `cancel`: a cancelled probe caches nothing."""
    key = (http.base_url, model, http.api_key_env)
    with _CACHE_LOCK:
        if not refresh and key in _CACHE:
            return _CACHE[key]
        lock = _PROBE_LOCKS.setdefault(key, threading.Lock())
    with lock:
        with _CACHE_LOCK:
            if not refresh and key in _CACHE:
                return _CACHE[key]
        with http.bounded(cancel, min(PROBE_MAX_S, http.timeout_s)):
            caps = probe(http, model)
        log.info("probed %s (%s) in %.2fs", http.base_url, caps.server, caps.probe_s)
        with _CACHE_LOCK:
            _CACHE[key] = caps
        return caps


def forget(base_url: str | None = None) -> None:
    """Drop cached capabilities (of one server, or all): the next request probes again."""
    with _CACHE_LOCK:
        for key in [k for k in _CACHE if base_url is None or k[0] == base_url.rstrip("/")]:
            del _CACHE[key]


def check_server(base_url: str, model: str | None = None, api_key_env: str | None = None,
                 timeout_s: float = 60) -> Capabilities:
    """Probe a server afresh (`metagen models check`, the Models tab): `model`, or the first model it lists."""
    http = RemoteHttp(base_url, api_key_env, timeout_s=timeout_s, max_attempts=2)
    try:
        if not model:
            listing = http.get_json("/models")
            ids = [str(e.get("id")) for e in (listing.get("data") or []) if isinstance(e, dict)] \
                if isinstance(listing, dict) else []
            if not ids:
                raise BackendError(f"the server at {http.base_url} lists no models; name one with --model")
            model = ids[0]
        return capabilities(http, model, refresh=True)
    finally:
        http.close()
