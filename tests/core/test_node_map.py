"""NodeContext.map, the one fan-out of nodes: results in the items' order, bounded by the run's engine batch (and a
limit), the first failure in order raised with no item started after it, a cancel or budget stop raised at once
with no further item started; plus the one seed layout (nodes/seeds.py) and the fan-out width of a run's models."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from app.run.events import EventBus
from app.run.node_context import Budget, BudgetExceededError, RunNodeContext, RunState
from app.run.run_pool import ENGINE_BATCH, REMOTE_CONCURRENCY, fanout_width
from app.run.status import budget_stop_reason
from backends.base import CancelledError, CancelToken, ModelSpec
from nodes.seeds import derive_seed, sample_seeds


def _ctx(width: int = ENGINE_BATCH) -> RunNodeContext:
    state = RunState("t", Budget(), CancelToken(), EventBus([]), fanout_width=width)
    return RunNodeContext(state, "node", "kind", None, 7, {}, lambda alias: None,  # type: ignore[arg-type, return-value]
                          "default", python_allowed=False)


class Gauge:
    """Counts calls in flight and the most at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.peak = 0
        self.started: list[Any] = []

    def __enter__(self) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.now -= 1


def test_results_come_in_the_items_order_and_run_together() -> None:
    ctx, gauge = _ctx(), Gauge()

    def slow_first(i: int) -> int:
        with gauge:
            time.sleep(0.05 * (6 - i))
            return i * i

    assert ctx.map(slow_first, range(6)) == [0, 1, 4, 9, 16, 25]
    assert gauge.peak > 1
    assert ctx.map(slow_first, []) == []


def test_at_most_the_runs_engine_batch_and_the_limit_at_once() -> None:
    for width, limit, most in ((3, None, 3), (8, 2, 2), (1, None, 1)):
        ctx, gauge = _ctx(width), Gauge()

        def busy(i: int, gauge: Gauge = gauge) -> int:
            with gauge:
                time.sleep(0.02)
            return i

        assert ctx.map(busy, range(12), limit=limit) == list(range(12))
        assert 1 <= gauge.peak <= most


def test_two_nodes_mapping_at_once_share_the_runs_bound() -> None:
    ctx, gauge = _ctx(4), Gauge()
    both = threading.Barrier(2, timeout=10)

    def busy(i: int) -> int:
        with gauge:
            time.sleep(0.05)
        return i

    def node() -> None:
        both.wait()
        assert ctx.map(busy, range(10)) == list(range(10))

    threads = [threading.Thread(target=node) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert gauge.peak <= 4 + 1  # the run's 3 helpers, plus each asking thread working on its own items


def test_the_first_failure_in_order_is_raised_and_nothing_starts_after_a_failure() -> None:
    ctx, started = _ctx(), []

    def item(i: int) -> int:
        started.append(i)
        if i == 1:
            time.sleep(0.2)
            raise ValueError("item 1")
        if i == 2:
            raise KeyError("item 2")
        return i

    with pytest.raises(ValueError, match="item 1"):
        ctx.map(item, range(4))  # item 2 fails first, item 1 is earlier in order
    sequential: list[int] = []

    def fails_at_3(i: int) -> int:
        sequential.append(i)
        if i == 3:
            raise RuntimeError("three")
        return i

    with pytest.raises(RuntimeError, match="three"):
        ctx.map(fails_at_3, range(10), limit=1)
    assert sequential == [0, 1, 2, 3]


def test_a_cancel_stops_the_fan_out_promptly_and_no_item_starts_after_it() -> None:
    ctx, started = _ctx(2), []

    def request(i: int) -> int:  # an engine request: returns when the run's cancel fires
        started.append(i)
        fired = threading.Event()
        remove = ctx.cancel.on_cancel(fired.set)
        try:
            fired.wait(timeout=30)
        finally:
            remove()
        ctx.cancel.raise_if_cancelled()
        return i

    threading.Timer(0.2, ctx.cancel.cancel, ("stopped by the user",)).start()
    begun = time.monotonic()
    with pytest.raises(CancelledError, match="stopped by the user") as caught:
        ctx.map(request, range(20))
    assert time.monotonic() - begun < 2
    assert not isinstance(caught.value, BudgetExceededError)
    assert sorted(started) == [0, 1]  # the two in flight; none of the other 18 started


def test_a_budget_stop_is_raised_as_one() -> None:
    ctx = _ctx()

    def spend(i: int) -> int:
        if i == 0:
            ctx.cancel.cancel(budget_stop_reason("max_lm_calls=1 reached"))
        return i

    with pytest.raises(BudgetExceededError, match="max_lm_calls=1"):
        ctx.map(spend, range(5), limit=1)


def test_sample_seeds_one_layout() -> None:
    assert sample_seeds(100, 3) == [100, 101, 102]  # a sampler's sample i: seed + i
    assert sample_seeds(100, 2, start=5) == [105, 106]
    own = sample_seeds(100, 2, "genselect", 0, 1)
    assert own == [derive_seed(100, "genselect", 0, 1) + i for i in range(2)]
    assert own != sample_seeds(100, 2, "genselect", 1, 0) and own == sample_seeds(100, 2, "genselect", 0, 1)


def test_the_fan_out_width_is_what_the_runs_engines_batch() -> None:
    assert fanout_width([]) == ENGINE_BATCH
    assert fanout_width([ModelSpec(source="bundled")]) == ENGINE_BATCH
    assert fanout_width([ModelSpec(source="path", path="m.gguf", options=(("n_seq_max", 16),))]) == 16
    assert fanout_width([ModelSpec(source="openai", base_url="http://h/v1")]) == REMOTE_CONCURRENCY
    replicas = (("http://a/v1", 4), ("http://b/v1", None))
    assert fanout_width([ModelSpec(source="openai", base_url="http://a/v1", replicas=replicas,
                                   max_concurrency=6)]) == 10
    assert fanout_width([ModelSpec(source="path", path="m.gguf", options=(("n_seq_max", 4),)),
                         ModelSpec(source="bundled")]) == ENGINE_BATCH
