"""The models the API offers: every workflow of the workflows folder, the tuned workflows (`tuned/NAME`, and `auto`
for the most recent: app.serve.tuned), and each local model file under its name (the bundled model and the GGUF
files of the models folder) for plain completions."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.serve.errors import ApiError
from app.serve.tuned import AUTO_MODEL, TUNED_PREFIX, auto_target, tuned_names, tuned_path
from app.service.errors import UserError
from app.service.model_names import BUNDLED_ALIAS, bundled_path, folder_model_paths, reserved_model_names
from app.service.studio import StudioService
from app.service.versions import split_ref
from app.share.policy import SharePolicy
from app.workflow.problems import WorkflowError
from app.workflow.spec import Workflow, load_workflow, load_workflow_text
from backends.base import ModelSpec

log = logging.getLogger(__name__)

OWNER = "metagen"


@dataclass(frozen=True)
class WorkflowModel:
    name: str
    path: Path


@dataclass(frozen=True)
class FileModel:
    name: str
    """The file name: the model's id."""
    spec: ModelSpec


SERVE_CONTEXT = 32_768
"""The context a model file served on /v1 is loaded with: its training context up to this (an agent's prompt with
its tools is 10-20k tokens; Gemma 3 270M trained on 32k, SmolLM2 on 8k)."""
DEFAULT_CONTEXT = 4096
"""When the file does not say its training context."""


@functools.lru_cache(maxsize=64)
def _trained_context(path: str, mtime_ns: int) -> int | None:
    from backends.llama.models.gguf import model_file_info

    try:
        return model_file_info(path).context_length
    except Exception as exc:  # an unreadable file fails with its own error when it is loaded
        log.debug("no context length read from %s: %s", path, exc)
        return None


def serve_context(path: Path) -> int:
    """The context to load `path` with on /v1: its training context, at most SERVE_CONTEXT."""
    try:
        trained = _trained_context(str(path), path.stat().st_mtime_ns)
    except OSError:
        trained = None
    return min(trained or DEFAULT_CONTEXT, SERVE_CONTEXT)


def model_files(service: StudioService, policy: SharePolicy) -> dict[str, FileModel]:
    """Model files by name: the bundled model, then the models folder (share mode: the policy's choices), each
    loaded with the context it was trained for (up to SERVE_CONTEXT)."""
    found: dict[str, FileModel] = {}
    bundled = bundled_path()
    if bundled is not None:
        found[bundled.name] = FileModel(bundled.name, ModelSpec(n_ctx=serve_context(bundled)))
    for path in folder_model_paths(service.models_dir, policy):
        found.setdefault(path.name, FileModel(path.name, ModelSpec(source="path", path=str(path),
                                                                   n_ctx=serve_context(path))))
    return found


def _created(path: Path) -> int:
    try:
        return int(path.stat().st_mtime)
    except OSError:
        return 0


def _load(service: StudioService, model: WorkflowModel) -> Workflow:
    """A workflow model's file, parsed: a tuned workflow from its path, any other through the service by name: its
    published version when one is (`metagen publish`), the version `NAME@VERSION` pins, else the file as saved."""
    if model.name.startswith(TUNED_PREFIX):
        return load_workflow(model.path)
    _, text, _, _ = service.served_workflow_text(model.name)
    return load_workflow_text(text)


def _workflow_entry(service: StudioService, name: str, path: Path | None = None) -> dict[str, Any]:
    path = path or service.path_for(name)
    entry: dict[str, Any] = {"id": name, "object": "model", "created": _created(path), "owned_by": OWNER}
    try:
        wf = _load(service, WorkflowModel(name, path))
    except (UserError, WorkflowError) as exc:
        entry["description"] = f"(this workflow cannot be read: {exc})"
        entry["metagen"] = {"kind": "workflow", "valid": False}
        return entry
    entry["description"] = wf.description
    entry["metagen"] = {"kind": "workflow", "title": wf.name, "published": _published(service, name),
                        "inputs": {k: {"type": s.type, "description": s.description} for k, s in wf.inputs.items()},
                        "outputs": list(wf.outputs)}
    return entry


def _published(service: StudioService, name: str) -> str | None:
    """The published version's hash (what answers), None when the file as saved does."""
    versions = service.versions
    if versions is None or name.startswith(TUNED_PREFIX):
        return None
    try:
        found = versions.published(service.path_for(name))
    except UserError:
        return None
    return found.version if found is not None else None


