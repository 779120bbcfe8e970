"""Evaluations in the trace database: the evaluation record and one row per item × point, written so that
a kill at any moment leaves a database that resumes (each finished item is one committed row)."""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

from sqlalchemy import Engine, delete, func, select, update
from sqlalchemy.dialects.sqlite import insert

from app.run.status import INTERRUPTED, RUNNING, UNGRADED
from app.traces.recovery import process_alive, process_identity
from app.traces.tables import EVAL_ITEMS, EVAL_SAMPLE_VOTES, EVALUATIONS, RUNS

log = logging.getLogger(__name__)

ITEM_FIELDS = ("run_id", "status", "score", "correct", "output", "detail", "samples", "prompt_tokens",
               "prompt_tokens_evaluated", "prompt_tokens_cached", "completion_tokens", "completion_tokens_reused",
               "lm_calls", "wall_s")


class EvalNotFoundError(LookupError):
    """No evaluation with that id (or prefix)."""


class EvalStore:
    """Reads and writes evaluations next to the runs of a TraceStore (same SQLite file)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    # ------------------------------------------------------------------ writing

    def create(self, eval_id: str, name: str, config: dict[str, Any], estimate: dict[str, Any]) -> None:
        pid = os.getpid()
        with self._engine.begin() as conn:
            conn.execute(EVALUATIONS.insert().values(
                id=eval_id, name=name, status=RUNNING, config=json.dumps(config), estimate=json.dumps(estimate),
                created_at=time.time(), heartbeat_at=time.time(), writer_pid=pid,
                writer_identity=process_identity(pid)))

    def claim(self, eval_id: str) -> None:
        """This process takes over an evaluation (a resume): running again, under this pid."""
        pid = os.getpid()
        with self._engine.begin() as conn:
            conn.execute(update(EVALUATIONS).where(EVALUATIONS.c.id == eval_id).values(
                status=RUNNING, error=None, ended_at=None, heartbeat_at=time.time(), writer_pid=pid,
                writer_identity=process_identity(pid)))

    def record_item(self, eval_id: str, workflow_idx: int, point_idx: int, item_idx: int,
                    values: dict[str, Any]) -> None:
        """One finished item, committed on its own (a later kill cannot lose it)."""
        row = {k: values[k] for k in ITEM_FIELDS if k in values}
        if isinstance(row.get("samples"), list):
            row["samples"] = json.dumps(row["samples"])
        row.update(eval_id=eval_id, workflow_idx=workflow_idx, point_idx=point_idx, item_idx=item_idx,
                   finished_at=time.time())
        statement = insert(EVAL_ITEMS).values(**row)
        statement = statement.on_conflict_do_update(
            index_elements=["eval_id", "workflow_idx", "point_idx", "item_idx"],
            set_={k: statement.excluded[k] for k in row if k not in ("eval_id", "workflow_idx", "point_idx",
                                                                    "item_idx")})
        with self._engine.begin() as conn:
            conn.execute(statement)
            if isinstance(values.get("sample_votes"), dict):
                keys = {"eval_id": eval_id, "workflow_idx": workflow_idx, "point_idx": point_idx, "item_idx": item_idx}
                votes = insert(EVAL_SAMPLE_VOTES).values(**keys, data=json.dumps(values["sample_votes"]))
                conn.execute(votes.on_conflict_do_update(index_elements=list(keys), set_={"data": votes.excluded.data}))
            conn.execute(update(EVALUATIONS).where(EVALUATIONS.c.id == eval_id).values(heartbeat_at=time.time()))

    def finish(self, eval_id: str, status: str, error: str | None = None,
               servers: dict[str, int] | None = None) -> None:
        """Mark the end; `servers` (requests each server of a replicated model served) joins the config."""
        with self._engine.begin() as conn:
            values: dict[str, Any] = {"status": status, "error": error, "ended_at": time.time()}
            if servers:
                row = conn.execute(select(EVALUATIONS.c.config).where(EVALUATIONS.c.id == eval_id)).first()
                config = json.loads(row[0] or "{}") if row is not None else {}
                previous = config.get("servers") or {}  # a resumed evaluation adds to what it served before
                config["servers"] = {u: int(previous.get(u, 0)) + int(servers.get(u, 0))
                                     for u in {**previous, **servers}}
                values["config"] = json.dumps(config)
            conn.execute(update(EVALUATIONS).where(EVALUATIONS.c.id == eval_id).values(**values))

    def delete(self, eval_id: str) -> None:
        eval_id = self.resolve_id(eval_id)
        with self._engine.begin() as conn:
            conn.execute(delete(EVAL_ITEMS).where(EVAL_ITEMS.c.eval_id == eval_id))
            conn.execute(delete(EVAL_SAMPLE_VOTES).where(EVAL_SAMPLE_VOTES.c.eval_id == eval_id))
            conn.execute(delete(EVALUATIONS).where(EVALUATIONS.c.id == eval_id))

    def mark_interrupted(self) -> list[str]:
        """Evaluations left `running` by a process that is gone become `interrupted` (resumable)."""
        marked = []
        with self._engine.begin() as conn:
            rows = conn.execute(select(EVALUATIONS.c.id, EVALUATIONS.c.writer_pid, EVALUATIONS.c.writer_identity)
                                .where(EVALUATIONS.c.status == RUNNING)).all()
            for eval_id, pid, identity in rows:
                if pid is not None and process_alive(pid, identity):
                    continue
                conn.execute(update(EVALUATIONS).where(EVALUATIONS.c.id == eval_id).values(
                    status=INTERRUPTED, error="the process running it ended before it finished; "
                                              f"`metagen eval --resume {eval_id}` finishes it"))
                marked.append(eval_id)
        return marked

    # ------------------------------------------------------------------ reading

    def resolve_id(self, eval_id: str) -> str:
        with self._engine.connect() as conn:
            ids = [r[0] for r in conn.execute(select(EVALUATIONS.c.id).where(
                EVALUATIONS.c.id.like(f"{_escape_like(eval_id)}%", escape="\\"))).all()] if eval_id else []
        if eval_id in ids:
            return eval_id
        if len(ids) == 1:
            return ids[0]
        if ids:
            raise EvalNotFoundError(f"evaluation id {eval_id!r} is ambiguous ({', '.join(ids[:5])}); type more of it")
        raise EvalNotFoundError(f"no evaluation {eval_id!r}; `metagen eval list` shows them")

    def get(self, eval_id: str) -> dict[str, Any]:
        """{evaluation: {...config, estimate decoded}, items: [...]} for one evaluation."""
        eval_id = self.resolve_id(eval_id)
        with self._engine.connect() as conn:
            row = conn.execute(select(EVALUATIONS).where(EVALUATIONS.c.id == eval_id)).mappings().one()
            items = [dict(r) for r in conn.execute(select(EVAL_ITEMS).where(EVAL_ITEMS.c.eval_id == eval_id).order_by(
                EVAL_ITEMS.c.workflow_idx, EVAL_ITEMS.c.point_idx, EVAL_ITEMS.c.item_idx)).mappings()]
            votes = {(r.workflow_idx, r.point_idx, r.item_idx): r.data for r in conn.execute(
                select(EVAL_SAMPLE_VOTES).where(EVAL_SAMPLE_VOTES.c.eval_id == eval_id))}
            run_ids = sorted({i["run_id"] for i in items if i.get("run_id")})
            thinking = {r.id: int((json.loads(r.stats or "{}") or {}).get("thinking_tokens") or 0)
                        for r in conn.execute(select(RUNS.c.id, RUNS.c.stats).where(RUNS.c.id.in_(run_ids)))}
        evaluation = dict(row)
        evaluation["config"] = json.loads(evaluation["config"] or "{}")
        evaluation["estimate"] = json.loads(evaluation["estimate"] or "{}")
        for item in items:
            item["samples"] = json.loads(item["samples"] or "[]")
            item["correct"] = bool(item["correct"])
            item["thinking_tokens"] = thinking.get(item.get("run_id") or "", 0)  # from the run's own totals
            data = votes.get((item["workflow_idx"], item["point_idx"], item["item_idx"]))
            if data:
                item["sample_votes"] = json.loads(data)
        return {"evaluation": evaluation, "items": items}

    def run_ids(self, eval_ids: set[str]) -> set[str]:
        """The trace run ids of the recorded items of these evaluations."""
        if not eval_ids:
            return set()
        with self._engine.connect() as conn:
            return {r for (r,) in conn.execute(select(EVAL_ITEMS.c.run_id).where(
                EVAL_ITEMS.c.eval_id.in_(sorted(eval_ids)), EVAL_ITEMS.c.run_id.is_not(None))).all()}

    def finished_keys(self, eval_id: str) -> set[tuple[int, int, int]]:
        """The items done; an ungraded one is not (a resume grades it again, e.g. once the sandbox works)."""
        with self._engine.connect() as conn:
            return {(w, p, i) for w, p, i in conn.execute(
                select(EVAL_ITEMS.c.workflow_idx, EVAL_ITEMS.c.point_idx, EVAL_ITEMS.c.item_idx).where(
                    EVAL_ITEMS.c.eval_id == eval_id, EVAL_ITEMS.c.status != UNGRADED)).all()}

    def list(self, limit: int = 100, ids: set[str] | None = None) -> list[dict[str, Any]]:
        """The newest evaluations first; only those of `ids` when given (share mode: a visitor's own)."""
        query = select(EVALUATIONS.c.id, EVALUATIONS.c.name, EVALUATIONS.c.status, EVALUATIONS.c.created_at,
                       EVALUATIONS.c.ended_at, EVALUATIONS.c.config)
        if ids is not None:
            query = query.where(EVALUATIONS.c.id.in_(sorted(ids)))
        with self._engine.connect() as conn:
            rows = conn.execute(query.order_by(EVALUATIONS.c.created_at.desc()).limit(limit)).mappings().all()
            done = dict(conn.execute(select(EVAL_ITEMS.c.eval_id, func.count()).group_by(
                EVAL_ITEMS.c.eval_id)).all())
        out = []
        for r in rows:
            config = json.loads(r["config"] or "{}")
            out.append({"id": r["id"], "name": r["name"], "status": r["status"], "created_at": r["created_at"],
                        "ended_at": r["ended_at"], "done": done.get(r["id"], 0),
                        "total": int(config.get("total_tasks", 0)),
                        "workflows": [w.get("name", "") for w in config.get("workflows", [])],
                        "dataset": (config.get("dataset") or {}).get("name", "")})
        return out


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
