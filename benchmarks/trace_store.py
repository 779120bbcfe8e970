"""Trace store write paths side by side: the batched background writer vs one transaction per event.

Eight threads emit 10,000 LM calls (the shape of a big sampling run). Printed: wall time until everything
is committed, and the time the emitting threads spend inside on_event (what a run pays for tracing).
Run: .venv/bin/python benchmarks/trace_store.py
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.run import events as ev
from app.run.events import Event
from app.traces import TraceStore
from app.traces.db import create_trace_engine, ensure_schema
from app.traces.writer import EventWriter

THREADS = 8
CALLS = 10_000


class PerEventWriter:
    """The simple alternative: each event written in its own transaction on the emitting thread."""

    def __init__(self, path: Path) -> None:
        self.engine = create_trace_engine(path)
        ensure_schema(self.engine, path)
        self.writer = EventWriter(self.engine)
        self.lock = threading.Lock()

    def on_event(self, event: Event) -> None:
        with self.lock:
            self.writer.write([event])

    def close(self) -> None:
        self.engine.dispose()


def call_event(run_id: str, node: str, k: int) -> Event:
    now = time.time()
    return Event(ev.LM_CALL, run_id, node, {
        "call_id": f"{node}#{k}", "purpose": "generate", "model": "m", "sample_index": k % 16, "n": 16,
        "parent": None, "tag": {}, "prompt": f"shared prompt {k // 16} " * 20, "completion": "some reply " * 10,
        "prompt_tokens": 80, "prompt_tokens_evaluated": 80 if k % 16 == 0 else 0, "prompt_tokens_cached": 0,
        "completion_tokens": 20, "logprobs": [{"token": "x", "logprob": -0.5, "top": []}] * 20, "seed": k,
        "finish_reason": "eog", "start": now, "end": now, "prefill_s": 0.0, "decode_s": 0.0})


def drive(observer: object, run_id: str) -> tuple[float, float]:
    emit = observer.on_event  # type: ignore[attr-defined]
    emit(Event(ev.RUN_START, run_id, None, {"workflow": "bench", "workflow_yaml": "", "inputs": {}}))
    per_thread = CALLS // THREADS
    spent = [0.0] * THREADS
    events = [[call_event(run_id, f"n{t}", k) for k in range(per_thread)] for t in range(THREADS)]

    def work(t: int) -> None:
        start = time.perf_counter()
        for e in events[t]:
            emit(e)
        spent[t] = time.perf_counter() - start

    start = time.perf_counter()
    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    emit(Event(ev.RUN_END, run_id, None, {"status": "succeeded", "outputs": {}, "stats": {}}))
    return time.perf_counter() - start, sum(spent) / THREADS


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        batched = TraceStore(Path(tmp) / "batched.db")
        wall_b, inside_b = drive(batched, "b")
        assert len(batched.get_run("b")["lm_calls"]) == CALLS
        batched.close()
        simple = PerEventWriter(Path(tmp) / "simple.db")
        wall_s, inside_s = drive(simple, "s")
        simple.close()
    print(f"{CALLS} LM calls from {THREADS} threads")
    print(f"  batched background writer: {wall_b:6.2f}s until committed, {inside_b:6.3f}s per thread in on_event")
    print(f"  one transaction per event: {wall_s:6.2f}s until committed, {inside_s:6.3f}s per thread in on_event")
    print(f"  ratio (per-event / batched): wall {wall_s / wall_b:.1f}x, emitting threads {inside_s / inside_b:.1f}x")


if __name__ == "__main__":
    main()