def _tuned_entries(service: StudioService, auto: str | None) -> list[dict[str, Any]]:
    """`auto` (when it has a target), then each tuned workflow, the most recent first."""
    entries = []
    for name in tuned_names(service):
        path = tuned_path(service, name)
        if path is not None:
            entry = _workflow_entry(service, name, path)
            entry["metagen"]["tuned"] = True
            entries.append(entry)
    target = auto_target(service, auto)
    if target is not None:
        entries.insert(0, {"id": AUTO_MODEL, "object": "model", "created": entries[0]["created"] if entries else 0,
                           "owned_by": OWNER, "description": f"answers with {target} (the most recent tuned workflow "
                           "unless the server names one)", "metagen": {"kind": "auto", "target": target}})
    return entries


def list_models(service: StudioService, policy: SharePolicy, auto: str | None = None) -> list[dict[str, Any]]:
    """Workflows (but not those named like a model: model names are reserved), `auto` and the tuned workflows,
    then the model files. `auto`: the model id the server's config has `auto` answer with (None: the most recent
    tuned workflow)."""
    reserved = reserved_model_names(service.models_dir, policy)
    data = [_workflow_entry(service, name) for name in service.list_workflows() if name.casefold() not in reserved]
    data += _tuned_entries(service, auto)
    for name, model in model_files(service, policy).items():
        created = _created(Path(model.spec.path)) if model.spec.path else 0
        data.append({"id": name, "object": "model", "created": created, "owned_by": OWNER,
                     "description": "local model file: plain completions from the engine",
                     "metagen": {"kind": "model"}})
    return data


def _auto_model(service: StudioService, policy: SharePolicy, auto: str | None) -> WorkflowModel | FileModel:
    target = auto_target(service, auto)
    if target is None:
        raise ApiError(404, "`auto` answers with the most recent tuned workflow, and there is none yet: run "
                       "`metagen tune --data FILE ...` (it writes tuned/NAME.yaml into the workflows folder), or "
                       "name a workflow with `metagen serve --auto NAME`", param="model", code="model_not_found")
    if target == AUTO_MODEL:
        raise ApiError(404, "`auto` cannot name itself; give `metagen serve --auto` a workflow name",
                       param="model", code="model_not_found")
    return find_model(service, policy, target)


def find_model(service: StudioService, policy: SharePolicy, model_id: str,
               auto: str | None = None) -> WorkflowModel | FileModel:
    """The model file (first: model names are reserved) or workflow called `model_id` (a tuned one as `tuned/NAME`;
    `auto`: the workflow `auto` names, else the most recent tuned one); ApiError 404 otherwise."""
    if model_id == AUTO_MODEL:
        return _auto_model(service, policy, auto)
    tuned = tuned_path(service, model_id)
    if tuned is not None:
        return WorkflowModel(model_id, tuned)
    files = model_files(service, policy)
    if model_id in files:
        return files[model_id]
    for name, model in files.items():
        if model_id == Path(name).stem or (model_id == BUNDLED_ALIAS and model.spec.source == "bundled"):
            return model
    base, ref = split_ref(model_id)
    if ref is not None:  # NAME@VERSION: a recorded version of a workflow of the folder (checked when it is read)
        try:
            pinned = service.path_for(base)
        except UserError:
            pinned = None
        if pinned is not None and base.casefold() not in reserved_model_names(service.models_dir, policy):
            return WorkflowModel(f"{pinned.stem}@{ref}", pinned)
    try:
        path = service.path_for(model_id)
    except UserError:
        path = None
    if path is not None and path.is_file() and model_id.casefold() not in reserved_model_names(
            service.models_dir, policy):
        return WorkflowModel(path.stem, path)
    raise ApiError(404, f"the model {model_id!r} does not exist: give a workflow name or a model file name "
                   "(GET /v1/models lists them)", param="model", code="model_not_found")


def read_workflow(service: StudioService, model: WorkflowModel) -> Workflow:
    """The workflow's file, parsed (validation comes later); ApiError 400 when it cannot be read."""
    try:
        return _load(service, model)
    except UserError as exc:
        raise ApiError(404, str(exc), param="model", code="model_not_found") from None
    except WorkflowError as exc:
        raise invalid_workflow(model.name, exc.issues) from None


def invalid_workflow(name: str, issues: list[Any]) -> ApiError:
    from app.service.studio import issues_summary

    return ApiError(400, f"workflow {name!r} is invalid: {issues_summary(issues)}", param="model",
                    code="invalid_workflow", extra={"issues": [i.to_json() for i in issues]})
