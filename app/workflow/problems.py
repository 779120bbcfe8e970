"""Workflow problems as data: a stable code, the node, the YAML line, and a hint on how to fix it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Issue:
    code: str
    message: str
    hint: str = ""
    node_id: str | None = None
    line: int | None = None
    severity: str = "error"
    """"error" blocks a run; "warning" does not."""
    file: str | None = None
    """The sub-workflow file the line is in (its node_id is then the path `wf_node/node`); None: this workflow."""

    def format(self, source: str = "") -> str:
        """`FILE:LINE: CODE: message (hint)` — the CLI's one-line form."""
        source = self.file or source
        where = f"{source}:{self.line or 0}: " if source else (f"line {self.line}: " if self.line else "")
        node = f"[{self.node_id}] " if self.node_id else ""
        hint = f" ({self.hint})" if self.hint else ""
        return f"{where}{self.code}: {node}{self.message}{hint}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class WorkflowError(ValueError):
    """Raised when a workflow cannot be used; carries every problem found."""

    def __init__(self, issues: list[Issue]) -> None:
        self.issues = issues
        first = issues[0].format() if issues else "invalid workflow"
        more = f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""
        super().__init__(first + more)


def errors(issues: list[Issue]) -> list[Issue]:
    return [i for i in issues if i.severity == "error"]
