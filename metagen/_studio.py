"""`metagen.Studio`: the service object (engine pool, trace database, scheduler) the public functions run on."""

from __future__ import annotations

import atexit
import threading
from pathlib import Path
from typing import Any

from app.service.studio import StudioService
from metagen._args import expect

__all__ = ["Studio", "default_studio"]


def _folder(name: str, value: Any) -> Path | None:
    if value is None:
        return None
    expect(name, value, (str, Path), "a path (str or pathlib.Path) or None")
    return Path(value).expanduser()


class Studio:
    """The app's service object for Python: one model pool kept warm across runs, one trace database, one
    scheduler (its node and sample caches). The module-level functions use a default Studio created on first use
    and closed at exit; make your own to choose the folders, use the scripted fake model, or close it early.

    Args:
        dry_run: answer every model call with the scripted fake backend (no model loads; for trying things out).
        trace_db: the trace database (default: ``$METAGEN_TRACE_DB`` or the user data folder).
        models_dir: the models folder (default: ``$METAGEN_MODELS`` or the user data folder).
        workflows_dir: the workflows folder (default: ``$METAGEN_WORKFLOWS`` or the user data folder).

    Example:
        >>> import metagen
        >>> with metagen.Studio(dry_run=True) as studio:
        ...     result = metagen.load("self_consistency").run(studio=studio)
        ...     print(result.status)
        succeeded
    """

    def __init__(self, *, dry_run: bool = False, trace_db: str | Path | None = None,
                 models_dir: str | Path | None = None, workflows_dir: str | Path | None = None) -> None:
        expect("dry_run", dry_run, bool, "True or False")
        self._service = StudioService(dry_run=dry_run, trace_db=_folder("trace_db", trace_db),
                                      models_dir=_folder("models_dir", models_dir),
                                      workflows_dir=_folder("workflows_dir", workflows_dir))
        self._closed = False

    @property
    def service(self) -> StudioService:
        """The StudioService underneath (the one the UI and CLI use); ValueError once closed."""
        if self._closed:
            raise ValueError("this Studio is closed; make a new metagen.Studio()")
        return self._service

    @property
    def closed(self) -> bool:
        return self._closed

    def models(self) -> list[dict[str, Any]]:
        """The model catalog: the bundled model and the models folder's files (name, path, size, loaded...)."""
        return self.service.models.entries()

    def nodes(self) -> list[dict[str, Any]]:
        """Every node kind with its ports and params (ranges, choices, defaults), as `metagen nodes --json`."""
        return self.service.schema()

    def traces(self, limit: int = 20) -> list[dict[str, Any]]:
        """The newest traced runs first (id, workflow, status, tokens, seconds...)."""
        from metagen._args import positive

        positive("limit", limit, optional=False)
        return self.service.list_traces(limit=limit)

    def close(self) -> None:
        """Cancel what still runs, close the trace database and unload the models (idempotent)."""
        if not self._closed:
            self._closed = True
            self._service.close()

    def __enter__(self) -> Studio:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"dry_run={self._service.dry_run}"
        return f"<metagen.Studio {state} workflows={self._service.workflows_dir}>"


_default: Studio | None = None
_default_lock = threading.Lock()


def default_studio() -> Studio:
    """The process's shared Studio (created on first use, closed at exit; a closed one is replaced)."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = Studio()
        return _default


def studio_or_default(studio: Any) -> Studio:
    if studio is None:
        return default_studio()
    expect("studio", studio, Studio, "a metagen.Studio or None")
    return studio


@atexit.register
def _close_default() -> None:
    if _default is not None:
        _default.close()
