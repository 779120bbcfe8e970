"""Load in share mode (real model): 20 visitors each start a run and an evaluation at once while a caller without a
session hammers the run function; everything stays bounded (the gate's queue, 2 unfinished runs per visitor, the
sessionless caller as one visitor), the owner still gets a run through, every accepted run and evaluation ends
and is recorded, and the trace database is intact."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from app.service.errors import UserError
from app.service.studio import StudioService
from app.share.policy import SharePolicy
from app.ui import editor_page
from app.ui.endpoints import endpoint
from app.workflow.spec import load_workflow_text

pytestmark = pytest.mark.model

VISITORS = 20
DEADLINE_S = 300.0
WF_YAML = """version: 1
name: share-load
inputs:
  question: {type: text, default: 'What is 2 + 3'}
nodes:
- id: answer
  kind: generator
  params: {prompt: '{question}? Answer with a number.', max_tokens: 4, temperature: 0.7}
  inputs: {question: inputs.question}
outputs: {answer: answer.text}
"""
WF = load_workflow_text(WF_YAML).to_dict()
ROWS = [{"question": "What is 1 + 1", "answer": "2"}, {"question": "What is 2 + 2", "answer": "4"}]
HAMMER_ADDRESS = "10.9.9.9"
EVALUATION_TRIES = 50
"""A visitor whose evaluation is refused (the queue full of runs, another evaluation going) tries again this many
times, 0.1 s apart: on a fast machine every first try can meet a full queue."""
TERMINAL = {"succeeded", "failed", "cancelled", "budget_exceeded", "invalid", "interrupted"}


def _request(host: str, session: str | None = None) -> Any:
    return SimpleNamespace(client=SimpleNamespace(host=host), headers={},
                           **({"session_hash": session} if session else {}))


def _wait(condition: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {DEADLINE_S:g}s"
        time.sleep(0.2)


def _ended(service: StudioService, run_id: str, visitor: str) -> bool:
    try:
        return service.run_status(run_id, visitor=visitor)["status"] in TERMINAL
    except UserError:  # finished long enough ago to be forgotten by the live list (it is in the trace database)
        return True


def test_twenty_visitors_and_a_sessionless_caller_stay_bounded(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    datasets, models = tmp_path / "datasets", tmp_path / "models"
    datasets.mkdir()
    models.mkdir()
    (datasets / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    monkeypatch.setenv("METAGEN_DATASETS", str(datasets))
    policy = SharePolicy.for_serving("127.0.0.1", force_share_mode=True, models_folder=models)
    db = tmp_path / "traces.db"
    service = StudioService(policy=policy, workflows_dir=tmp_path / "wf", examples_dir=None, models_dir=models,
                            trace_db=db)
    run = endpoint(editor_page.mg_run, service)
    gate = service.run_gate
    accepted: list[tuple[str, str]] = []  # (visitor, run id)
    evaluations: list[tuple[str, str]] = []
    peaks = {"waiting": 0, "hammer": 0}
    lock = threading.Lock()
    stop = threading.Event()
    try:
        warm = service.start_run(WF, visitor="warm-up")  # loads the model first
        assert service.wait_run(warm["run_id"], timeout=DEADLINE_S, visitor="warm-up")["status"] == "succeeded"

        def visitor(i: int) -> None:
            session, host = f"visitor-{i}", f"10.0.0.{i + 1}"
            answer = run({"workflow": WF, "seed": i}, request=_request(host, session))
            if "run_id" in answer:
                with lock:
                    accepted.append((session, answer["run_id"]))
            else:
                assert any(w in answer["error"] for w in ("busy", "waiting", "limit")), answer
            for _ in range(EVALUATION_TRIES):  # a refused visitor tries again shortly, as a person would
                try:
                    started = service.evaluations.start({"workflows": [{"name": "load", "yaml": WF_YAML}],
                                                         "dataset": "qa.jsonl", "metric": "exact"}, visitor=session)
                except UserError as exc:
                    assert any(w in str(exc) for w in ("running", "busy", "limit")), str(exc)
                    time.sleep(0.1)
                    continue
                with lock:
                    evaluations.append((session, started["eval_id"]))
                return

        def hammer() -> None:
            while not stop.is_set():
                answer = run({"workflow": WF}, request=_request(HAMMER_ADDRESS))  # no session, one address
                if "run_id" in answer:
                    with lock:
                        accepted.append((f"address:{HAMMER_ADDRESS}", answer["run_id"]))
                with lock:
                    peaks["waiting"] = max(peaks["waiting"], gate.waiting)
                    peaks["hammer"] = max(peaks["hammer"], service.unfinished_runs_of(f"address:{HAMMER_ADDRESS}"))
                time.sleep(0.02)

        hammering = threading.Thread(target=hammer, daemon=True)
        hammering.start()
        with ThreadPoolExecutor(max_workers=VISITORS) as pool:
            list(pool.map(visitor, range(VISITORS)))

        owner: dict[str, Any] = {}

        def owner_gets_a_run() -> bool:  # the owner's browser, retrying while the load goes on
            answer = run({"workflow": WF, "seed": 99}, request=_request("127.0.0.1", "owner"))
            owner.update(answer)
            return "run_id" in answer

        _wait(owner_gets_a_run, "the owner's run being accepted")
        final = service.wait_run(owner["run_id"], timeout=DEADLINE_S, visitor="owner")
        assert final["status"] == "succeeded", (final.get("error"), final.get("failure"), final)
        stop.set()
        hammering.join(30)

        # the queue bound, plus the evaluations admitted before it filled (they wait their turn: one app-wide)
        assert peaks["waiting"] <= policy.max_queue + service.evaluations.max_concurrent
        assert peaks["hammer"] <= (policy.max_runs_per_visitor or 0)  # the sessionless caller is one visitor
        assert len(accepted) >= 1 and evaluations, "nothing was accepted"
        for who, run_id in accepted:  # every accepted run ends (finished ones may be forgotten by the live list)
            _wait(lambda w=who, r=run_id: _ended(service, r, w), f"run {run_id} ending")
        for who, eval_id in evaluations:
            _wait(lambda w=who, e=eval_id: not service.evaluations.status(e, visitor=w)["running"],
                  f"evaluation {eval_id} ending")
            status = service.evaluations.status(eval_id, visitor=who)
            assert status["status"] == "succeeded", (status.get("error"), status)
        service.trace_store.flush()
        with sqlite3.connect(db) as conn:
            recorded = dict(conn.execute("SELECT id, status FROM runs").fetchall())
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        for who, run_id in accepted:  # recorded and succeeded, or refused by a full queue before it started
            if run_id not in recorded:
                try:
                    error = service.run_status(run_id, visitor=who).get("error") or ""
                except UserError:  # forgotten by the live list after it was refused: nothing more to see
                    continue
                assert "busy" in error, (run_id, error)
            else:
                assert recorded[run_id] == "succeeded", (run_id, recorded[run_id])
        assert recorded[owner["run_id"]] == "succeeded"
        print(f"\nshare load: {len(accepted)} runs accepted ({sum(1 for w, _ in accepted if w.startswith('address:'))}"
              f" from the sessionless caller), {len(evaluations)} evaluation(s), queue peak {peaks['waiting']}, "
              f"sessionless caller's peak {peaks['hammer']} unfinished")
    finally:
        stop.set()
        service.close()
