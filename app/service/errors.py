"""The error a user can fix: raised by the service, shown by the UI and CLI as a plain message."""

from __future__ import annotations


class UserError(ValueError):
    """A request the user can fix; the message says what is wrong and how to fix it."""
