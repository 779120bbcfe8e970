"""One way for tests to build a StudioService on a scripted fake model in a temp folder (local or share mode)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.service.studio import StudioService
from app.share.policy import SharePolicy
from backends.fake import FakeBackend


def studio_service(tmp_path: Path, *, share: bool = False, reply: Callable[[str, int], str] | None = None,
                   policy: SharePolicy | None = None, allowed_model: bool = False, **kwargs: Any) -> StudioService:
    """A dry-run service under `tmp_path` (workflows/, models/, traces.db; no examples) whose models all answer
    with `reply(prompt, i)` (default "ok"); share mode as the studio forces it on a host (`share`), or `policy`.
    `allowed_model` puts a file `allowed.gguf` into the models folder (share mode's list of model files)."""
    models = tmp_path / "models"
    models.mkdir(parents=True, exist_ok=True)
    if allowed_model:
        (models / "allowed.gguf").write_bytes(b"GGUF")
    if policy is None:
        policy = (SharePolicy.for_serving("127.0.0.1", force_share_mode=True, models_folder=models) if share
                  else SharePolicy.local())
    backend = FakeBackend(reply_fn=reply or (lambda prompt, i: "ok"))
    folder = tmp_path / "workflows"
    folder.mkdir(exist_ok=True)
    return StudioService(policy=policy, provider=lambda spec: backend, dry_run=True, workflows_dir=folder,
                         examples_dir=tmp_path / "no-examples", models_dir=models, trace_db=tmp_path / "traces.db",
                         **kwargs)
