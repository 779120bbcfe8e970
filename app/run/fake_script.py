"""A script for the fake model of a whole server process (`--dry-run --fake-script FILE`): its replies, read and
checked from a JSON or YAML file."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

KEYS = ("by_prompt", "replies", "latency_s", "token_delay_s", "n_ctx")

EXAMPLE = ('{"by_prompt": {"MG-MARKER-4711": "The command printed MG-MARKER-4711"}, '
           '"replies": [{"tool_calls": [{"name": "Bash", "arguments": {"command": "echo MG-MARKER-$((4700+11))"}}]}]}')


class FakeScriptError(ValueError):
    """A fake script that cannot be used: the message says what is wrong and how the file should look."""


@dataclass(frozen=True)
class FakeScript:
    """What the fake answers (FakeBackend's order): the first `by_prompt` key found in the rendered prompt gives the
    reply (a list: one reply per seed), else `replies` in turn, cycling; else the seeded echo. A reply written as a
    JSON object is sent as its JSON text (a tool call in the generic form, for instance)."""

    by_prompt: Mapping[str, str | tuple[str, ...]] = field(default_factory=dict)
    replies: tuple[str, ...] = ()
    latency_s: float = 0.0
    token_delay_s: float = 0.0
    n_ctx: int | None = None
    """The context the fake claims (a word is a token; None: the served model file's); an agent's prompt is
    10-20k words, more than the bundled model's 8192."""

    def backend_kwargs(self) -> dict[str, Any]:
        """FakeBackend's keyword arguments for this script."""
        return {"by_prompt": {k: list(v) if isinstance(v, tuple) else v for k, v in self.by_prompt.items()},
                "replies": list(self.replies), "latency_s": self.latency_s, "token_delay_s": self.token_delay_s,
                "n_ctx": self.n_ctx}


def _reply_text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    raise FakeScriptError(f"{where} must be a reply: text, or a JSON object sent as its JSON text (got "
                          f"{type(value).__name__})")


def _delay(data: Mapping[str, Any], key: str) -> float:
    value = data.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise FakeScriptError(f"{key} must be a number of seconds, 0 or more (got {value!r})")
    return float(value)


def parse_fake_script(data: Any, source: str = "the fake script") -> FakeScript:
    """The script held by `data` (the file's parsed content); FakeScriptError naming what is wrong."""
    if not isinstance(data, Mapping):
        raise FakeScriptError(f"{source} must be a mapping with by_prompt and/or replies, for example {EXAMPLE}")
    unknown = sorted(set(map(str, data)) - set(KEYS))
    if unknown:
        raise FakeScriptError(f"{source}: unknown key(s) {', '.join(unknown)}; the keys are {', '.join(KEYS)}")
    by_prompt_raw = data.get("by_prompt") or {}
    if not isinstance(by_prompt_raw, Mapping):
        raise FakeScriptError(f"{source}: by_prompt must map a text found in the prompt to its reply")
    by_prompt: dict[str, str | tuple[str, ...]] = {}
    for key, value in by_prompt_raw.items():
        if not isinstance(key, str) or not key:
            raise FakeScriptError(f"{source}: by_prompt keys must be non-empty text (got {key!r})")
        where = f"{source}: by_prompt[{key!r}]"
        if isinstance(value, list):  # one reply per seed, as FakeBackend takes it
            if not value:
                raise FakeScriptError(f"{where} is an empty list: give a reply, or a list of replies by seed")
            by_prompt[key] = tuple(_reply_text(v, f"{where}[{i}]") for i, v in enumerate(value))
        else:
            by_prompt[key] = _reply_text(value, where)
    replies_raw = data.get("replies") or []
    if not isinstance(replies_raw, list):
        raise FakeScriptError(f"{source}: replies must be a list of replies, used in turn")
    replies = tuple(_reply_text(v, f"{source}: replies[{i}]") for i, v in enumerate(replies_raw))
    if not by_prompt and not replies:
        raise FakeScriptError(f"{source} scripts nothing: give by_prompt and/or replies, for example {EXAMPLE}")
    n_ctx = data.get("n_ctx")
    if n_ctx is not None and (isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx < 16):
        raise FakeScriptError(f"{source}: n_ctx must be a whole number of tokens, 16 or more (got {n_ctx!r})")
    return FakeScript(by_prompt, replies, _delay(data, "latency_s"), _delay(data, "token_delay_s"), n_ctx)


def load_fake_script(path: str | Path) -> FakeScript:
    """The script in the JSON or YAML file `path`; FakeScriptError when it cannot be read or is malformed."""
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise FakeScriptError(f"cannot read the fake script {file}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text) if file.suffix.lower() == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise FakeScriptError(f"the fake script {file} is not valid {'JSON' if file.suffix == '.json' else 'YAML'}: "
                              f"{exc}") from None
    return parse_fake_script(data, f"the fake script {file}")
