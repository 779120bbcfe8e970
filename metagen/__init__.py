"""Metagen Studio's Python API: load, run and evaluate meta-generation workflows from Python and notebooks.

A facade over the service layer the UI and the CLI use (no second code path): runs are traced in the same
database, evaluations are recorded beside them, and the model stays loaded between calls.

Example:
    >>> import metagen
    >>> wf = metagen.load("self_consistency")                      # a bundled example, a path, or YAML text
    >>> result = wf.run({"question": "What is 3 + 4?"})            # doctest: +SKIP
    >>> result.outputs["answer"], result.stats.tokens              # doctest: +SKIP
    ('7', 812)
    >>> result.figure("votes")                                     # doctest: +SKIP
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version
from pathlib import Path
from typing import Any

from app.run.events import Event
from app.run.scheduler import Budget, CancelToken
from metagen._errors import Issue, WorkflowError
from metagen._evaluate import evaluate
from metagen._results import Evaluation, RunResult, Stats
from metagen._serve import serve
from metagen._studio import Studio
from metagen._studio import studio_or_default as _studio_or_default
from metagen._tune import tune
from metagen._workflow import Workflow, load

try:
    __version__ = _version("metagen-studio")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0.0.0+source"

__all__ = [
    "Budget", "CancelToken", "Evaluation", "Event", "Issue", "RunResult", "Stats", "Studio", "Workflow",
    "WorkflowError", "__version__", "evaluate", "load", "models", "nodes", "pull", "serve", "trace", "traces", "tune",
]


def models(*, studio: Studio | None = None) -> list[dict[str, Any]]:
    """The local models, as `metagen models list`: the bundled model and the models folder's GGUF files (file,
    name, path, size, quantization, architecture, context length, chat_template / thinking_template / rank_head, the
    `entry` to paste under `models:`, device, loaded).

    Example:
        >>> [m["name"] for m in metagen.models()]   # doctest: +SKIP
        ['SmolLM2-135M-Instruct.Q4_K_M']
    """
    return _studio_or_default(studio).models()


def pull(ref: str, *, file: str | None = None, revision: str | None = None, models_dir: str | Path | None = None,
         progress: bool = True) -> Path:
    """Pull `USER/REPO[:QUANT]` from the Hugging Face Hub into the models folder (as `metagen models pull`:
    Q4_K_M by default, resumed, sha256-verified, an identical local file reused) and return the model's path;
    a tqdm bar per file unless `progress=False`. Raises ValueError (metagen's UserError) saying what to fix.

    Example:
        >>> path = metagen.pull("unsloth/Qwen3-0.6B-GGUF:Q4_K_M")       # doctest: +SKIP
        >>> [m["entry"] for m in metagen.models() if m["file"] == path.name]  # doctest: +SKIP
        [{'source': 'path', 'path': '/home/me/.local/share/metagen-studio/models/Qwen3-0.6B-Q4_K_M.gguf'}]
    """
    from app.service.model_pull import pull_model, tqdm_progress

    result = pull_model(ref, file=file, revision=revision, models_dir=models_dir,
                        progress=tqdm_progress if progress else None)
    return Path(result.path)


def nodes(*, studio: Studio | None = None) -> list[dict[str, Any]]:
    """Every node kind with its ports and params (type, default, range, choices), as `metagen nodes --json`.

    Example:
        >>> sampler = next(k for k in metagen.nodes() if k["kind"] == "sampler")
        >>> [p["name"] for p in sampler["params"]][:3]   # doctest: +SKIP
    """
    return _studio_or_default(studio).nodes()


def traces(limit: int = 20, *, studio: Studio | None = None) -> list[dict[str, Any]]:
    """The newest traced runs first: id, workflow, status, seed, tokens, seconds.

    Example:
        >>> [(t["id"], t["status"]) for t in metagen.traces(limit=5)]   # doctest: +SKIP
    """
    return _studio_or_default(studio).traces(limit=limit)


def trace(run_id: str, *, studio: Studio | None = None) -> RunResult:
    """A traced run read back (its id or an unambiguous prefix) as a `RunResult`, figures included.

    Example:
        >>> metagen.trace(metagen.traces(limit=1)[0]["id"]).figure("timeline")   # doctest: +SKIP
    """
    if not isinstance(run_id, str):
        raise TypeError(f"run_id must be a run id (str), got {type(run_id).__name__}")
    owner = _studio_or_default(studio)
    return RunResult.from_record(owner.service.trace_record(run_id), owner)
