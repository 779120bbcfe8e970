"""The sampler's `method: beam` params: token-level (diverse) beam search's settings and their checks."""

from __future__ import annotations

from typing import Any

from backends.beam_search import BeamSettings
from nodes.base import Param

BEAM_PARAMS = (
    Param("length_penalty", "float", 1.0, "Beam: alpha of the length penalty; a beam scores sum logprob / "
          "length^alpha (0: raw log-probability, favouring short answers)", min=0.0, max=5.0,
          show_if=("method", ("beam",))),
    Param("diverse_groups", "int", 1, "Beam: diverse beam search's G groups of n / G beams (it divides n)",
          min=1, max=64, show_if=("method", ("beam",))),
    Param("diversity_penalty", "float", 0.0, "Beam: lambda, the cost of a token chosen at this step by an "
          "earlier group (Hamming diversity); needs diverse_groups > 1", min=0.0, max=100.0,
          show_if=("method", ("beam",))),
)


def beam_problems(params: dict[str, Any]) -> list[tuple[str, str]]:
    """Cross-param checks of method: beam (the temperature warning is the workflow validation's)."""
    if params.get("method") != "beam":
        return []
    problems: list[tuple[str, str]] = []
    n, groups = params.get("n"), params.get("diverse_groups", 1)
    if isinstance(n, int) and n >= 1 and isinstance(groups, int) and groups >= 1 and n % groups:
        problems.append(("diverse_groups", f"diverse_groups ({groups}) must divide n ({n}): each group holds "
                                           f"n / diverse_groups beams; try {_divisor_below(n, groups)}"))
    if params.get("adaptive", "off") not in ("off", None):
        problems.append(("adaptive", "beam search keeps all n beams to the end: set adaptive: off (or use "
                                     "method: sample for adaptive stopping)"))
    if params.get("think", "off") not in ("off", None, False):
        problems.append(("think", "beam search decodes the answer directly: set think: off (thinking budgets work "
                                  "with method: sample)"))
    return problems


def _divisor_below(n: int, groups: int) -> int:
    return max(d for d in range(1, min(n, groups) + 1) if n % d == 0)


def beam_settings(params: dict[str, Any], max_tokens: int) -> BeamSettings:
    return BeamSettings(n=params["n"], length_penalty=float(params.get("length_penalty", 1.0)),
                        groups=int(params.get("diverse_groups", 1)),
                        diversity_penalty=float(params.get("diversity_penalty", 0.0)), max_tokens=max_tokens)
