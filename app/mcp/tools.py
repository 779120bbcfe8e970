"""The tools an MCP caller sees: one per workflow of the workflows folder (the names `/v1` offers as models),
each parsed once per version of its file."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

import mcp_types as types
from mcp.shared.tool_name_validation import TOOL_NAME_REGEX

from app.mcp.schemas import input_schema, output_schema
from app.serve.catalog import AUTO_MODEL, WorkflowModel, find_model
from app.serve.errors import ApiError
from app.service.errors import UserError
from app.service.model_names import reserved_model_names
from app.service.studio import StudioService
from app.share.policy import SharePolicy
from app.workflow.problems import WorkflowError
from app.workflow.spec import Workflow, load_workflow_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkflowTool:
    """A workflow as a tool: its parsed file and the tool listed for it."""

    name: str
    workflow: Workflow
    tool: types.Tool


def describe(wf: Workflow) -> str:
    """The tool's description: the YAML's description, else its title."""
    return (wf.description or "").strip() or f"Runs the workflow {wf.name!r}."


class ToolCatalog:
    """Workflows as tools, re-read only when a file changes (its modification time and size)."""

    def __init__(self, service: StudioService) -> None:
        self.service = service
        self._lock = threading.Lock()
        self._parsed: dict[str, tuple[tuple[int, int, str | None], WorkflowTool | None]] = {}

    def tools(self, policy: SharePolicy) -> list[WorkflowTool]:
        """Every readable workflow whose name is a valid tool name (a model file's name is reserved, as on /v1)."""
        reserved = reserved_model_names(self.service.models_dir, policy)
        found = []
        for name in self.service.list_workflows():
            if name.casefold() in reserved:
                continue
            entry = self.get(name)
            if entry is not None:
                found.append(entry)
        return found

    def get(self, name: str) -> WorkflowTool | None:
        """The tool called `name`, or None (no such workflow, or it cannot be read)."""
        if not TOOL_NAME_REGEX.match(name):
            log.warning("workflow %r is not offered as an MCP tool: tool names are letters, digits, _ - and .", name)
            return None
        try:
            path = self.service.path_for(name)
            stat = path.stat()
        except (UserError, OSError):
            return None
        version = (stat.st_mtime_ns, stat.st_size, self._published(path))
        with self._lock:
            cached = self._parsed.get(name)
        if cached is not None and cached[0] == version:
            return cached[1]
        entry = self._load(name)
        with self._lock:
            self._parsed[name] = (version, entry)
        return entry

    def _published(self, path: Path) -> str | None:
        """The published version's hash (a publish re-reads the tool as an edit of the file does)."""
        versions = self.service.versions
        if versions is None:
            return None
        try:
            published = versions.published(path)
        except Exception as exc:  # the file is served as it is
            log.warning("cannot read the published version of %s: %s", path, exc)
            return None
        return published.version if published is not None else None

    def _load(self, name: str) -> WorkflowTool | None:
        try:
            wf = load_workflow_text(self.service.served_workflow_text(name)[1])
        except (UserError, WorkflowError) as exc:
            log.warning("workflow %r is not offered as an MCP tool: %s", name, exc)
            return None
        tool = types.Tool(name=name, title=wf.name, description=describe(wf), input_schema=input_schema(wf),
                          output_schema=output_schema(wf, self.service.registry))
        return WorkflowTool(name, wf, tool)


def auto_tool(service: StudioService, policy: SharePolicy, auto: str | None) -> WorkflowTool | None:
    """The `auto` tool when `auto` answers with a workflow (`metagen serve --auto NAME`, else the last recommended
    tuned workflow): that workflow's schemas under the name `auto`; None when there is no such target."""
    try:
        target = find_model(service, policy, AUTO_MODEL, auto)
        if not isinstance(target, WorkflowModel):
            return None
        wf = load_workflow_text(target.path.read_text(encoding="utf-8"))
    except (ApiError, UserError, WorkflowError, OSError, UnicodeDecodeError) as exc:
        log.debug("no auto tool: %s", exc)
        return None
    tool = types.Tool(name=AUTO_MODEL, title=f"auto: {wf.name}", description=f"Answers with {target.name} "
                      f"(what `auto` names on this server). {describe(wf)}", input_schema=input_schema(wf),
                      output_schema=output_schema(wf, service.registry))
    return WorkflowTool(AUTO_MODEL, wf, tool)
