"""The programs a confined code run executes (standard library only, run by path inside the sandbox): the
supervisor that decides the verdict, its verdict and stdin/stdout children, the harness of the per-test breakdown,
and the prelude they share. `program_files()` is what code_tests copies into the run's folder."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

PROGRAMS = ("supervisor.py", "harness.py", "prelude.py", "verdict_child.py", "io_child.py")
"""The files a run's folder holds; the supervisor is the one started (`python -I -S supervisor.py`)."""
ENTRY = "supervisor.py"
HARNESS = "harness.py"


@lru_cache(maxsize=1)
def program_files() -> dict[str, str]:
    """{file name: source} of every program, read once from this package."""
    here = Path(__file__).resolve().parent
    return {name: (here / name).read_text(encoding="utf-8") for name in PROGRAMS}
