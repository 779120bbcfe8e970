"""The engine worker's protocol, the one place both sides read: the methods a worker serves (engine work or not,
streaming or not, cancellable or not), the frames that cross its socket, and its liveness settings."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

# -- the methods ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Method:
    """One method a worker serves. `engine_work`: a success proves the engine works (it resets the count of stops
    in a row, and the request makes the model busy); `streams`: its tokens come back one by one while it runs;
    `cancellable`: it takes a `cancel` keyword the worker fills with a token the studio's cancel reaches."""

    name: str
    engine_work: bool
    streams: bool = False
    cancellable: bool = False


METHODS: dict[str, dict[str, Method]] = {
    "llama": {m.name: m for m in (
        Method("generate", engine_work=True, streams=True, cancellable=True),
        Method("score", engine_work=True, cancellable=True),
        Method("choice_logprobs", engine_work=True, cancellable=True),
        Method("beam_search", engine_work=True, cancellable=True),
        Method("step_logprobs", engine_work=True, cancellable=True),
        Method("single_token", engine_work=False),
        Method("render_prompt", engine_work=False),
        Method("tokenize", engine_work=False),
        Method("info", engine_work=False),
        Method("engine_stats", engine_work=False),
    )},
    "rank": {m.name: m for m in (
        Method("rank", engine_work=True, cancellable=True),
        Method("score", engine_work=True, cancellable=True),
        Method("choice_logprobs", engine_work=True, cancellable=True),
        Method("generate", engine_work=True, streams=True, cancellable=True),
        Method("pair_tokens", engine_work=False),
        Method("render_prompt", engine_work=False),
        Method("tokenize", engine_work=False),
        Method("info", engine_work=False),
    )},
}
"""What a worker of each kind serves ("llama": LlamaBackend, "rank": RankBackend): nothing else crosses."""

KIND_NAMES = {"llama": "llama.cpp engine", "rank": "llama.cpp rank engine"}
"""How messages name a worker's engine: "the llama.cpp engine for X"."""


def method(kind: str, name: str) -> Method:
    """The table's entry, or a ValueError naming what a worker of this kind serves."""
    try:
        return METHODS[kind][name]
    except KeyError:
        served = ", ".join(METHODS.get(kind, {}))
        raise ValueError(f"an engine worker of kind {kind!r} does not serve {name!r} (it serves: {served})") from None


# -- the frames ----------------------------------------------------------------------------------------------------

# Studio -> worker.
LOAD = 1
"""rid 0, payload: pickled LoadOrder."""
CALL = 2
"""payload: pickled (method name, args, kwargs, cancellable, stream)."""
CANCEL = 3
"""payload: the reason, UTF-8."""
CLOSE = 4
"""End the worker."""

# Worker -> studio.
BEAT = 10
"""Sent every beat_s by the worker whatever it does; rid: the load-progress counter (it grows while a model loads)."""
READY = 11
"""rid 0, payload: pickled description of the loaded backend."""
FAILED = 12
"""rid 0, payload: pickled exception: the model could not load."""
TOKEN = 13
"""payload: 4-byte sample index, then the piece's UTF-8 text."""
DONE = 14
"""payload: pickled result."""
ERROR = 15
"""payload: pickled exception."""
CANCELLED = 16
"""The worker received the cancel of this request (the engine stops it at its next step)."""

_HEADER = struct.Struct("!BQ")
_INDEX = struct.Struct("!I")
HEADER_SIZE = _HEADER.size


def frame(kind: int, rid: int, payload: bytes = b"") -> bytes:
    """One message: a kind byte, the request id, then its payload (already bytes: pickled by whoever owns it)."""
    return _HEADER.pack(kind, rid) + payload


def parse(data: bytes) -> tuple[int, int, bytes]:
    """(kind, request id, payload) of a frame."""
    kind, rid = _HEADER.unpack_from(data)
    return kind, rid, data[HEADER_SIZE:]


def token_frame(rid: int, index: int, text: str) -> bytes:
    return _HEADER.pack(TOKEN, rid) + _INDEX.pack(index) + text.encode("utf-8", "surrogatepass")


def token_payload(payload: bytes) -> tuple[int, str]:
    """(sample index, text) of a TOKEN frame's payload."""
    return _INDEX.unpack_from(payload)[0], payload[_INDEX.size:].decode("utf-8", "surrogatepass")


# -- liveness --------------------------------------------------------------------------------------------------------

STALL_ENV = "METAGEN_ENGINE_STALL_S"
"""Environment variable: seconds without a sign of life after which a worker with requests in flight (or loading a
model) counts as hung and is ended (default 20)."""


@dataclass(frozen=True)
class Liveness:
    """The studio's rules for a worker that stops answering. `beat_s`: how often the worker says it is alive;
    `stall_s`: silence after which a worker with work in flight (requests, a load) is ended as hung;
    `cancel_grace_s`: how long a worker gets to acknowledge a cancel before it is ended (not counted as a crash);
    `cancel_stop_s`: how long a cancelled request may still run after the acknowledgement; `load_stall_s`: a load
    whose progress does not move for this long is ended (as Ollama's load timeout); `reply_wait_s`: how long a
    cancelled caller waits for the worker's own answer before it returns."""

    beat_s: float = 1.0
    stall_s: float = 20.0
    cancel_grace_s: float = 2.0
    cancel_stop_s: float = 60.0
    load_stall_s: float = 300.0
    reply_wait_s: float = 0.25

    @property
    def tick_s(self) -> float:
        """How often the studio's watch looks at a quiet worker."""
        return min(0.25, self.beat_s / 2, self.cancel_grace_s / 4)


def liveness_from_env() -> Liveness:
    """The default rules, with $METAGEN_ENGINE_STALL_S (a positive number of seconds) when set."""
    text = os.environ.get(STALL_ENV, "").strip()
    if not text:
        return Liveness()
    try:
        stall = float(text)
    except ValueError:
        stall = 0.0
    if not stall > 0:
        raise ValueError(f"{STALL_ENV}={text!r}: give a positive number of seconds, e.g. 20")
    return Liveness(beat_s=min(1.0, stall / 4), stall_s=stall)
