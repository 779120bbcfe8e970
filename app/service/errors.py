"""The error a user can fix: raised by the service, shown by the UI and CLI as a plain message."""

from __future__ import annotations


class UserError(ValueError):
    """A request the user can fix; the message says what is wrong and how to fix it."""

    def __init__(self, message: str = "", code: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        """A problem code for callers that branch on the case (pulls: unknown_repo, offline, ...); often None."""
