"""Share-mode policy: names are not paths, model paths from a list, python refused, budgets capped."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.run.scheduler import Budget
from app.share.policy import (
    SHARE_MAX_CHILD_RUNS,
    SharePolicy,
    check_workflow_allowed,
    is_loopback_host,
    load_auth_file,
    parse_auth,
    resolve_model_choices,
)
from app.share.run_gate import QueueFullError, RunGate
from app.workflow.files import list_workflow_names, safe_workflow_name, workflow_path
from app.workflow.spec import NodeSpec, Workflow

BAD_NAMES = [
    "../secret", "..", "../../etc/passwd", "/etc/passwd", "a/b", "a\\b", "~/x", "C:evil", ".hidden",
    "name\x00", "nul", "x" * 101, "", "   ", "trailing.", "new\nline", "a..b", "con.yaml",
]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_workflow_names_are_refused_with_a_reason(name: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError) as info:
        workflow_path(tmp_path, name)
    assert str(info.value)  # a message the UI can show
    assert "Traceback" not in str(info.value)


@pytest.mark.parametrize(("name", "stem"), [("best_of_n", "best_of_n"), ("My flow-2", "My flow-2"),
                                            ("self_consistency.yaml", "self_consistency"), ("v1.2", "v1.2")])
def test_good_names_map_inside_the_folder(name: str, stem: str, tmp_path: Path) -> None:
    path = workflow_path(tmp_path, name)
    assert path == tmp_path.resolve() / f"{stem}.yaml"
    assert safe_workflow_name(name) == stem


def test_path_message_says_names_are_not_paths() -> None:
    with pytest.raises(ValueError, match="names are not paths"):
        safe_workflow_name("../../etc/passwd")


def test_list_workflow_names_skips_odd_files(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text("x")
    (tmp_path / ".hidden.yaml").write_text("x")
    (tmp_path / "notes.txt").write_text("x")
    assert list_workflow_names(tmp_path) == ["good"]


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                                ("127.0.0.2", True), ("0.0.0.0", False), ("192.168.1.5", False),
                                                ("example.org", False), ("[::1]", True)])
def test_loopback_detection(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


def test_share_mode_turns_on_when_reachable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("METAGEN_SHARE_MODE", raising=False)
    assert not SharePolicy.for_serving("127.0.0.1", share=False).share_mode
    assert SharePolicy.for_serving("127.0.0.1", share=True, models_folder=tmp_path).share_mode
    assert SharePolicy.for_serving("0.0.0.0", share=False, models_folder=tmp_path).share_mode
    monkeypatch.setenv("METAGEN_SHARE_MODE", "1")
    forced = SharePolicy.for_serving("127.0.0.1", share=False, models_folder=tmp_path)
    assert forced.share_mode and not forced.allow_python
    assert SharePolicy.for_serving("127.0.0.1", allow_python=True, models_folder=tmp_path).allow_python


def test_local_policy_keeps_full_access() -> None:
    local = SharePolicy.local()
    assert not local.share_mode and local.allow_python
    assert local.cap_budget(Budget()) == Budget()


def test_budgets_are_capped_server_side(tmp_path: Path) -> None:
    policy = SharePolicy.for_serving("127.0.0.1", share=True, models_folder=tmp_path, max_lm_calls=10,
                                     max_tokens=1000, max_seconds=30)
    cap = SHARE_MAX_CHILD_RUNS
    assert policy.cap_budget(Budget()) == Budget(10, 1000, 30, cap)
    assert policy.cap_budget(Budget(max_lm_calls=10_000, max_tokens=5, max_seconds=None)) == Budget(10, 5, 30, cap)
    assert policy.cap_budget(None) == Budget(10, 1000, 30, cap)
    assert policy.cap_budget(Budget(max_child_runs=3)).max_child_runs == 3


def _wf(models: dict | None = None, params: dict | None = None, kind: str = "verifier") -> Workflow:
    return Workflow(name="t", models=models or {}, nodes=[NodeSpec(id="check", kind=kind, params=params or {})])


@pytest.mark.parametrize(("kind", "params"), [
    ("verifier", {"method": "python", "code": "score = 1"}),
    ("verifier", {"method": "combine", "parts": [{"method": "python", "code": "1"}]}),
    ("verifier", {"methods": ["regex", "python"]}),
    ("search", {"scorer": "python", "code": "1"}),
    ("refiner", {"check": "Python", "code": "1"}),
])
def test_python_verifier_refused_unless_allowed(kind: str, params: dict, tmp_path: Path) -> None:
    wf = _wf(params=params, kind=kind)
    shared = SharePolicy.for_serving("0.0.0.0", models_folder=tmp_path)
    assert [i.code for i in check_workflow_allowed(wf, shared)] == ["python_disabled"]
    allowed = SharePolicy.for_serving("0.0.0.0", allow_python=True, models_folder=tmp_path)
    assert check_workflow_allowed(wf, allowed) == []
    assert check_workflow_allowed(wf, SharePolicy.local()) == []


def test_other_verifiers_pass(tmp_path: Path) -> None:
    wf = _wf(params={"method": "regex", "pattern": "python", "prompt": "python"})
    assert check_workflow_allowed(wf, SharePolicy.for_serving("0.0.0.0", models_folder=tmp_path)) == []


def test_model_paths_only_from_the_list(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    (models / "tiny.gguf").write_bytes(b"GGUF")
    (models / "readme.txt").write_text("x")
    policy = SharePolicy.for_serving("0.0.0.0", models_folder=models)
    assert [Path(c).name for c in policy.model_choices] == ["tiny.gguf"]
    ok_full = _wf(models={"main": {"path": str(models / "tiny.gguf")}})
    ok_name = _wf(models={"main": {"source": "path", "path": "tiny.gguf"}})
    bundled = _wf(models={"main": {"source": "bundled", "n_ctx": 2048}})
    for wf in (ok_full, ok_name, bundled):
        assert check_workflow_allowed(wf, policy) == []
    resolved = resolve_model_choices(ok_name, policy)
    assert resolved.models["main"]["path"] == str((models / "tiny.gguf").resolve())
    for bad in ("/etc/passwd", "../models/tiny.gguf", str(tmp_path / "other.gguf"), "~/tiny.gguf",
                str(models / ".." / "models" / "x.gguf")):
        issues = check_workflow_allowed(_wf(models={"main": {"path": bad}}), policy)
        assert [i.code for i in issues] == ["model_path_refused"], bad
    # the owner locally may use any path
    assert check_workflow_allowed(_wf(models={"main": {"path": "/x/y.gguf"}}), SharePolicy.local()) == []


def test_model_options_and_huge_contexts_refused(tmp_path: Path) -> None:
    policy = SharePolicy.for_serving("0.0.0.0", models_folder=tmp_path)
    wf = _wf(models={"main": {"source": "bundled", "options": {"lora_path": "/etc/x"}, "n_ctx": 10**6,
                              "threads": 64}})
    codes = [i.code for i in check_workflow_allowed(wf, policy)]
    assert codes == ["model_option_refused"] * 3


def test_auth_parsing(tmp_path: Path) -> None:
    assert parse_auth("ada:pa:ss") == ("ada", "pa:ss")
    for bad in ("ada", ":x", "ada:"):
        with pytest.raises(ValueError, match="USER:PASSWORD"):
            parse_auth(bad)
    auth_file = tmp_path / "auth.txt"
    auth_file.write_text("# owners\nada:one\n\nbob:two\n")
    assert load_auth_file(auth_file) == [("ada", "one"), ("bob", "two")]
    auth_file.write_text("ada:one\nbroken\n")
    with pytest.raises(ValueError, match=r"auth.txt:2"):
        load_auth_file(auth_file)
    with pytest.raises(ValueError, match="cannot read"):
        load_auth_file(tmp_path / "missing.txt")
    policy = SharePolicy.for_serving("127.0.0.1", share=True, auth=[("ada", "one")], models_folder=tmp_path)
    assert policy.gradio_auth() == [("ada", "one")]
    assert "one" not in repr(policy)


def test_run_gate_limits_and_queues() -> None:
    gate = RunGate(max_concurrent=1, max_queue=1)
    entered = threading.Event()
    release = threading.Event()
    order: list[str] = []

    def first() -> None:
        with gate.slot():
            order.append("first")
            entered.set()
            release.wait(5)

    def second() -> None:
        with gate.slot() as position:
            order.append(f"second@{position}")

    t1 = threading.Thread(target=first)
    t1.start()
    assert entered.wait(5)
    t2 = threading.Thread(target=second)
    t2.start()
    for _ in range(100):
        if gate.waiting == 1:
            break
        threading.Event().wait(0.02)
    assert gate.waiting == 1
    with pytest.raises(QueueFullError, match="busy"), gate.slot():
        pass
    release.set()
    t1.join(5)
    t2.join(5)
    assert order == ["first", "second@1"]
    assert gate.running == 0


def test_a_reserved_place_counts_before_its_thread_comes_to_the_gate() -> None:
    """A run accepted by start_run whose thread has not reached the gate yet still holds its queue place: the
    share load test once saw 10 waiting against a bound of 9 when admissions counted only what was in the gate."""
    gate = RunGate(max_concurrent=1, max_queue=2)
    positions: list[int] = []

    def reserved_run() -> None:
        with gate.slot(reserved=True) as position:
            positions.append(position)

    with gate.slot():
        gate.reserve()
        gate.reserve()
        assert (gate.waiting, gate.pending) == (0, 2)
        with pytest.raises(QueueFullError, match="already waiting"):
            gate.reserve()
        with pytest.raises(QueueFullError, match="busy"), gate.slot():  # a /v1 request without a reservation
            pass
        gate.cancel_reservation()  # one that never came: its place is free again
        gate.reserve()
        runs = [threading.Thread(target=reserved_run) for _ in range(2)]
        for run in runs:
            run.start()
        for _ in range(100):
            if gate.waiting == 2:
                break
            threading.Event().wait(0.02)
        assert (gate.waiting, gate.pending) == (2, 2)  # reservations became waiting places, none counted twice
    for run in runs:
        run.join(5)
    assert sorted(positions) == [1, 2] and (gate.running, gate.pending) == (0, 0)
