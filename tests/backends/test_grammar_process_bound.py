"""At most MAX_WORKERS grammar processes per model, however many grammar requests arrive at once (issue 32,
finding 6: 12 /v1 JSON requests started 12 processes, one prewarm each): the others wait their turn."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from backends.base import SamplingParams
from backends.llama.worker import grammar_worker


class _SlowWorker:
    """A stand-in child that takes a while to start, counting how many are alive at once."""

    lock = threading.Lock()
    alive_now = 0
    peak = 0

    def __init__(self, model_path: Path) -> None:
        with _SlowWorker.lock:
            _SlowWorker.alive_now += 1
            _SlowWorker.peak = max(_SlowWorker.peak, _SlowWorker.alive_now)
        self.alive, self.started, self.asked, self.keys = True, False, {}, set()

    def wait_ready(self, cancelled: object) -> None:
        time.sleep(0.05)
        self.started = True

    def kill(self) -> None:
        if self.alive:
            self.alive = False
            with _SlowWorker.lock:
                _SlowWorker.alive_now -= 1


def test_prewarms_and_leases_at_once_never_pass_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grammar_worker, "GrammarWorker", _SlowWorker)
    _SlowWorker.alive_now = _SlowWorker.peak = 0
    pool = grammar_worker.GrammarPool(Path("model.gguf"))
    gate = threading.Semaphore(grammar_worker.MAX_WORKERS)  # the engine leases only while available()

    def request() -> None:
        pool.prewarm()
        with gate:
            worker = pool.lease(lambda: None)
            time.sleep(0.02)
            pool.give_back(worker)  # type: ignore[arg-type]

    threads = [threading.Thread(target=request) for _ in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert _SlowWorker.peak <= grammar_worker.MAX_WORKERS, _SlowWorker.peak
    assert pool.leased == 0 and pool.processes <= grammar_worker.IDLE_WORKERS
    pool.close()
    assert _SlowWorker.alive_now == 0


@pytest.mark.model
def test_twelve_json_requests_at_once_start_at_most_four_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.backends.test_engine_sampling import small_engine

    created: list[grammar_worker.GrammarWorker] = []
    real = grammar_worker.GrammarWorker

    class Counted(real):  # type: ignore[misc, valid-type]
        def __init__(self, model_path: Path) -> None:
            super().__init__(model_path)
            created.append(self)

    monkeypatch.setattr(grammar_worker, "GrammarWorker", Counted)
    engine = small_engine(n_seq_max=4)
    peak = [0]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], sum(1 for w in list(created) if w.alive))
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    answers: list[str] = []
    try:
        def ask(i: int) -> None:
            params = SamplingParams(max_tokens=8, temperature=1.0, seed=i,
                                    json_schema='{"type": "object", "properties": {"n": {"type": "integer"}}}')
            answers.append(engine.generate(f"Give a JSON object {i}.", params).completions[0].text)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
    finally:
        done.set()
        watcher.join(5)
        engine.close()
    assert len(answers) == 12
    assert peak[0] <= grammar_worker.MAX_WORKERS, (peak[0], len(created))
