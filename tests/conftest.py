"""Suite-wide test settings: user data in a temp folder, no network-bound telemetry."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import worker_leaks

SESSION_TMP_ENV = "METAGEN_TEST_TMPDIR"
"""The temp folder of this test session: every temp file of the session and of the processes it starts goes
there (TMPDIR), so the end-of-session check sees this session's leftovers only, not those of another session
running beside it, and the system temp directory is left as it was found."""
SESSION_TMP_PREFIX = "metagen-test-tmp"
WORKER_TMP_PREFIX = "xd"
"""An xdist worker's temp folder, inside the controller's: short, since Chromium's socket path there must fit in
108 bytes."""
OWN_TEMP_PREFIX = "metagen-"
"""What the app and its tests name their temp files and folders; any left at the end fails the suite."""


def _is_xdist_worker(config: object) -> bool:
    """A pytest-xdist worker (`make test` runs two): its config carries the controller's `workerinput`. A pytest
    started by a test inherits PYTEST_XDIST_WORKER from its environment, so the config, not the variable, decides."""
    return hasattr(config, "workerinput")


def _use_session_temp_dir(xdist_worker: bool) -> None:
    """The session's own temp folder (TMPDIR). An xdist worker makes its own inside the controller's, so the two
    workers never share a data folder, and whatever a worker leaves behind is still found by the controller."""
    from app.platform.scratch import remove_stale

    inherited = os.environ.get(SESSION_TMP_ENV)
    if inherited and not xdist_worker:  # a pytest started by a test: its parent's folder is checked
        return
    system_tmp = tempfile.gettempdir()
    if not xdist_worker:
        remove_stale(SESSION_TMP_PREFIX, Path(system_tmp))  # a session killed outright (pytest-timeout's thread method)
    parent = inherited if xdist_worker and inherited else system_tmp
    root = tempfile.mkdtemp(prefix=_root_prefix(xdist_worker), dir=parent)
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", system_tmp)  # tmp_path stays pytest's own, where it was
    os.environ[SESSION_TMP_ENV] = os.environ["TMPDIR"] = tempfile.tempdir = root


def _root_prefix(xdist_worker: bool) -> str:
    return f"{WORKER_TMP_PREFIX if xdist_worker else SESSION_TMP_PREFIX}-{os.getpid()}-"


def _pin_to_a_share_of_the_cores(workerinput: dict[str, Any]) -> None:
    """Each xdist worker runs on its own share of the CPUs (and so do the engine workers, servers and browsers its
    tests start: affinity is inherited), so llama.cpp, which sizes its thread pool by the affinity
    (devices.default_threads), never runs more threads than cores: oversubscribed, its spinning barriers wait out
    whole scheduler slices. On 2 cores with `-n 2`, each worker is a 1-core machine."""
    if not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    count, index = int(workerinput["workercount"]), int(str(workerinput["workerid"]).removeprefix("gw"))
    share = len(cpus) // count
    if count < 2 or share < 1:
        return
    os.sched_setaffinity(0, cpus[index * share:(index + 1) * share])


def pytest_configure(config: object) -> None:
    xdist_worker = _is_xdist_worker(config)
    if xdist_worker:
        _pin_to_a_share_of_the_cores(config.workerinput)  # type: ignore[attr-defined]
    _use_session_temp_dir(xdist_worker)
    worker_leaks.mark_this_process()
    # Never read or write the developer's real data folder, trace database or settings (nor the other xdist
    # worker's: each worker has a data folder of its own).
    if "METAGEN_HOME" not in os.environ or xdist_worker:
        os.environ["METAGEN_HOME"] = tempfile.mkdtemp(prefix="metagen-test-home-")
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("DO_NOT_TRACK", "1")


def engine_header_lines() -> list[str]:
    """The engine build this run tests (llama_print_system_info, read in a child process: a broken build may crash
    on import), so CI's log says which CPU features and GPU backend the results come from."""
    from app.service.doctor_checks import engine_system_info
    from backends.llama.build_facts import read_build_record

    info, error = engine_system_info(timeout_s=120)
    record = read_build_record()
    built = (f"build {record.get('key')} (amx={record.get('amx')}, portable={record.get('portable')}, "
             f"cflags={record.get('cflags') or '(none)'})" if record else "not built by `make setup`")
    return [f"llama.cpp: {built}", *(f"llama_print_system_info: {line}" for line in (info.splitlines() or [error]))]


def pytest_report_header(config: pytest.Config) -> list[str]:
    return engine_header_lines()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under -q (`make test`) pytest prints no header: the engine's lines are written all the same."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and session.config.get_verbosity() < 0 and not _is_xdist_worker(session.config):
        for line in engine_header_lines():
            reporter.write_line(line)


