"""Tunes for the CLI, the Python API and the Tune tab: options checked into a race over the candidates on dev,
the finalists run once on the held-out items, the recommended workflow written; UserError for bad input."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from app.eval.tune.api import TuneOptions, TuneProgress, TuneResult
from app.service.errors import UserError
from backends.base import CancelToken

log = logging.getLogger(__name__)

__all__ = ["TuneOptions", "TuneProgress", "TuneResult", "TuneService"]


class TuneService:
    """Runs tunes in the caller's thread on the studio's scheduler, recording every (candidate, item) run in the
    evaluation store so a killed tune resumes."""

    def __init__(self, studio: Any) -> None:
        self.studio = studio

    def tune(self, options: TuneOptions, *, on_progress: Callable[[TuneProgress], None] | None = None,
             cancel: CancelToken | None = None) -> TuneResult:
        """Race the candidates on dev, report the finalists on test, write the recommended workflow."""
        from app.eval.tune.errors import TuneError
        from app.eval.tune.tuner import Tuner

        if self.studio.share_mode:
            raise UserError("tuning runs many evaluations and is not available on a shared app")
        evaluations = self.studio.evaluations
        store = evaluations.store
        if store is None:
            raise UserError("tuning needs the trace database, which cannot be opened; fix --db and restart")
        try:
            tuner = Tuner(options, registry=self.studio.registry, scheduler=self.studio.scheduler, store=store,
                          observers=evaluations.observers, workflows_dir=self.studio.workflows_dir,
                          examples_dir=self.studio.examples_dir,
                          cancel=cancel, on_progress=on_progress)
            result = tuner.run()
        except TuneError as exc:
            raise UserError(str(exc)) from None
        self._record_versions(result)
        return result

    def _record_versions(self, result: TuneResult) -> None:
        """The workflows a tune wrote (`--out`, the adaptive policy and its branches) as versions, each with the
        tune's id in its message; the version of the recommended one in `result.recommended["version"]`."""
        from pathlib import Path

        versions = self.studio.versions
        if versions is None:
            return
        message = f"metagen tune {result.tune_id}"
        paths = [("recommended", result.recommended.get("path"))]
        adaptive = result.adaptive or {}
        paths.append(("adaptive", adaptive.get("path")))
        for label, path in paths:
            if not path:
                continue
            try:
                version = versions.record_file(Path(path), message=message)
            except Exception as exc:  # the workflow is written; only its history entry is missing
                log.warning("the tune's workflow %s was not recorded as a version: %s", path, exc)
                continue
            if version is not None:
                (result.recommended if label == "recommended" else adaptive)["version"] = version.version
