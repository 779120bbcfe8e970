"""`metagen doctor` and the Models tab's install check: run every check, say what is broken and how to fix it."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.platform import paths
from app.service import doctor_checks as checks
from backends.llama.build_facts import gpu_driver

log = logging.getLogger(__name__)

MARKS = {checks.OK: "[ok]", checks.WARN: "[!]", checks.PROBLEM: "[x]"}


@dataclass
class DoctorReport:
    """Every check's {name, status, detail, fix}; broken when any is a problem."""

    checks: list[dict[str, str]] = field(default_factory=list)

    @property
    def problems(self) -> list[dict[str, str]]:
        return [c for c in self.checks if c["status"] == checks.PROBLEM]

    @property
    def warnings(self) -> list[dict[str, str]]:
        return [c for c in self.checks if c["status"] == checks.WARN]

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def exit_code(self) -> int:
        """0 when everything works (warnings allowed), 1 when something is broken."""
        return 0 if self.ok else 1

    def summary(self) -> str:
        if self.problems:
            return (f"{len(self.problems)} problem(s) to fix: "
                    + ", ".join(c["name"] for c in self.problems))
        if self.warnings:
            return f"this install works; {len(self.warnings)} warning(s)"
        return "this install works: no problems found"

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "summary": self.summary(), "checks": self.checks}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def to_text(self) -> str:
        """flutter doctor's shape: one line per check, its fix under it."""
        lines = []
        for c in self.checks:
            lines.append(f"{MARKS[c['status']]} {c['name']}: {c['detail']}")
            if c["fix"]:
                lines.append(f"    fix: {c['fix']}")
        lines.append("")
        lines.append(self.summary())
        return "\n".join(lines)

    def to_markdown(self) -> str:
        """The Models tab's report, marked as the CLI marks it (`[ok]`, `[!]`, `[x]`: emoji were empty boxes in
        browsers without an emoji font)."""
        lines = [f"**{self.summary()}**", ""]
        for c in self.checks:
            lines.append(f"- `{MARKS[c['status']]}` **{c['name']}**: {_md(c['detail'])}")
            if c["fix"]:
                lines.append(f"  - fix: {_md(c['fix'])}")
        return "\n".join(lines)


def _md(text: str) -> str:
    """Plain text inside markdown: angle brackets and underscores shown as typed."""
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("_", "\\_").replace("*", "\\*")


def _guarded(name: str, fn: Any, *args: Any) -> Any:
    """A check that raised is a problem of its own, never the end of the report."""
    try:
        return fn(*args)
    except Exception as exc:
        log.exception("doctor check %s failed", name)
        return checks.check(name, checks.PROBLEM, f"the check itself failed: {exc}", "run with -v and report it")


def run_doctor(models_dir: Path | None = None, trace_db: Path | None = None, pool: Any = None,
               canary: bool = True, canary_command: list[str] | None = None) -> DoctorReport:
    """Every check, in the order a reader fixes things: Python, packages, the engine build, GPU, the canary,
    broken models (when the pool keeps a list), models, disk, isolation, Chromium, the Hub, traces."""
    models = Path(models_dir or paths.models_dir()).expanduser()
    traces = Path(trace_db or paths.trace_db_path()).expanduser()
    report = DoctorReport()
    add = report.checks.append
    add(_guarded("Python", checks.check_python))
    add(_guarded("packages", checks.check_packages))
    system_info, error = checks.engine_system_info()
    add(_guarded("engine build", checks.check_engine_build, system_info, error))
    add(_guarded("GPU", checks.check_gpu, system_info, gpu_driver()))
    if canary:
        add(_guarded("canary decode", checks.check_canary, canary_command))
    broken = _guarded("broken models", checks.check_broken_models, pool)
    if broken is not None:
        add(broken)
    stops = _guarded("engine stops", checks.check_engine_stops, pool)
    if stops is not None:
        add(stops)
    add(_guarded("models", checks.check_models, models))
    add(_guarded("disk space", checks.check_disk, {"data": paths.data_dir(), "models": models, "traces": traces}))
    add(_guarded("code isolation", checks.check_isolation))
    add(_guarded("Chromium", checks.check_chromium))
    add(_guarded("Hugging Face Hub", checks.check_hub_env))
    add(_guarded("trace database", checks.check_traces, traces))
    return report
