"""Argument checks of the public functions: a TypeError or ValueError that names the argument."""

from __future__ import annotations

from typing import Any


def expect(name: str, value: Any, types: type | tuple[type, ...], wanted: str) -> None:
    """TypeError naming `name` unless `value` is one of `types` (a bool is never taken for a number)."""
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise TypeError(f"{name} must be {wanted}, got a bool")
    if not isinstance(value, types):
        raise TypeError(f"{name} must be {wanted}, got {type(value).__name__}")


def positive(name: str, value: Any, *, optional: bool = True) -> None:
    """A whole number > 0 (or None when optional)."""
    if value is None and optional:
        return
    expect(name, value, int, "a whole number" + (" or None" if optional else ""))
    if value <= 0:
        raise ValueError(f"{name} must be at least 1, got {value}")
