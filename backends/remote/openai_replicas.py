"""One model on several OpenAI-compatible servers: a run stays on its server, new runs go to the least busy one,
a failing server is taken out (its requests retried elsewhere), probed again with backoff and put back."""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from backends.base import (
    BackendError,
    CancelToken,
    ChoiceResult,
    GenerateResult,
    ModelSpec,
    Prompt,
    RankResult,
    SamplingParams,
    ScoreResult,
    TokenCallback,
)
from backends.remote.openai_backend import DEFAULT_MAX_CONCURRENCY, OpenAIBackend
from backends.remote.openai_caps import Capabilities, forget
from backends.remote.openai_http import server_down
from backends.tools.types import ToolRequest

log = logging.getLogger(__name__)

FAILOVER_HTTP_ATTEMPTS = 2
"""HTTP tries at one server before its request moves to another (one server alone keeps the usual retries)."""
REPROBE_FIRST_S = 1.0
REPROBE_MAX_S = 30.0
"""A server taken out is asked again after 1 s, then 2, 4 ... up to 30 s between tries."""


@dataclass
class Replica:
    """One server of the set and what the router knows of it (guarded by the set's lock)."""

    url: str
    backend: OpenAIBackend
    concurrency: int
    outstanding: int = 0
    """Calls (generate, score, judge, rank) in flight on this server."""
    served: int = 0
    """HTTP requests whose answers were used (a call of n samples may be n requests; a call that failed over is
    counted on the server that answered it)."""
    calls: int = 0
    busy_s: float = 0.0
    up: bool = True
    error: str = ""
    retry_at: float = 0.0
    backoff_s: float = REPROBE_FIRST_S
    probing: bool = False
    failures: int = 0

    def load(self) -> float:
        return self.outstanding / self.concurrency


    def to_json(self) -> dict[str, Any]:
        return {"url": self.url, "up": self.up, "max_concurrency": self.concurrency, "outstanding": self.outstanding,
                "served": self.served, "failures": self.failures,
                "mean_latency_s": round(self.busy_s / self.calls, 4) if self.calls else None,
                **({"error": self.error} if self.error else {})}


class _Relay:
    """Streamed pieces to the caller once: after a failover the new server's first pieces repeat what the caller
    already has (counted per sample), so they are skipped and the trace's token events are not doubled."""

    def __init__(self, on_token: TokenCallback | None) -> None:
        self.on_token = on_token
        self.relayed: dict[int, int] = {}
        self.seen: dict[int, int] = {}

    def attempt(self) -> TokenCallback | None:
        if self.on_token is None:
            return None
        self.seen = {}

        def relay(index: int, piece: str) -> None:
            self.seen[index] = self.seen.get(index, 0) + 1
            if self.seen[index] > self.relayed.get(index, 0):
                self.relayed[index] = self.seen[index]
                self.on_token(index, piece)  # type: ignore[misc]

        return relay


