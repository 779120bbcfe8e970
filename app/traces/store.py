"""TraceStore: the observer that records runs into SQLite, and the read API the CLI and UI use."""

from __future__ import annotations

import logging
import queue
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from sqlalchemy import delete

from app.platform.paths import trace_db_path
from app.run import events as ev
from app.run.events import Event
from app.run.status import INTERRUPTED
from app.traces import records
from app.traces.db import TraceStoreError, create_trace_engine, ensure_schema
from app.traces.exchange import export_record, import_document
from app.traces.recovery import mark_interrupted
from app.traces.tables import CALLS, CANDIDATES, LM_REQUESTS, NODE_EVENTS, NODES, RUNS
from app.traces.writer import PERSISTED, EventWriter

log = logging.getLogger(__name__)

BATCH_MAX = 1000
"""Events written per transaction at most; under load the queue fills while a batch commits."""
HEARTBEAT_S = 10.0


class _Barrier:
    """Queued behind events; set once everything before it is committed."""

    def __init__(self) -> None:
        self.done = threading.Event()


_STOP = object()


class TraceStore:
    """Records every run it observes (thread-safe; writes in a background thread, batched per
    transaction) and reads runs back. Opening it marks runs whose process died as `interrupted`."""

    def __init__(self, path: str | Path | None = None, *, recover: bool = True,
                 heartbeat_s: float = HEARTBEAT_S) -> None:
        self.path = Path(path).expanduser() if path is not None else trace_db_path()
        if self.path.is_dir():
            raise TraceStoreError(f"{self.path} is a folder; give the trace database's file path instead")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TraceStoreError(f"cannot create the folder for trace database {self.path}: {exc}") from exc
        self._engine = create_trace_engine(self.path)
        try:
            self.opened_schema_version = ensure_schema(self._engine, self.path)
            self.recovered: list[str] = mark_interrupted(self._engine) if recover else []
        except BaseException:
            self._engine.dispose()
            raise
        self._heartbeat_s = heartbeat_s
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._writer = EventWriter(self._engine)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._active: set[str] = set()
        self._closed = False
        # at interpreter exit this commits what is queued (finalizers run before daemon threads die)
        self._finalizer = weakref.finalize(self, TraceStore._shutdown_at_exit, weakref.ref(self))

    def __repr__(self) -> str:
        return f"TraceStore({str(self.path)!r})"

    @property
    def engine(self) -> Any:
        """The database engine, for stores of other records that live in the same file (evaluations)."""
        return self._engine

    def __enter__(self) -> TraceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ observer

    def on_event(self, event: Event) -> None:
        """Queue the event for the writer thread; a run's end waits until the run is committed."""
        if event.type not in PERSISTED:
            return
        if self._closed:
            log.warning("trace store %s is closed; dropped a %s event", self.path, event.type)
            return
        with self._lock:
            if event.type == ev.RUN_START:
                self._active.add(event.run_id)
            elif event.type == ev.RUN_END:
                self._active.discard(event.run_id)
            self._ensure_thread()
        self._queue.put(event)
        if event.type == ev.RUN_END:
            self.flush()

    def flush(self, timeout: float | None = 60.0) -> bool:
        """Wait until every event queued so far is committed. False if that took longer than timeout."""
        with self._lock:
            if self._thread is None:
                return True
        barrier = _Barrier()
        self._queue.put(barrier)
        return barrier.done.wait(timeout)

    def _ensure_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._write_loop, name="trace-writer", daemon=True)
            self._thread.start()

    def _write_loop(self) -> None:
        last_beat = time.monotonic()
        while True:
            try:
                item = self._queue.get(timeout=self._heartbeat_s)
            except queue.Empty:
                item = None
            batch: list[object] = [] if item is None else [item]
            while batch and len(batch) < BATCH_MAX:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            events = [x for x in batch if isinstance(x, Event)]
            if events:
                self._writer.write(events)
            if time.monotonic() - last_beat >= self._heartbeat_s:
                with self._lock:
                    active = list(self._active)
                self._writer.heartbeat(active, time.time())
                last_beat = time.monotonic()
            for x in batch:
                if isinstance(x, _Barrier):
                    x.done.set()
            if any(x is _STOP for x in batch):
                return

    # ------------------------------------------------------------------ reading

    def list_runs(self, workflow: str | None = None, status: str | None = None,
                  limit: int = 100) -> list[dict[str, Any]]:
        with self._engine.connect() as conn:
            return records.list_runs(conn, workflow, status, limit)

    def resolve_run_id(self, run_id: str) -> str:
        """The full id of a run given its id or an unambiguous prefix; TraceStoreError otherwise."""
        with self._engine.connect() as conn:
            if records.run_exists(conn, run_id):
                return run_id
            matches = records.find_run_ids(conn, run_id) if run_id else []
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise TraceStoreError(f"run id {run_id!r} is ambiguous: it starts {', '.join(matches)}; "
                                  "type more of it")
        raise TraceStoreError(f"no run {run_id!r} in {self.path}; `metagen traces list` shows the runs")

    def get_run(self, run_id: str) -> dict[str, Any]:
        """The full record: run, provenance, nodes, lm_calls, events. Raises TraceStoreError if unknown."""
        run_id = self.resolve_run_id(run_id)
        with self._engine.connect() as conn:
            record = records.load_run(conn, run_id)
        assert record is not None
        return record

    def candidates(self, run_id: str, node_id: str | None = None, offset: int = 0,
                   limit: int = 100) -> list[dict[str, Any]]:
        """A page of the candidates a run's nodes produced."""
        with self._engine.connect() as conn:
            return records.load_candidates(conn, run_id, node_id, offset, limit)

    # ------------------------------------------------------------------ exchange and upkeep

    def export_run(self, run_id: str) -> dict[str, Any]:
        """A self-contained JSON-able document of the run (YAML, inputs, every call, every event)."""
        run_id = self.resolve_run_id(run_id)
        with self._engine.connect() as conn:
            document = export_record(conn, run_id)
        assert document is not None
        return document

    def export_bundle(self, run_id: str) -> dict[str, Any]:
        """The run as a bundle (app/traces/bundle.py): its workflows and every model call, for `metagen replay`."""
        from app.traces.bundle import bundle_record

        run_id = self.resolve_run_id(run_id)
        with self._engine.connect() as conn:
            bundle = bundle_record(conn, run_id)
        assert bundle is not None
        return bundle

    def import_run(self, data: Any) -> str:
        """Store an exported run; returns its id in this database (a new one if the id is taken)."""
        with self._engine.begin() as conn:
            return import_document(conn, data)

    def delete_run(self, run_id: str) -> None:
        """Remove a run and everything recorded under it (prompts other runs share stay)."""
        run_id = self.resolve_run_id(run_id)
        with self._engine.begin() as conn:
            for table in (CALLS, CANDIDATES, NODE_EVENTS, NODES, LM_REQUESTS):
                conn.execute(delete(table).where(table.c.run_id == run_id))
            conn.execute(delete(RUNS).where(RUNS.c.id == run_id))

    def close(self) -> None:
        """Commit what is queued, stop the writer, and mark this store's unfinished runs interrupted."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            thread = self._thread
            unfinished = list(self._active)
            self._active.clear()
        if thread is not None:
            self._queue.put(_STOP)
            thread.join(timeout=60)
        if unfinished:
            mark_interrupted(self._engine, unfinished, reason="the trace store was closed before the run ended")
        self._engine.dispose()
        self._finalizer.detach()

    @staticmethod
    def _shutdown_at_exit(ref: weakref.ReferenceType[TraceStore]) -> None:
        store = ref()
        if store is not None:
            try:
                store.close()
            except Exception:
                log.exception("closing the trace store at exit failed")


__all__ = ["INTERRUPTED", "TraceStore", "TraceStoreError"]
