"""Many LM calls from many threads at once: every one is stored, prompts once each."""

from __future__ import annotations

import sqlite3
import threading
import time

from app.run import events as ev
from app.run.events import Event
from app.traces import TraceStore

THREADS = 8
CALLS_PER_THREAD = 1250


def lm_call(run_id: str, node: str, k: int) -> Event:
    now = time.time()
    return Event(ev.LM_CALL, run_id, node, {
        "call_id": f"{node}#{k}", "purpose": "generate", "model": "fake:m", "sample_index": k % 16, "n": 16,
        "parent": None, "tag": {"k": k}, "prompt": f"prompt of {node} batch {k // 16}", "completion": f"reply {k}",
        "prompt_tokens": 5, "prompt_tokens_evaluated": 5 if k % 16 == 0 else 0, "prompt_tokens_cached": 0,
        "completion_tokens": 3, "logprobs": [{"token": "a", "logprob": -0.1, "top": []}], "seed": k,
        "finish_reason": "eog", "start": now, "end": now, "prefill_s": 0.0, "decode_s": 0.0,
    })


def test_ten_thousand_calls_from_eight_threads(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = TraceStore(tmp_path / "t.db")
    store.on_event(Event(ev.RUN_START, "big", None, {"workflow": "big", "workflow_yaml": "", "inputs": {}}))
    for t in range(THREADS):
        store.on_event(Event(ev.NODE_START, "big", f"n{t}", {"kind": "sampler", "params": {}, "inputs": {}}))

    def emit(t: int) -> None:
        for k in range(CALLS_PER_THREAD):
            store.on_event(lm_call("big", f"n{t}", k))
            store.on_event(Event(ev.TOKEN, "big", f"n{t}", {"sample": 0, "text": "x"}))

    threads = [threading.Thread(target=emit, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    store.on_event(Event(ev.RUN_END, "big", None, {"status": "succeeded", "outputs": {}, "stats": {
        "lm_calls": THREADS * CALLS_PER_THREAD, "completion_tokens": 3 * THREADS * CALLS_PER_THREAD}}))
    record = store.get_run("big")
    calls = record["lm_calls"]
    assert len(calls) == THREADS * CALLS_PER_THREAD
    for t in range(THREADS):
        mine = [c for c in calls if c["node_id"] == f"n{t}"]
        assert [c["call_id"] for c in mine] == [f"n{t}#{k}" for k in range(CALLS_PER_THREAD)]
    assert sum(c["completion_tokens"] for c in calls) == record["run"]["completion_tokens"]
    assert record["run"]["model_ids"] == ["fake:m"]
    store.close()
    with sqlite3.connect(tmp_path / "t.db") as conn:
        prompts = conn.execute("SELECT count(*) FROM prompts").fetchone()[0]
    assert prompts == THREADS * -(-CALLS_PER_THREAD // 16)
