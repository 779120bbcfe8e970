"""Request bodies for a remote OpenAI-compatible server, translated per server, and the answers read back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from backends.base import BackendError, ChatMessage, Prompt, SamplingParams, TokenLogprob, Usage
from backends.grammar.grammar_constraints import checked_grammar, schema_to_grammar
from backends.remote.openai_caps import Capabilities, grammar_fields, schema_fields

GRAMMAR_SERVERS = "llama.cpp (llama-server, llama_cpp.server), vLLM and SGLang"
SCHEMA_SERVERS = "llama.cpp, vLLM, SGLang, Ollama, OpenAI and metagen serve"


def messages_of(prompt: Prompt) -> list[dict[str, str]]:
    """Chat messages as the API takes them (a raw prompt becomes one user message)."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [{"role": str(m.get("role", "user")), "content": str(m.get("content", ""))} for m in prompt]


def readable(prompt: Prompt, add_generation_prompt: bool = True) -> str:
    """A chat prompt as text for traces (the server applies the model's real chat template, which it keeps)."""
    if isinstance(prompt, str):
        return prompt
    messages: Sequence[ChatMessage] = prompt
    text = "".join(f"<|{m.get('role', 'user')}|>\n{m.get('content', '')}\n" for m in messages)
    return text + ("<|assistant|>\n" if add_generation_prompt else "")


def gbnf_literal(text: str) -> str:
    """A GBNF grammar whose only sentence is `text`."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    return f'root ::= "{"".join(out)}"'


def sampling_fields(params: SamplingParams, caps: Capabilities) -> dict[str, Any]:
    """max_tokens, temperature, top_p, stop, and the settings this server takes beyond OpenAI's."""
    body: dict[str, Any] = {"max_tokens": params.max_tokens, "temperature": params.temperature,
                            "top_p": params.top_p}
    extras = caps.sampler_extras
    if "top_k" in extras:
        body["top_k"] = params.top_k if params.top_k > 0 or caps.kind.startswith("llama") else -1
    if "min_p" in extras:
        body["min_p"] = params.min_p
    if "typical_p" in extras:
        body["typical_p"] = params.typical_p
    if "repeat_penalty" in extras:
        body["repeat_penalty"] = params.repeat_penalty
    if "repetition_penalty" in extras:
        body["repetition_penalty"] = params.repeat_penalty
    if params.stop:
        body["stop"] = list(params.stop)
    return body


def constraint_fields(params: SamplingParams, caps: Capabilities, where: str) -> dict[str, Any]:
    """The grammar or JSON schema of `params` in the form this server takes; BackendError naming the limit."""
    if params.grammar:
        grammar = checked_grammar(params.grammar)
        if not caps.grammar:
            alt = f"; it does take a JSON schema (`{caps.json_schema}`)" if caps.json_schema else ""
            raise BackendError(f"{caps.server} at {where} takes no GBNF grammar{alt}. Grammars work with "
                               f"{GRAMMAR_SERVERS}; use one of those, or the embedded engine.")
        return grammar_fields(caps.grammar, grammar)
    if params.json_schema:
        if caps.json_schema == "grammar" and caps.grammar:
            return grammar_fields(caps.grammar, schema_to_grammar(params.json_schema))
        if not caps.json_schema:
            raise BackendError(f"{caps.server} at {where} takes no JSON schema constraint. JSON schemas work with "
                               f"{SCHEMA_SERVERS}; use one of those, or the embedded engine.")
        try:
            schema = json.loads(params.json_schema)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise BackendError(f"json_schema is not valid JSON: {exc}. Give the schema as JSON text.") from None
        schema_to_grammar(params.json_schema)  # the same bounds as the embedded engine: refused here, not there
        return schema_fields(caps.json_schema, schema)
    return {}


def logprob_fields(k: int | None, chat: bool) -> dict[str, Any]:
    if k is None:
        return {}
    return {"logprobs": True, "top_logprobs": k} if chat else {"logprobs": k}


def _top(entries: Any, k: int | None) -> list[tuple[str, float]]:
    pairs: list[tuple[str, float]] = []
    if isinstance(entries, dict):
        pairs = [(str(t), float(v)) for t, v in entries.items() if isinstance(v, int | float)]
    elif isinstance(entries, list):
        pairs = [(str(e.get("token", "")), float(e["logprob"])) for e in entries
                 if isinstance(e, dict) and isinstance(e.get("logprob"), int | float)]
    pairs.sort(key=lambda p: -p[1])
    return pairs if k is None else pairs[:k]


