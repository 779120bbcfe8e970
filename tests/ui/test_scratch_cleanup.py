"""Nothing left behind: scratch folders go on SIGTERM / SIGINT too, each app instance has its own Gradio cache
folder, folders of killed processes are removed by the next start, and a run id from an import is never a path."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.platform.scratch import ScratchFolder, remove_stale, scratch_file_name
from app.ui import traces_tab
from tests.serve.conftest import ROOT
from tests.ui.ui_process import start_ui, upload

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX signals")

WORKER = textwrap.dedent("""
    import sys, time
    from app.platform.scratch import ScratchFolder, install_signal_cleanup
    scratch = ScratchFolder("metagen-sigtest")
    path = scratch.write_text("report.html", "<html></html>")
    install_signal_cleanup()
    print(path, flush=True)
    while True:
        time.sleep(0.05)
""")


def _own_entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("metagen-"))


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, -signal.SIGINT)])
def test_a_stopping_signal_removes_the_scratch_folders(tmp_path: Path, signum: int, code: int) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", WORKER], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        report = Path(proc.stdout.readline().strip())
        assert report.is_file() and report.parent.parent == tmp_path
        assert report.parent.name.startswith(f"metagen-sigtest-{proc.pid}-")
        proc.send_signal(signum)
        assert proc.wait(timeout=30) == code
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _own_entries(tmp_path) == []


def test_folders_of_killed_processes_are_removed_by_the_next_start(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    dead = tmp_path / f"metagen-gradio-{gone.stdout.strip()}-abc"
    alive = tmp_path / f"metagen-gradio-{os.getppid()}-abc"
    mine = ScratchFolder("metagen-gradio", keep=None, parent=tmp_path)
    for folder in (dead, alive):
        (folder / "sub").mkdir(parents=True)
    assert mine.folder.is_dir()
    assert remove_stale("metagen-gradio", tmp_path) == [dead]
    assert not dead.exists() and alive.is_dir() and mine.folder.is_dir()
    mine.clear()


def test_an_imported_run_id_with_a_slash_still_gets_its_report(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    scratch = ScratchFolder("metagen-test-reports", keep=4, parent=tmp_path)
    monkeypatch.setattr(traces_tab, "REPORTS", scratch)
    monkeypatch.setattr(traces_tab.viz, "export_html", lambda record: "<html>report</html>")
    for run_id in ("a/b", "../../etc/passwd", "..", "x\\y", ""):
        path = Path(traces_tab._export_file({"run": {"id": run_id}}) or "")
        assert path.parent == scratch.folder and path.suffix == ".html"
    assert scratch_file_name("../..", ".html") == "file.html"
    scratch.clear()


@pytest.mark.timeout(300)
def test_two_instances_keep_their_own_gradio_files_and_sigterm_leaves_nothing(tmp_path: Path) -> None:
    """Two `metagen ui` on one machine: Gradio's copies of each go to a folder of its own; SIGTERM (how servers
    are stopped) removes every folder the app made in the temp directory."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    first, first_url = start_ui(tmp, tmp_path / "home1")
    second, second_url = start_ui(tmp, tmp_path / "home2")
    try:
        a, b = upload(first_url, "a.txt"), upload(second_url, "b.txt")
        folders = {a.relative_to(tmp).parts[0], b.relative_to(tmp).parts[0]}
        assert folders == {n for n in _own_entries(tmp) if n.startswith("metagen-gradio-")}
        assert len(folders) == 2, "the two instances share one Gradio folder"
        for proc in (first, second):
            proc.send_signal(signal.SIGTERM)
        for proc in (first, second):
            proc.wait(timeout=60)
    finally:
        for proc in (first, second):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert _own_entries(tmp) == []


@pytest.mark.parametrize(("body", "code"), [("pass", 0), ("tempfile.mkdtemp(prefix='metagen-leak-')", 1)])
def test_the_suite_fails_when_it_leaves_files_of_its_own_in_the_temp_dir(tmp_path: Path, body: str,
                                                                          code: int) -> None:
    """The session-end check of tests/conftest.py, on a session of one test (its own temp folder, then gone)."""
    system_tmp = tmp_path / "tmp"
    system_tmp.mkdir()
    (tmp_path / "test_one.py").write_text(f"import tempfile\n\n\ndef test_one():\n    {body}\n")
    env = {**os.environ, "TMPDIR": str(system_tmp), "PYTHONPATH": str(ROOT)}
    for key in ("METAGEN_TEST_TMPDIR", "METAGEN_HOME", "PYTEST_DEBUG_TEMPROOT", "PYTEST_ADDOPTS"):
        env.pop(key, None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_one.py")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == code, done.stdout + done.stderr
    assert ("metagen-leak-" in done.stdout) == bool(code)
    assert _own_entries(system_tmp) == []
