"""Hostile candidates against the confined runner: nothing escapes, every run ends, good code still scores."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from nodes.algorithms import code_exec
from nodes.algorithms.code_exec import MAX_PROCESSES, ExecLimits, isolation
from nodes.algorithms.code_tests import run_code_tests, run_many

LIMITS = ExecLimits(timeout_s=3, memory_mb=256, output_bytes=1 << 20)
MODES = [pytest.param(True, id="isolated"), pytest.param(False, id="limits-only")]


def _needs(isolate: bool) -> None:
    if isolate and isolation() != "bwrap":
        pytest.skip("bubblewrap does not work here")
    if not isolate and os.geteuid() != 0 and os.uname().sysname != "Linux":
        pytest.skip("process bound checked on Linux")


def _run(code: str, tests: str, isolate: bool):
    started = time.monotonic()
    report = run_code_tests(code, tests=tests, limits=LIMITS, isolate=isolate)
    assert time.monotonic() - started < 60, "a guard against a hang, not a timing assertion"
    return report


@pytest.fixture
def used_uids(monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """The throw-away uids this test's runs took (another test running beside it, under pytest-xdist, takes others:
    its sandbox is not this test's survivor)."""
    taken: set[int] = set()
    pick = code_exec._pick_uid

    def recording_pick() -> int | None:
        uid = pick()
        if uid is not None:
            taken.add(uid)
        return uid

    monkeypatch.setattr(code_exec, "_pick_uid", recording_pick)
    return taken


def _no_survivors(uids: set[int]) -> None:
    """No live process of a throw-away uid this test used (a SIGKILLed one may take a moment to go: poll briefly)."""
    assert uids, "the runs took no throw-away uid: the check would prove nothing"
    for _ in range(50):
        out = subprocess.run(["ps", "-eo", "uid=,stat="], capture_output=True, text=True).stdout
        alive = [ln for ln in out.splitlines() if ln.split() and int(ln.split()[0]) in uids
                 and not ln.split()[1].startswith("Z")]
        if not alive:
            return
        time.sleep(0.1)
    raise AssertionError(f"sandbox processes survived: {alive}")


@pytest.mark.parametrize("isolate", MODES)
def test_endless_loop_ends_at_the_limit(isolate: bool) -> None:
    _needs(isolate)
    report = _run("def f():\n    while True: pass\n", "assert f() == 1", isolate)
    assert report.score == 0 and ("time" in report.reason or "CPU" in report.reason)


@pytest.mark.parametrize("isolate", MODES)
def test_fork_bomb_is_bounded(isolate: bool, used_uids: set[int]) -> None:
    _needs(isolate)
    if os.geteuid() != 0:
        pytest.skip("the process bound is a throw-away uid's RLIMIT_NPROC, taken only as root")
    # first the bound itself, with a loop that stops by itself: it must stop short of 100 processes
    counted = ("import os, time\nn = 0\nfor i in range(100):\n    try:\n        pid = os.fork()\n"
               "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(2); os._exit(0)\n"
               "    n += 1\ndef forks(): return n\n")
    report = _run(counted, "assert forks() == 100", isolate)
    assert report.tests and report.tests[0]["output"] is not None
    assert int(report.tests[0]["output"]) < MAX_PROCESSES
    bomb = ("import os\ndef f():\n    while True:\n        try:\n            os.fork()\n"
            "        except OSError:\n            pass\n")
    report = _run(bomb, "assert f() == 1", isolate)
    assert report.score == 0
    _no_survivors(used_uids)


@pytest.mark.parametrize("isolate", MODES)
def test_huge_allocation_fails(isolate: bool) -> None:
    _needs(isolate)
    report = _run("def f():\n    return len(bytearray(8 * 1024 ** 3))\n", "assert f() > 0", isolate)
    assert report.score == 0 and "MemoryError" in report.reason


@pytest.mark.parametrize("isolate", MODES)
def test_printing_a_gigabyte_is_capped(isolate: bool) -> None:
    _needs(isolate)
    code = "import os\ndef f():\n    for _ in range(1024):\n        os.write(1, b'x' * (1 << 20))\n    return 1\n"
    report = _run(code, "assert f() == 1", isolate)
    assert report.score == 0 and len(report.stdout) <= LIMITS.output_bytes


def test_isolated_writes_stay_in_the_sandbox(tmp_path: Path) -> None:
    _needs(True)
    mark = f"metagen-escape-{uuid.uuid4().hex}"
    home = Path.home() / mark
    code = (f"import os\ndef f():\n    for p in ('/tmp/{mark}', os.path.expanduser('~/{mark}'), '{home}'):\n"
            "        try:\n            open(p, 'w').write('x')\n        except OSError:\n            pass\n"
            "    return 1\n")
    report = _run(code, "assert f() == 1", True)
    assert report.score == 1
    assert not Path(f"/tmp/{mark}").exists() and not home.exists()


def test_isolated_no_network_no_ssh_no_survivor(used_uids: set[int]) -> None:
    _needs(True)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    code = (f"import os, socket, subprocess\ndef net():\n    socket.create_connection(('127.0.0.1', {port}), 1)\n"
            "    return 'connected'\n"
            "def ssh():\n    return os.listdir(os.path.expanduser('~root/.ssh'))\n"
            "def spawn():\n    subprocess.Popen(['/bin/sh', '-c', 'sleep 300'], start_new_session=True)\n"
            "    return 1\n")
    tests = "assert net() == 'connected'\nassert ssh() == []\nassert spawn() == 1"
    try:
        report = _run(code, tests, True)
    finally:
        server.close()
    results = {t["index"]: t for t in report.tests}
    assert len(results) == 3, report.reason
    assert not results[0]["passed"] and "Error" in results[0]["error"]  # no route, no loopback peer
    assert not results[1]["passed"]
    assert results[2]["passed"]  # it may start one, but it does not outlive the run
    _no_survivors(used_uids)


def test_good_code_still_scores_beside_hostile_code() -> None:
    good = "def add(a, b):\n    return a + b\n"
    texts = [good, "def add(a, b):\n    while True: pass\n",
             "def add(a, b):\n    return len(bytearray(8 << 30))\n", good]
    reports = run_many(texts, tests="assert add(1, 2) == 3\nassert add(2, 2) == 4", limits=LIMITS)
    assert [r.score for r in reports] == [1.0, 0.0, 0.0, 1.0]
