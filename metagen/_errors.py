"""`metagen.WorkflowError`: a workflow that cannot be used, printed as `metagen validate` prints its issues."""

from __future__ import annotations

from app.workflow.problems import Issue
from app.workflow.problems import WorkflowError as _ServiceWorkflowError

__all__ = ["Issue", "WorkflowError"]


class WorkflowError(_ServiceWorkflowError):
    """Every issue of a workflow (or of a run's inputs) that stops it; a ValueError.

    `issues` holds them (each with `code`, `message`, `hint`, `node_id`, `line`, `severity`), and `str()` lists
    them one per line exactly as `metagen validate` prints them.

    Example:
        >>> import metagen
        >>> try:
        ...     metagen.load("version: 1\\nnodes: []\\noutputs: {answer: nowhere.text}\\n")
        ... except metagen.WorkflowError as exc:
        ...     print([issue.code for issue in exc.issues])  # doctest: +SKIP
    """

    def __init__(self, issues: list[Issue], source: str = "") -> None:
        self.source = source
        super().__init__(list(issues))

    def __str__(self) -> str:
        return "\n".join(issue.format(self.source) for issue in self.issues) or "invalid workflow"

    @classmethod
    def from_service(cls, error: _ServiceWorkflowError, source: str = "") -> WorkflowError:
        """The same issues as the service layer's error (the library's own type, for `except` clauses)."""
        return error if isinstance(error, cls) else cls(error.issues, source)
