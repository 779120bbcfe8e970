"""The `metagen` CLI through a subprocess, as a user would run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESOURCES = ROOT / "tests" / "resources"


def metagen(*args: str, tmp: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "METAGEN_HOME": str(tmp / "home"), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=timeout)


def test_validate_valid_examples_exit_0(tmp_path: Path) -> None:
    files = sorted(str(p) for p in (ROOT / "workflows").glob("*.yaml"))
    out = metagen("validate", *files, tmp=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(": ok") == len(files)


def test_validate_reports_all_four_problems_with_file_line_code(tmp_path: Path) -> None:
    path = RESOURCES / "four_problems.yaml"
    out = metagen("validate", str(path), tmp=tmp_path)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    found = {line.split(": ")[1] for line in lines}
    assert {"cycle", "unknown_kind", "unknown_ref", "bad_param"} <= found
    for line in lines:
        file, lineno, _rest = line.split(":", 2)
        assert file == str(path) and int(lineno) > 0
        assert line.endswith(")"), "each line carries a hint in parentheses"
    assert "Traceback" not in out.stderr


def test_validate_syntax_error_and_missing_file_never_traceback(tmp_path: Path) -> None:
    out = metagen("validate", str(RESOURCES / "yaml_syntax.yaml"), str(tmp_path / "nope.yaml"), tmp=tmp_path)
    assert out.returncode == 2
    assert "yaml_syntax" in out.stderr and "not_found" in out.stderr
    assert "Traceback" not in out.stderr


def test_run_dry_run_json(tmp_path: Path) -> None:
    wf = ROOT / "workflows" / "chain_of_thought.yaml"
    out = metagen("run", str(wf), "--dry-run", "--json", "--seed", "3", "--db", str(tmp_path / "t.db"),
                  tmp=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) >= {"run_id", "status", "outputs", "stats"}
    assert data["status"] == "succeeded"
    assert set(data["stats"]) >= {"lm_calls", "prompt_tokens", "completion_tokens", "wall_s"}
    assert data["stats"]["lm_calls"] >= 1
    assert "running" in out.stderr  # progress goes to stderr
    again = metagen("run", str(wf), "--dry-run", "--json", "--seed", "3", "--no-trace", tmp=tmp_path)
    assert json.loads(again.stdout)["outputs"] == data["outputs"]


def test_run_bad_input_exit_2_and_invalid_workflow_exit_2(tmp_path: Path) -> None:
    wf = ROOT / "workflows" / "chain_of_thought.yaml"
    out = metagen("run", str(wf), "--dry-run", "-i", "no_such_input=1", tmp=tmp_path)
    assert out.returncode == 2 and "unknown_input" in out.stderr
    out = metagen("run", str(wf), "--dry-run", "-i", "missing-equals", tmp=tmp_path)
    assert out.returncode == 2 and "name=value" in out.stderr
    out = metagen("run", str(RESOURCES / "four_problems.yaml"), "--dry-run", tmp=tmp_path)
    assert out.returncode == 2 and "cycle" in out.stderr


def test_run_budget_exceeded_exit_1(tmp_path: Path) -> None:
    wf = ROOT / "workflows" / "self_consistency.yaml"
    out = metagen("run", str(wf), "--dry-run", "--max-lm-calls", "1", "--no-trace", tmp=tmp_path)
    assert out.returncode == 1
    assert "budget exceeded" in out.stderr and "Traceback" not in out.stderr


def test_nodes_lists_every_kind(tmp_path: Path) -> None:
    out = metagen("nodes", "--json", tmp=tmp_path)
    assert out.returncode == 0
    kinds = {k["kind"] for k in json.loads(out.stdout)}
    assert {"generator", "sampler", "verifier", "voter", "refiner", "search", "input", "output",
            "template"} <= kinds
    text = metagen("nodes", tmp=tmp_path).stdout
    assert "sampler" in text and "param" in text


def test_run_usage_errors_exit_2_and_json_reports_problems(tmp_path: Path) -> None:
    wf = ROOT / "workflows" / "chain_of_thought.yaml"
    out = metagen("run", str(wf), "--dry-run", "--max-lm-calls", "-3", tmp=tmp_path)
    assert out.returncode == 2 and "positive" in out.stderr
    out = metagen("run", str(wf), "--dry-run", "--db", str(tmp_path), tmp=tmp_path)
    assert out.returncode == 2 and "trace database" in out.stderr and "Traceback" not in out.stderr
    out = metagen("run", str(RESOURCES / "four_problems.yaml"), "--dry-run", "--json", tmp=tmp_path)
    assert out.returncode == 2
    data = json.loads(out.stdout)
    assert data["status"] == "invalid" and {"cycle", "unknown_kind"} <= {i["code"] for i in data["issues"]}
