"""A candidate's limits hold for its whole process tree: memory (a cgroup, else fewer processes with the memory
divided), CPU seconds (every process's together) and scratch disk (a tmpfs of that size under bubblewrap, else
watched); the same with and without a cgroup, run through the harness as the tests verifier runs candidates."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from nodes.algorithms import code_exec
from nodes.algorithms.code_cgroup import CGROUP_ENV, RunCgroup
from nodes.algorithms.code_exec import ExecLimits, ExecResult, process_shares, run_confined
from nodes.algorithms.confined import HARNESS, program_files

# four children each try to hold 200 MB (a file `held-N` says one did); the tree may hold 256 MB
GREEDY = """import os, time
kids = []
for n in range(4):
    try:
        pid = os.fork()
    except OSError:  # fewer processes allowed (no cgroup): what the rest would have held is not held
        break
    if pid == 0:
        try:
            block = bytearray(200 * 1024 * 1024)
            for i in range(0, len(block), 4096):
                block[i] = 1
            open(f"held-{n}", "w").close()
            time.sleep(1)
        except MemoryError:
            pass
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)

def held():
    return len([f for f in os.listdir(".") if f.startswith("held-")])
"""
BURNERS = "import os\nfor _ in range(3):\n    if os.fork() == 0:\n        break\nwhile True:\n    pass\n"
FILLER = ("import os\nfor i in range(200):\n    with open(f'f{i}', 'wb') as f:\n        f.write(b'x' * 500_000)\n"
          "import time\ntime.sleep(5)\n")


def harnessed(code: str, tests: str, limits: ExecLimits) -> ExecResult:
    """The candidate `code` run as the tests verifier runs it: in the harness, as the run's uid, with its limits."""
    request = {"code": code, "tests": tests, "entry_point": "", "io_tests": [], "probes": []}
    return run_confined([HARNESS], json.dumps(request), limits, files=program_files())


@pytest.fixture(params=["cgroup", "no-cgroup"])
def cgroup_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("the tree is bounded through a throw-away uid (and a cgroup), taken only as root")
    if request.param == "cgroup":
        probe = RunCgroup.create(64 << 20, 8)
        if probe is None:
            pytest.skip("no cgroup can be made here")
        probe.remove()
    else:
        monkeypatch.setenv(CGROUP_ENV, "none")
    yield request.param


def test_memory_is_bounded_for_the_whole_tree(cgroup_mode: str) -> None:
    result = harnessed(GREEDY, "assert held() <= 1", ExecLimits(timeout_s=10, memory_mb=256))
    assert '"passed": true' in result.results, f"more than one child held 200 MB under a 256 MB limit: {result}"