def session_leftovers(root: Path, home: Path | None) -> list[str]:
    """The app's or the tests' own files and folders (`metagen-*`) left in the session's temp folder, besides the
    session's data folder."""
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return []
    left: list[str] = []
    for entry in entries:
        if entry.name.startswith(f"{WORKER_TMP_PREFIX}-") and entry.is_dir():  # a worker's, kept for its leftovers
            left += [f"{entry.name}/{name}" for name in session_leftovers(entry, None)]
        elif entry.name.startswith(OWN_TEMP_PREFIX) and (home is None or entry != home):
            left.append(entry.name)
    return left


SCRATCH_NAME = re.compile(r"^(metagen-[a-z]+(?:-[a-z]+)*)-(\d+)-")
"""An app scratch folder: `<prefix>-<pid>-<random>` (app.platform.scratch)."""


def _sweep_scratch_of_dead_processes(root: Path) -> None:
    """Do what the app's next start does (`scratch.remove_stale`): remove the scratch folders of its processes that
    a test killed outright (no handler could run). In one process, a later studio of the session swept them; an
    xdist worker may start none after the kill. Folders of live processes stay, and are reported."""
    from app.platform.scratch import remove_stale

    try:
        prefixes = {m.group(1) for e in root.iterdir() if (m := SCRATCH_NAME.match(e.name))}
    except OSError:
        return
    for prefix in prefixes:
        remove_stale(prefix, root)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the suite when it left files of its own in the temp directory; then remove the session's temp folder.
    This process's scratch folders are removed first, as at any exit of the app (atexit would run after this)."""
    import shutil
    import sys

    root_text = os.environ.get(SESSION_TMP_ENV)
    if not root_text or not Path(root_text).name.startswith(_root_prefix(_is_xdist_worker(session.config))):
        return  # not this process's session folder (a pytest started by a test)
    scratch = sys.modules.get("app.platform.scratch")
    if scratch is not None:
        scratch.remove_all()
    root = Path(root_text)
    home = Path(os.environ["METAGEN_HOME"]) if os.environ.get("METAGEN_HOME") else None
    _sweep_scratch_of_dead_processes(root)
    left = session_leftovers(root, home if home is not None and home.parent == root else None)
    if left and _is_xdist_worker(session.config):  # the controller reports them: its check finds this folder
        if home is not None and home.parent == root:
            shutil.rmtree(home, ignore_errors=True)
    else:
        shutil.rmtree(root, ignore_errors=True)
    _report_worker_leaks(session)
    if not left:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    line = f"the tests left {len(left)} temp folder(s)/file(s) of their own behind: {', '.join(left[:10])}"
    if reporter is not None:
        reporter.write_line(f"ERROR: {line}", red=True)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# ------------------------------------------------------------------ engine workers that outlive their tests

_module_workers: dict[str, set[int]] = {}
"""Per test module being run: the engine workers alive before its first test (anything else is the module's)."""
_leaks: list[str] = []


def _module_of(item: pytest.Item | None) -> str | None:
    return item.nodeid.split("::", 1)[0] if item is not None else None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    module = _module_of(item)
    if module is not None and module not in _module_workers:  # before any of the module's fixtures
        _module_workers.clear()
        _module_workers[module] = set(worker_leaks.session_workers())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """After the module's last test (its module fixtures torn down too): an engine worker it started and left
    running errors that test, and is killed so that leaks do not pile up over the run."""
    result = yield
    module = _module_of(item)
    if module is None or _module_of(nextitem) == module or module not in _module_workers:
        return result
    leaked = worker_leaks.leaked_since(_module_workers.pop(module))
    if leaked:
        worker_leaks.end_leaked(leaked)
        listing = "; ".join(f"pid {pid} (parent {who})" for pid, who in sorted(leaked.items()))
        _leaks.append(f"{module}: {len(leaked)} ({listing})")
        pytest.fail(f"{module} left {len(leaked)} engine worker(s) running after its tests: {listing}. Close what "
                    "the tests open (a ModelPool, a Studio, a server), or share one for the session with "
                    "tests.worker_leaks.share_for_session", pytrace=False)
    return result


@pytest.fixture
def llama_provide() -> Iterator[Any]:
    """The real provider (llama.cpp pool, rank models, remote servers) for one test; its engine workers end with it."""
    from app.run.providers import llama_provider

    provide = llama_provider()
    yield provide
    provide.close()


def _report_worker_leaks(session: pytest.Session) -> None:
    """The modules whose engine workers outlived them, once more at the end (each errored its last test)."""
    if not _leaks:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"ERROR: engine workers outlived their test modules: {' | '.join(_leaks)}", red=True)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


CHROMIUM_PATH = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-gpu"]


@pytest.fixture(scope="session")
def chromium_browser() -> Iterator[Any]:
    """One headless Chromium for the whole session (Playwright allows one sync driver per thread).
    Debian's /usr/bin/chromium when installed, else the browser of `playwright install chromium`."""
    from playwright.sync_api import sync_playwright

    executable = CHROMIUM_PATH if Path(CHROMIUM_PATH).exists() else None
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
