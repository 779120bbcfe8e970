"""The sample-level cache: a seeded sample depends only on its model, prompt, decoding params and its own seed,
never on how many were drawn with it, so raising N draws only the new samples; scores are cached the same way
per candidate."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import asdict, replace
from typing import Any, Generic, TypeVar

from backends.base import Prompt, SamplingParams

T = TypeVar("T")

MAX_SAMPLES = 50_000
"""Completions kept (least recently used go first): a few hundred MB at most for long completions."""


def prompt_key(prompt: Prompt) -> str:
    """A stable text of a prompt (a string, or chat messages)."""
    if isinstance(prompt, str):
        return prompt
    return json.dumps([asdict(m) if hasattr(m, "__dataclass_fields__") else m for m in prompt], sort_keys=True,
                      default=str)


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def sample_key(model_id: str, prompt: Prompt, params: SamplingParams, seed: int) -> str:
    """The identity of one seeded sample: everything that decides its text except N (and the request's seed,
    replaced by the sample's own)."""
    return _digest("sample", model_id, prompt_key(prompt), asdict(replace(params, seed=None)), seed)


def score_key(model_id: str, prefix: Prompt, continuation: str) -> str:
    return _digest("score", model_id, prompt_key(prefix), continuation)


def choice_key(model_id: str, prompt: Prompt, choices: list[str]) -> str:
    return _digest("choice", model_id, prompt_key(prompt), choices)


class LruCache(Generic[T]):
    """A thread-safe least-recently-used map with hit/miss counters."""

    def __init__(self, max_entries: int = MAX_SAMPLES) -> None:
        self.max_entries = max_entries
        self._items: OrderedDict[str, T] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> T | None:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: str, value: T) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


class SampleCache:
    """Seeded completions, candidate scores and judge answers of every run of one scheduler."""

    def __init__(self, max_entries: int = MAX_SAMPLES) -> None:
        self.samples: LruCache[Any] = LruCache(max_entries)
        self.scores: LruCache[Any] = LruCache(max_entries)
        self.choices: LruCache[Any] = LruCache(max_entries)

    def clear(self) -> None:
        for cache in (self.samples, self.scores, self.choices):
            cache.clear()


def shared_seed(run_seed: int, prompt: Prompt) -> int:
    """The first seed of a sampler under `metagen eval --share-samples`: derived from the run seed and the prompt
    (which holds the item), not the node id, so workflows drawing the same prompt draw the same seeded samples
    and the sample cache serves each sample once to all of them."""
    digest = hashlib.sha256(json.dumps(["shared", run_seed, prompt_key(prompt)]).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
