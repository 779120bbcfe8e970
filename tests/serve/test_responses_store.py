"""Round 7 §2.1: stored responses keep each turn once, linked to its parent (a chain of N turns costs N turns, not
N²/2: the probe's 200 chained 10 KB turns grew the database from 0.3 MB to 585.5 MB), read back whole along the
chain; a key's stored bytes are capped (its oldest turns go first) and turns past the retention are removed."""

from __future__ import annotations

import json
import time
from pathlib import Path

from sqlalchemy import func, select

from app.serve.responses_store import ResponseStore
from app.traces.store import TraceStore
from app.traces.tables import STORED_RESPONSES

TURN = "x" * 10_000


def _chain(store: ResponseStore, turns: int, owner: str = "k", created: float | None = None) -> list[str]:
    conversation: list[dict[str, str]] = []
    ids, parent = [], None
    for i in range(turns):
        conversation = [*conversation, {"role": "user", "content": f"{i} {TURN}"},
                        {"role": "assistant", "content": f"answer {i}"}]
        rid = f"resp_{owner}_{i}"
        store.save({"id": rid, "model": "m", "created_at": created or time.time(), "previous_response_id": parent,
                    "output": []}, conversation, owner)
        ids.append(rid)
        parent = rid
    return ids


def _stored_bytes(store: TraceStore) -> int:
    table = STORED_RESPONSES
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.sum(func.length(table.c.conversation)))).scalar_one() or 0)


def test_a_chain_of_turns_costs_its_length_and_reads_back_whole(tmp_path: Path) -> None:
    traces = TraceStore(tmp_path / "t.db")
    store = ResponseStore(traces.engine)
    ids = _chain(store, 200)
    assert _stored_bytes(traces) < 200 * (len(TURN) + 200)  # each turn once (whole conversations: ~200 MB)
    last = store.get(ids[-1], "k")
    assert last is not None and len(last.conversation) == 400
    assert [m["content"].split()[0] for m in last.conversation[::2]] == [str(i) for i in range(200)]
    middle = store.get(ids[99], "k")
    assert middle is not None and len(middle.conversation) == 200
    assert store.get(ids[-1], "another key") is None
    traces.close()


def test_a_row_stored_whole_by_an_earlier_version_still_reads(tmp_path: Path) -> None:
    traces = TraceStore(tmp_path / "t.db")
    store = ResponseStore(traces.engine)
    old = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    with traces.engine.begin() as conn:
        conn.execute(STORED_RESPONSES.insert().values(id="old", owner="k", model="m", created_at=time.time(),
                                                      conversation=json.dumps(old), response="{}"))
    new = [*old, {"role": "user", "content": "again"}, {"role": "assistant", "content": "sure"}]
    store.save({"id": "new", "model": "m", "created_at": time.time(), "previous_response_id": "old"}, new, "k")
    got = store.get("new", "k")
    assert got is not None and got.conversation == new
    traces.close()


def test_the_cap_removes_a_keys_oldest_turns_and_spares_other_keys(tmp_path: Path) -> None:
    traces = TraceStore(tmp_path / "t.db")
    store = ResponseStore(traces.engine, max_bytes_per_owner=100_000)
    _chain(store, 3, owner="other")
    ids = _chain(store, 30, owner="k")
    table = STORED_RESPONSES
    with traces.engine.connect() as conn:
        kept = [r[0] for r in conn.execute(select(table.c.id).where(table.c.owner == "k")).all()]
        others = conn.execute(select(func.count()).where(table.c.owner == "other")).scalar_one()
    assert 5 <= len(kept) < 30 and ids[-1] in kept and ids[0] not in kept
    assert others == 3
    assert store.get(ids[-1], "k") is None  # its conversation's start is gone: not served half
    traces.close()


def test_turns_past_the_retention_are_removed(tmp_path: Path) -> None:
    traces = TraceStore(tmp_path / "t.db")
    store = ResponseStore(traces.engine, retention_days=1)
    old = _chain(store, 2, owner="k", created=time.time() - 3 * 86_400)
    fresh = _chain(store, 1, owner="j")
    assert store.get(old[0], "k") is None and store.get(fresh[0], "j") is not None
    traces.close()
