"""Cancel and the run's cap kill the candidates' programs at once; share mode caps a visitor's program limits."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from typing import Any

import pytest

from app.run.events import EventRecorder
from app.run.node_context import Budget
from app.run.providers import fake_provider
from app.run.scheduler import Scheduler
from app.share.policy import SharePolicy
from app.workflow.spec import workflow_from_dict
from backends.base import CancelToken
from nodes.algorithms.code_exec import UID_RANGE, ExecLimits, run_confined
from nodes.algorithms.code_tests import run_code_tests
from nodes.registry import default_registry

# a program that burns CPU in itself and in three forked children, for a minute unless killed
BURN = ("import os\nfor _ in range(3):\n    if os.fork() == 0:\n        break\nwhile True:\n    pass\n")


def _run_processes() -> list[str]:
    """Live processes of the throw-away uids (a program's whole tree, whatever its process group)."""
    out = subprocess.run(["ps", "-eo", "uid=,stat=,pid="], capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if ln.split() and UID_RANGE[0] <= int(ln.split()[0]) < UID_RANGE[1]
            and not ln.split()[1].startswith("Z")]


def _settled() -> list[str]:
    """The run processes left once SIGKILLed ones had a moment to go (polled for up to 2 s)."""
    for _ in range(40):
        if not _run_processes():
            break
        time.sleep(0.05)
    return _run_processes()


def _needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("the program tree is found by its throw-away uid, taken only as root")


def _guarded(fn: Any) -> Any:
    """Run fn in a thread; a guard against a hang (60 s), not a timing assertion."""
    box: dict[str, Any] = {}
    t = threading.Thread(target=lambda: box.update(value=fn()), daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the program was not stopped"
    return box["value"]


def test_stop_kills_the_program_tree_long_before_its_limit() -> None:
    _needs_root()
    stop = threading.Event()
    limits = ExecLimits(timeout_s=60, memory_mb=256, stop=stop.is_set)

    def stop_when_running() -> None:
        while len(_run_processes()) < 4:  # the program and its three children burn
            time.sleep(0.05)
        stop.set()

    threading.Thread(target=stop_when_running, daemon=True).start()
    result = _guarded(lambda: run_confined(["-c", BURN], "", limits, isolate=False))
    assert result.cancelled and not result.timed_out
    assert _settled() == [], "the candidate's processes outlived the stop"


def test_a_stopped_run_starts_no_more_programs() -> None:
    stopped = ExecLimits(timeout_s=60, stop=lambda: True)
    report = run_code_tests("def f():\n    return 1\n", tests="assert f() == 1", limits=stopped, isolate=False)
    assert report.passed == 0 and "stopped" in report.reason


def _burning_workflow(timeout_s: float, memory_mb: int = 256) -> Any:
    code = "```python\n" + BURN + "```"
    return workflow_from_dict({"version": 1, "name": "burn", "nodes": [
        {"id": "s", "kind": "sampler", "params": {"n": 4, "prompt": "{q}"}, "inputs": {"q": "inputs.q"}},
        {"id": "v", "kind": "verifier", "params": {"method": "tests", "timeout_s": timeout_s, "memory_mb": memory_mb,
                                                   "tests": "assert True"},
         "inputs": {"candidates": "s.candidates"}}],
        "outputs": {"scores": "v.scores"}, "inputs": {"q": {"type": "text", "default": "burn"}}}), code


def test_the_runs_time_cap_kills_its_candidates() -> None:
    _needs_root()
    wf, code = _burning_workflow(timeout_s=60)
    scheduler = Scheduler(default_registry(), fake_provider(replies=[code] * 4))
    result = _guarded(lambda: scheduler.run(wf, seed=0, budget=Budget(max_seconds=2)))
    assert result.status != "succeeded"
    assert _settled() == [], "candidates outlived the run's time cap"


def test_cancel_kills_the_candidates() -> None:
    _needs_root()
    wf, code = _burning_workflow(timeout_s=60)
    scheduler = Scheduler(default_registry(), fake_provider(replies=[code] * 4))
    rec = EventRecorder(skip=("token",))
    holder: dict[str, Any] = {}

    def cancel_when_burning() -> None:
        while len(_run_processes()) < 4:
            time.sleep(0.05)
        holder["token"].cancel("cancelled by the test")

    holder["token"] = CancelToken()
    threading.Thread(target=cancel_when_burning, daemon=True).start()
    result = _guarded(lambda: scheduler.run(wf, seed=0, observers=[rec], cancel=holder["token"]))
    assert result.status != "succeeded"
    assert _settled() == [], "candidates outlived the cancelled run"


def test_share_mode_caps_a_visitors_program_limits() -> None:
    policy = SharePolicy.for_serving(force_share_mode=True, allow_code_execution=True, model_choices=[],
                                     max_code_seconds=3, max_code_memory_mb=300)
    assert policy.code_limit_caps == (3.0, 300)
    assert SharePolicy.local().code_limit_caps is None
    wf = workflow_from_dict({"version": 1, "name": "t", "nodes": [
        {"id": "s", "kind": "sampler", "params": {"n": 1, "prompt": "x"}},
        {"id": "v", "kind": "verifier", "params": {"method": "tests", "timeout_s": 120, "memory_mb": 8192,
                                                   "tests": "assert f() == 1"},
         "inputs": {"candidates": "s.candidates"}}], "outputs": {"scores": "v.scores"}})
    scheduler = Scheduler(default_registry(), fake_provider(replies=["def f():\n    return 1\n"]))
    scheduler.code_limit_caps = policy.code_limit_caps
    rec = EventRecorder(skip=("token",))
    result = scheduler.run(wf, seed=0, observers=[rec])
    assert result.outputs["scores"] == [1.0]
    (iso,) = [e.data for e in rec.of_type("node_event") if e.data["kind"] == "code_isolation"]
    assert (iso["timeout_s"], iso["memory_mb"]) == (3.0, 300)


def test_the_code_cap_flags_reach_the_policy() -> None:
    import argparse

    from app.cli.share_flags import add_share_arguments, policy_from_args

    p = argparse.ArgumentParser()
    add_share_arguments(p)
    args = p.parse_args(["--share-mode", "--allow-code-execution", "--cap-code-seconds", "4",
                         "--cap-code-memory-mb", "200"])
    assert policy_from_args(args, "127.0.0.1").code_limit_caps == (4.0, 200)
    with pytest.raises(ValueError, match="--cap-code-memory-mb"):
        policy_from_args(p.parse_args(["--share-mode", "--cap-code-memory-mb", "0"]), "127.0.0.1")