def test_cpu_seconds_are_counted_over_the_tree(cgroup_mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(code_exec, "WALL_EXTRA_S", 60.0)  # the wall clock out of the way, on a loaded machine too
    result = harnessed(BURNERS, "assert True", ExecLimits(timeout_s=1, memory_mb=256))
    assert result.stopped_by == "cpu" and not result.timed_out, result


def test_scratch_disk_is_bounded(cgroup_mode: str) -> None:
    limits = ExecLimits(timeout_s=5, memory_mb=256, disk_mb=20)
    result = harnessed(FILLER, "assert True", limits)
    if result.isolated:  # a tmpfs of 20 MB: the writes fail with ENOSPC
        assert "No space left" in result.results + result.stderr, result
    else:  # watched: the tree is killed once the folder passes 20 MB
        assert result.stopped_by == "disk", result


def test_the_memory_is_divided_without_a_cgroup() -> None:
    assert process_shares(512, cgroup=True) == (512, 32)
    assert process_shares(512, cgroup=False) == (128, 4)
    assert process_shares(100, cgroup=False) == (100, 1)
    assert process_shares(32, cgroup=False) == (32, 1)


def test_a_tree_watch_kill_is_named_for_what_it_stopped() -> None:
    """A program killed by the tree's watch (SIGKILL, like the CPU limit's) says which limit it reached."""
    from nodes.algorithms.code_exec import ExecLimits, ExecResult
    from nodes.algorithms.code_tests import _death

    limits = ExecLimits(timeout_s=5, memory_mb=256, disk_mb=32)
    for stopped_by, words in (("disk", "scratch disk limit (32 MB)"), ("memory", "memory limit exceeded (256 MB"),
                              ("cpu", "CPU time limit (5 s")):
        result = ExecResult(-9, "", "", "", False, False, stopped_by=stopped_by)
        assert words in _death(result, limits), stopped_by
    assert "CPU time limit" in _death(ExecResult(-9, "", "", "", False, False), limits)


def _dead_pid() -> int:
    """A process id no process has now (a child that has been reaped)."""
    import subprocess

    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _stale_name(pid: int | None = None, start: int | None = None, namespace: int | None = None) -> str:
    """A cgroup name as a studio of this pid namespace makes it, for process `pid` started at `start`."""
    from nodes.algorithms import code_cgroup

    me = code_cgroup.owner()
    assert me is not None, "/proc cannot prove who made a cgroup here"
    ns, _, _ = me
    pid = _dead_pid() if pid is None else pid
    return f"metagen-code-{namespace or ns}-{pid}-{start if start is not None else 1}-0a1b2c3d"


def test_stale_cgroups_of_a_killed_studio_are_swept(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Folders made by a process of this pid namespace that is gone (its pid free, or taken by a process that
    started at another time) are removed once per parent; a live process's and foreign ones stay (a plain folder
    stands in for a cgroup: rmdir is what removes both)."""
    from nodes.algorithms import code_cgroup

    monkeypatch.setattr(code_cgroup, "_swept", set())
    me = code_cgroup.owner()
    assert me is not None
    ns, pid, start = me
    stale = tmp_path / _stale_name()
    reused = tmp_path / _stale_name(pid, start + 1)  # our pid, an earlier process's start time: that one is gone
    live = tmp_path / code_cgroup.cgroup_name()
    foreign = tmp_path / "metagen-code-notapid-0a1b2c3d"
    for d in (stale, reused, live, foreign):
        d.mkdir()
    assert live.name.startswith(f"metagen-code-{ns}-{pid}-{start}-")
    assert code_cgroup.sweep_stale(tmp_path) == 2
    assert not stale.exists() and not reused.exists() and live.exists() and foreign.exists()
    stale.mkdir()
    assert code_cgroup.sweep_stale(tmp_path) == 0 and stale.exists()  # once per parent and process


def test_a_grader_of_another_pid_namespace_is_never_swept(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A grader under `unshare -pf` names its cgroup with a pid of its own namespace, which need not exist here: a
    host studio swept it and killed the live candidate. Only a cgroup provably made by a dead process of this
    namespace goes: another namespace's, and an older name that records no namespace, stay."""
    from nodes.algorithms import code_cgroup

    monkeypatch.setattr(code_cgroup, "_swept", set())
    other_namespace = tmp_path / f"metagen-code-1-{_dead_pid()}-1-0a1b2c3d"  # inode 1: never our pid namespace
    unproven = tmp_path / f"metagen-code-{_dead_pid()}-0a1b2c3d"  # the old name: a pid, in some namespace
    for d in (other_namespace, unproven):
        d.mkdir()
    assert code_cgroup.sweep_stale(tmp_path) == 0
    assert other_namespace.exists() and unproven.exists()


def test_a_real_stale_cgroup_is_swept_when_the_next_one_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    from nodes.algorithms import code_cgroup

    monkeypatch.delenv(CGROUP_ENV, raising=False)
    first = RunCgroup.create(64 << 20, 8)
    if first is None:
        pytest.skip("no cgroup can be made here")
    parents = [d.parent for d in first.dirs]
    first.remove()
    stale = [p / _stale_name() for p in parents]
    for d in stale:
        d.mkdir()  # what a killed studio leaves: its cgroup folders, empty
    monkeypatch.setattr(code_cgroup, "_swept", set())
    second = RunCgroup.create(64 << 20, 8)
    assert second is not None
    try:
        assert not any(d.exists() for d in stale)
    finally:
        second.remove()
