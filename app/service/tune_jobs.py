"""Tunes started from the Tune tab: each on a thread of its own, its latest progress and its result kept for the
tab to poll, cancellable; one visitor sees only its own."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from app.eval.tune.api import TuneOptions, TuneProgress, TuneResult
from app.service.errors import UserError
from backends.base import CancelToken

log = logging.getLogger(__name__)

RUNNING, DONE, FAILED, CANCELLED = "running", "done", "failed", "cancelled"
KEEP_FINISHED = 20
"""Finished tunes kept for the tab (the oldest are forgotten first; their results stay in their files)."""

Tuner = Callable[..., TuneResult]
"""`StudioService.tune`'s signature: (options, *, on_progress, cancel) -> TuneResult."""


@dataclass
class TuneJob:
    """One tune the tab started: its options, the race so far, and how it ended."""

    job_id: str
    options: TuneOptions
    owner: str | None
    cancel: CancelToken = field(default_factory=CancelToken)
    started: float = field(default_factory=time.time)
    state: str = RUNNING
    progress: TuneProgress | None = None
    race: TuneProgress | None = None
    """The latest progress of the race on dev (the test phase's progress has the finalists only)."""
    result: TuneResult | None = None
    error: str | None = None
    thread: threading.Thread | None = None

    def snapshot(self) -> dict[str, Any]:
        """What the tab shows: state, elapsed seconds, the latest progress, the result's JSON, the error."""
        return {"job_id": self.job_id, "state": self.state, "elapsed_s": round(time.time() - self.started, 1),
                "options": self.options.to_json(), "error": self.error,
                "progress": asdict(self.progress) if self.progress is not None else None,
                "race": asdict(self.race) if self.race is not None else None,
                "result": self.result.to_json() if self.result is not None else None}


class TuneJobs:
    """The tunes of one studio. `tune` runs one tune in the calling thread (default: the studio's own)."""

    def __init__(self, tune: Tuner) -> None:
        self._tune = tune
        self._jobs: dict[str, TuneJob] = {}
        self._lock = threading.Lock()

    def start(self, options: TuneOptions, owner: str | None = None) -> TuneJob:
        job = TuneJob(uuid.uuid4().hex[:12], options, owner)
        job.thread = threading.Thread(target=self._run, args=(job,), name=f"tune-{job.job_id}", daemon=True)
        with self._lock:
            self._forget_old()
            self._jobs[job.job_id] = job
        job.thread.start()
        return job

    def _run(self, job: TuneJob) -> None:
        def progressed(progress: TuneProgress) -> None:
            job.progress = progress
            if progress.phase == "dev":
                job.race = progress

        try:
            job.result = self._tune(job.options, on_progress=progressed, cancel=job.cancel)
            job.state = CANCELLED if job.cancel.cancelled else DONE
        except UserError as exc:
            job.error, job.state = str(exc), CANCELLED if job.cancel.cancelled else FAILED
        except Exception as exc:  # the tab shows the reason; the log keeps the traceback
            log.exception("tune %s failed", job.job_id)
            job.error, job.state = f"the tune stopped: {type(exc).__name__}: {exc}", FAILED

    def get(self, job_id: str, owner: str | None = None) -> TuneJob:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None or job.owner != owner:
            raise UserError(f"there is no tune {job_id!r} (it was forgotten, or the app restarted); start it again")
        return job

    def cancel(self, job_id: str, owner: str | None = None) -> TuneJob:
        job = self.get(job_id, owner)
        job.cancel.cancel("cancelled from the Tune tab")
        return job

    def _forget_old(self) -> None:
        finished = [j for j in self._jobs.values() if j.state != RUNNING]
        for job in sorted(finished, key=lambda j: j.started)[:max(0, len(finished) - KEEP_FINISHED + 1)]:
            del self._jobs[job.job_id]

    def close(self, timeout_s: float = 30.0) -> None:
        """Cancel every running tune and wait for its thread (the app is shutting down)."""
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            job.cancel.cancel("the app is shutting down")
        for job in jobs:
            if job.thread is not None:
                job.thread.join(timeout_s)