class ReplicaBackend:
    """LLMBackend over several servers of one model. Thread-safe; every request runs on one member OpenAIBackend
    (its own pool, HTTP client and probed capabilities), chosen by `_pick`."""

    def __init__(self, spec: ModelSpec) -> None:
        if not spec.replicas or not spec.model:
            raise BackendError("a model on several servers needs `base_url: [URL, ...]` and `model: NAME`")
        self.spec = spec
        self.model_name = spec.model
        default = int(spec.max_concurrency or DEFAULT_MAX_CONCURRENCY)
        self.replicas = [Replica(url, OpenAIBackend(replace(spec, base_url=url, max_concurrency=cap or default,
                                                            replicas=()), max_attempts=FAILOVER_HTTP_ATTEMPTS),
                                 cap or default) for url, cap in spec.replicas]
        self.max_concurrency = sum(r.concurrency for r in self.replicas)
        """Requests in flight at once over all servers: what an evaluation may keep busy."""
        self._affinity: weakref.WeakKeyDictionary[CancelToken, Replica] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    # -- identity ----------------------------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        return f"openai:{'|'.join(r.url for r in self.replicas)}#{self.model_name}"

    @property
    def caps(self) -> Capabilities:
        """The capabilities of a server that is up (each server's own are used for its requests)."""
        return self._call(lambda b: b.caps, None, requests=None)  # type: ignore[no-any-return]

    def servers(self) -> list[dict[str, Any]]:
        """Each server: up or down, outstanding requests, requests served, mean latency, last error."""
        with self._lock:
            return [r.to_json() for r in self.replicas]

    def served(self) -> dict[str, int]:
        with self._lock:
            return {r.url: r.served for r in self.replicas}

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {"backend": "openai", "model_id": self.model_id, "model": self.model_name,
                               "base_url": [r.url for r in self.replicas], "api_key_env": self.spec.api_key_env,
                               "max_concurrency": self.max_concurrency, "servers": self.servers()}
        try:
            out["capabilities"] = self.caps.to_json()
        except BackendError as exc:
            out["error"] = str(exc)
        return out

    # -- routing -----------------------------------------------------------------------------------------

    def _choose(self, cancel: CancelToken | None, tried: set[int]) -> Replica | None:
        """(Under the lock) the run's server while it is up, else the least busy server up (outstanding relative
        to its concurrency, then fewest served); its request counted as outstanding."""
        live = [r for r in self.replicas if r.up and id(r) not in tried]
        if not live:
            return None
        chosen = self._affinity.get(cancel) if cancel is not None else None
        if chosen is None or chosen not in live:
            chosen = min(live, key=lambda r: (r.load(), r.served / r.concurrency))
            if cancel is not None:
                self._affinity[cancel] = chosen
        chosen.outstanding += 1
        return chosen

    def _pick(self, cancel: CancelToken | None, tried: set[int]) -> Replica:
        """The server for a request; servers taken out whose backoff has passed are probed again (in the
        background while another is up, at once when none is)."""
        with self._lock:
            now = time.monotonic()
            due = [r for r in self.replicas if not r.up and not r.probing and now >= r.retry_at]
            for r in due:
                r.probing = True
            chosen = self._choose(cancel, tried)
        if chosen is not None:
            for r in due:
                threading.Thread(target=self._probe, args=(r,), daemon=True, name="replica-probe").start()
            return chosen
        for r in due:
            self._probe(r)
        with self._lock:
            chosen = self._choose(cancel, tried)
            if chosen is None:
                raise BackendError(self._all_down_message())
            return chosen

    def _all_down_message(self) -> str:
        lines = "; ".join(f"{r.url}: {r.error or 'failed on this request'}" for r in self.replicas)
        return (f"every server of model {self.model_name!r} is down ({lines}). Start them again or fix base_url; "
                "`metagen models check WORKFLOW` shows each server.")

    def _take_out(self, replica: Replica, exc: BaseException) -> None:
        with self._lock:
            replica.failures += 1
            replica.error = str(exc)
            if replica.up:
                replica.up = False
                replica.backoff_s = REPROBE_FIRST_S
                replica.retry_at = time.monotonic() + replica.backoff_s
                log.warning("server %s of %s taken out: %s", replica.url, self.model_name, exc)

    def _probe(self, replica: Replica) -> None:
        """Ask a server taken out for its model list; put it back when it answers (its capabilities probed anew:
        a restarted server may run with other flags), else wait twice as long before the next try."""
        try:
            replica.backend.http.get_json("/models", attempts=1)
        except BackendError as exc:
            with self._lock:
                replica.error = str(exc)
                replica.backoff_s = min(REPROBE_MAX_S, replica.backoff_s * 2)
                replica.retry_at = time.monotonic() + replica.backoff_s
                replica.probing = False
            return
        forget(replica.url)
        with self._lock:
            replica.up, replica.error, replica.probing = True, "", False
        log.info("server %s of %s is back", replica.url, self.model_name)

    def _call(self, request: Callable[[OpenAIBackend], Any], cancel: CancelToken | None,
              requests: Callable[[OpenAIBackend], int] | None = lambda b: 1) -> Any:
        """`request` on the chosen server; a server that is down is taken out and the request goes to another
        (only the answer that succeeded is returned, so usage and traces count it once)."""
        tried: set[int] = set()
        while True:
            replica = self._pick(cancel, tried)
            started = time.perf_counter()
            try:
                result = request(replica.backend)
            except Exception as exc:
                with self._lock:
                    replica.outstanding -= 1
                if not server_down(exc):
                    raise
                tried.add(id(replica))
                self._take_out(replica, exc)
                continue
            elapsed = time.perf_counter() - started
            served = requests(replica.backend) if requests is not None else 0  # (its capabilities are cached now)
            with self._lock:
                replica.outstanding -= 1
                if requests is not None:
                    replica.calls += 1
                    replica.served += served
                    replica.busy_s += elapsed
            return result

    # -- the LLMBackend calls ------------------------------------------------------------------------------

    def render_prompt(self, prompt: Prompt, add_generation_prompt: bool = True) -> str:
        return self.replicas[0].backend.render_prompt(prompt, add_generation_prompt)

    def render_tool_prompt(self, messages: Sequence[Mapping[str, Any]], request: ToolRequest,
                           add_generation_prompt: bool = True) -> tuple[str, str]:
        return self.replicas[0].backend.render_tool_prompt(messages, request, add_generation_prompt)

    def tokenize(self, text: str) -> list[int]:
        return self._call(lambda b: b.tokenize(text), None, requests=None)  # type: ignore[no-any-return]

    def generate(self, prompt: Prompt, params: SamplingParams, n: int = 1, seeds: Sequence[int] | None = None,
                 on_token: TokenCallback | None = None, cancel: CancelToken | None = None) -> GenerateResult:
        relay = _Relay(on_token)
        return self._call(lambda b: b.generate(prompt, params, n, seeds, relay.attempt(),  # type: ignore[no-any-return]
                                               cancel), cancel, lambda b: 1 if n == 1 or b.caps.n else n)

    def score(self, prefix: Prompt, continuations: Sequence[str], cancel: CancelToken | None = None) -> ScoreResult:
        return self._call(lambda b: b.score(prefix, continuations, cancel), cancel,  # type: ignore[no-any-return]
                          lambda b: len(continuations))

    def choice_logprobs(self, prompt: Prompt, choices: Sequence[str],
                        cancel: CancelToken | None = None) -> ChoiceResult:
        return self._call(lambda b: b.choice_logprobs(prompt, choices, cancel), cancel)  # type: ignore[no-any-return]

    def rank(self, query: str, documents: Sequence[str], cancel: CancelToken | None = None) -> RankResult:
        return self._call(lambda b: b.rank(query, documents, cancel), cancel)  # type: ignore[no-any-return]

    @property
    def busy(self) -> bool:
        return False

    def close(self) -> None:
        for r in self.replicas:
            r.backend.close()

