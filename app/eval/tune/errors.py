"""The tuner's one error: a tune that cannot start or go on, with every reason and how to fix it."""

from __future__ import annotations


class TuneError(ValueError):
    """The tune cannot start (nothing ran) or cannot go on; the message says what to fix."""