def token_logprobs(lp: Any, k: int | None) -> list[TokenLogprob]:
    """The chosen tokens of one answer (or streamed chunk) with their alternatives, from either API's shape."""
    if not isinstance(lp, dict):
        return []
    out: list[TokenLogprob] = []
    content = lp.get("content")
    if isinstance(content, list):  # chat
        for entry in content:
            if isinstance(entry, dict) and isinstance(entry.get("logprob"), int | float):
                out.append(TokenLogprob(str(entry.get("token", "")), float(entry["logprob"]),
                                        _top(entry.get("top_logprobs"), k)))
        return out
    tokens = lp.get("tokens") or []
    values = lp.get("token_logprobs") or []
    tops = lp.get("top_logprobs") or []
    for i, (token, value) in enumerate(zip(tokens, values, strict=False)):
        if isinstance(value, int | float):
            out.append(TokenLogprob(str(token), float(value), _top(tops[i] if i < len(tops) else None, k)))
    return out


def choice_text(choice: dict[str, Any]) -> str:
    """The text of a choice or of a streamed chunk's choice."""
    if "text" in choice:
        return str(choice.get("text") or "")
    part = choice.get("delta") or choice.get("message") or {}
    return str(part.get("content") or "") if isinstance(part, dict) else ""


def choice_reasoning(choice: dict[str, Any]) -> str:
    """The separate reasoning text of a choice or streamed chunk: `reasoning_content` (vLLM, SGLang, llama-server,
    DeepSeek) or `reasoning` (newer vLLM); '' when the server sends none."""
    part = choice.get("delta") or choice.get("message") or {}
    if not isinstance(part, dict):
        return ""
    value = part.get("reasoning_content") or part.get("reasoning") or ""
    return value if isinstance(value, str) else ""


def reasoning_tokens(usage: dict[str, Any] | None) -> int:
    """completion_tokens_details.reasoning_tokens of a server's usage, or 0."""
    details = (usage or {}).get("completion_tokens_details")
    value = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def finish_reason(choice: dict[str, Any], params: SamplingParams) -> str:
    """The server's finish reason in the engine's words: "length", "stop" (a stop string) or "eog" (end of text).
    OpenAI's "stop" covers both of the last two; vLLM's `stop_reason` and SGLang's `matched_stop` tell them apart,
    other servers do not (then "stop" when stop strings were given, else "eog")."""
    reason = choice.get("finish_reason")
    if reason == "length":
        return "length"
    for key in ("stop_reason", "matched_stop"):
        if key in choice:
            return "stop" if isinstance(choice[key], str) else "eog"
    return "stop" if params.stop else "eog"


@dataclass
class Answer:
    """The choices of one HTTP request, as they arrived."""

    texts: dict[int, str] = field(default_factory=dict)
    finishes: dict[int, dict[str, Any]] = field(default_factory=dict)
    """The choice (or last chunk) that carried each finish_reason."""
    logprobs: dict[int, list[TokenLogprob]] = field(default_factory=dict)
    reasoning: dict[int, str] = field(default_factory=dict)
    """The server's separate reasoning text per choice (reasoning_content), where it sends one."""
    reasoning_pieces: dict[int, int] = field(default_factory=dict)
    """Streamed chunks with reasoning text per choice (its token count where the server reports none)."""
    pieces: dict[int, int] = field(default_factory=dict)
    """Streamed chunks with text per choice (the token count where the server reports none)."""
    done_at: dict[int, float] = field(default_factory=dict)
    calls: dict[int, dict[int, dict[str, str]]] = field(default_factory=dict)
    """The server's parsed tool calls per choice, by call index: {id, name, arguments (JSON text)}."""
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    first_token_s: float | None = None


def usage_of(answer: Answer, prompt_tokens_guess: int) -> Usage:
    """Counters of one request: the server's usage (cached prompt tokens where reported), else estimates."""
    u = answer.usage or {}
    completion = sum(max(answer.pieces.get(i, 0), len(answer.logprobs.get(i, []))) for i in answer.texts)
    prompt = int(u.get("prompt_tokens") or 0) or prompt_tokens_guess
    if u.get("completion_tokens") is not None:
        completion = int(u["completion_tokens"])
    details = u.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
    timings = answer.timings or {}
    if not cached and isinstance(timings.get("cache_n"), int):
        cached = int(timings["cache_n"])
    cached = min(cached, prompt)
    usage = Usage(prompt_tokens=prompt, prompt_tokens_evaluated=prompt - cached, prompt_tokens_cached=cached,
                  completion_tokens=completion,
                  thinking_tokens=reasoning_tokens(u) or sum(answer.reasoning_pieces.values()))
    if isinstance(timings.get("prompt_ms"), int | float):
        usage.prefill_s = float(timings["prompt_ms"]) / 1000
    elif answer.first_token_s is not None:
        usage.prefill_s = answer.first_token_s
    if isinstance(timings.get("predicted_ms"), int | float):
        usage.decode_s = float(timings["predicted_ms"]) / 1000
    return usage
