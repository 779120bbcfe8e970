"""Share mode keeps visitors apart through the editor page's server functions: runs, saves, python confirmation."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gradio as gr
import pytest
import yaml
from gradio import utils as gr_utils

from app.service.studio import StudioService
from app.share.policy import SharePolicy
from app.ui import editor_page
from app.ui.endpoints import endpoint
from backends.fake import FakeBackend

WF: dict[str, Any] = {
    "version": 1, "name": "s",
    "inputs": {"question": {"type": "text", "default": "What is 2 + 2?"}},
    "nodes": [
        {"id": "think", "kind": "sampler", "params": {"n": 2, "prompt": "{question}"},
         "inputs": {"question": "inputs.question"}},
        {"id": "vote", "kind": "voter", "params": {"method": "majority"},
         "inputs": {"candidates": "think.candidates"}},
    ],
    "outputs": {"answer": "vote.answer"},
}
PY_WF: dict[str, Any] = {
    **WF, "nodes": [*WF["nodes"], {"id": "check", "kind": "verifier",
                                   "params": {"method": "python", "code": "answer == '4'"},
                                   "inputs": {"candidates": "think.candidates"}}],
}


def _service(tmp_path: Path, release: threading.Event | None = None, *, share: bool = True,
             **policy_kwargs: Any) -> StudioService:
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    if share:
        policy = SharePolicy.for_serving("127.0.0.1", force_share_mode=True, models_folder=models, **policy_kwargs)
    else:
        policy = SharePolicy.local()

    def reply(_prompt: str, _i: int) -> str:
        if release is not None:
            release.wait(10)
        return "Answer: 4"

    backend = FakeBackend(reply_fn=reply)
    return StudioService(policy=policy, provider=lambda spec: backend, dry_run=True,
                         workflows_dir=tmp_path / "workflows", examples_dir=tmp_path / "no-examples",
                         models_dir=models, trace_db=tmp_path / "traces.db")


def _fns(service: StudioService) -> dict[str, Callable[..., Any]]:
    return {fn.__name__: endpoint(fn, service) for fn in editor_page.SERVER_FUNCTIONS}


def _as(visitor: str) -> Any:
    return SimpleNamespace(session_hash=visitor)


def test_server_functions_ask_gradio_for_the_request(tmp_path: Path) -> None:
    call = _fns(_service(tmp_path))["mg_status"]
    assert gr_utils.get_type_hints(call).get("request") is gr.Request


def test_visitors_see_only_their_own_runs(tmp_path: Path) -> None:
    release = threading.Event()
    service = _service(tmp_path, release)
    fns = _fns(service)
    try:
        started = fns["mg_run"]({"workflow": WF, "inputs": {}, "seed": 1}, request=_as("alice"))
        run_id = started["run_id"]
        assert started.get("error") is None
        assert [r["run_id"] for r in fns["mg_init"]({}, request=_as("alice"))["active_runs"]] == [run_id]
        assert fns["mg_init"]({}, request=_as("bob"))["active_runs"] == []
        for name, extra in (("mg_status", {}), ("mg_cancel", {}), ("mg_node_outputs", {"node_id": "think"})):
            answer = fns[name]({"run_id": run_id, **extra}, request=_as("bob"))
            assert "no live run" in answer.get("error", ""), name
        assert fns["mg_cancel"]({"run_id": run_id}, request=None).get("error")  # no session: not the owner
    finally:
        release.set()
    final = service.wait_run(run_id, 10, visitor="alice")
    assert final["status"] == "succeeded"  # bob's cancel did nothing
    assert fns["mg_node_outputs"]({"run_id": run_id, "node_id": "think"}, request=_as("alice"))["views"]
    assert service.owns_run(run_id, "alice") and not service.owns_run(run_id, "bob")
    assert service.visitor_run_ids("bob") == set() and service.visitor_run_ids("alice") == {run_id}


def test_the_owner_sees_every_run_in_local_mode(tmp_path: Path) -> None:
    service = _service(tmp_path, share=False)
    fns = _fns(service)
    run_id = fns["mg_run"]({"workflow": WF}, request=_as("tab-1"))["run_id"]
    service.wait_run(run_id, 10)
    assert fns["mg_status"]({"run_id": run_id}, request=_as("tab-2"))["status"] == "succeeded"
    assert service.visitor_run_ids("tab-2") is None


def test_share_mode_save_gets_the_run_checks(tmp_path: Path) -> None:
    fns = _fns(_service(tmp_path))
    bad = {**PY_WF, "models": {"main": {"source": "path", "path": "/etc/passwd"}}}
    answer = fns["mg_save"]({"name": "evil", "workflow": bad}, request=_as("alice"))
    assert "not saved" in answer["error"] and "python" in answer["error"]
    assert not (tmp_path / "workflows" / "evil.yaml").exists()


def test_visitors_cannot_overwrite_workflows_they_did_not_save(tmp_path: Path) -> None:
    service = _service(tmp_path)
    owners = tmp_path / "workflows" / "owners.yaml"
    owners.write_text(yaml.safe_dump(WF))
    before = owners.read_text()
    fns = _fns(service)
    answer = fns["mg_save"]({"name": "owners", "workflow": {**WF, "name": "mine"}}, request=_as("alice"))
    assert "not yours" in answer["error"] and owners.read_text() == before
    assert fns["mg_save"]({"name": "alice flow", "workflow": WF}, request=_as("alice"))["name"] == "alice flow"
    assert not fns["mg_save"]({"name": "alice flow", "workflow": WF}, request=_as("alice")).get("error")
    assert "not yours" in fns["mg_save"]({"name": "alice flow", "workflow": WF}, request=_as("bob"))["error"]


def test_the_owner_still_overwrites_in_local_mode(tmp_path: Path) -> None:
    service = _service(tmp_path, share=False)
    (tmp_path / "workflows" / "owners.yaml").write_text(yaml.safe_dump(WF))
    assert _fns(service)["mg_save"]({"name": "owners", "workflow": WF}, request=None)["name"] == "owners"


@pytest.mark.parametrize("origin", ["link", "upload"])
def test_python_from_a_link_or_upload_needs_confirmation(tmp_path: Path, origin: str) -> None:
    service = _service(tmp_path, share=False)
    fns = _fns(service)
    answer = fns["mg_run"]({"workflow": PY_WF, "origin": origin}, request=_as("me"))
    assert answer == {"needs_confirmation": True, "code": [{"node_id": "check", "code": "answer == '4'"}]}
    assert service.active_runs() == [] and not service._runs  # nothing ran
    confirmed = fns["mg_run"]({"workflow": PY_WF, "origin": origin, "confirmed_python": True}, request=_as("me"))
    assert service.wait_run(confirmed["run_id"], 10)["status"] == "succeeded"


def test_no_confirmation_for_own_files_or_workflows_without_python(tmp_path: Path) -> None:
    fns = _fns(_service(tmp_path, share=False))
    assert "run_id" in fns["mg_run"]({"workflow": PY_WF, "origin": "file"}, request=None)
    assert "run_id" in fns["mg_run"]({"workflow": WF, "origin": "link"}, request=None)


def test_traces_and_run_links_show_only_the_visitors_runs(tmp_path: Path) -> None:
    from app.ui.share_links import open_run_from_query
    from app.ui.traces_tab import run_rows, visitor_record

    service = _service(tmp_path)
    fns = _fns(service)
    alice_run = fns["mg_run"]({"workflow": WF}, request=_as("alice"))["run_id"]
    bob_run = fns["mg_run"]({"workflow": {**WF, "name": "bobs"}}, request=_as("bob"))["run_id"]
    service.wait_run(alice_run, 10, visitor="alice")
    service.wait_run(bob_run, 10, visitor="bob")
    rows, names = run_rows(service, "(all)", "(all)", "alice")
    assert [r[0] for r in rows] == [alice_run] and names == ["s"]
    assert visitor_record(service, alice_run, "alice")["run"]["workflow_yaml"]
    with pytest.raises(LookupError, match="no run"):
        visitor_record(service, alice_run, "bob")
    assert "no run" in open_run_from_query(service, {"run": alice_run}, "bob")[2]
    assert open_run_from_query(service, {"run": alice_run}, "alice")[2] == ""
    (tmp_path / "local").mkdir()
    local = _service(tmp_path / "local", share=False)
    assert [r[0] for r in run_rows(local, "(all)", "(all)", None)[0]] == []  # its own (empty) store: all rows


def test_no_confirmation_where_python_is_refused_anyway(tmp_path: Path) -> None:
    answer = _fns(_service(tmp_path))["mg_run"]({"workflow": PY_WF, "origin": "link"}, request=_as("alice"))
    assert "python verifier is disabled" in answer["error"]


def test_server_functions_find_the_session_in_gradios_raw_request(tmp_path: Path) -> None:
    """gr.HTML server functions get the raw /component_server request; its JSON body has the session hash."""
    release = threading.Event()
    service = _service(tmp_path, release)
    fns = _fns(service)
    raw = SimpleNamespace(_json={"session_hash": "alice", "fn_name": "mg_run", "data": {}})
    try:
        run_id = fns["mg_run"]({"workflow": WF}, request=raw)["run_id"]
        assert service.owns_run(run_id, "alice")
        assert fns["mg_init"]({}, request=SimpleNamespace(_json={"session_hash": "bob"}))["active_runs"] == []
        assert fns["mg_init"]({}, request=None)["active_runs"] == []  # no session: sees nothing
        assert [r["run_id"] for r in fns["mg_init"]({}, request=_as("alice"))["active_runs"]] == [run_id]
    finally:
        release.set()


REMOTE_MODELS = {"main": {"source": "openai", "base_url": "https://elsewhere.example/v1", "model": "m",
                          "api_key_env": "AWS_SECRET_ACCESS_KEY"}}


@pytest.mark.parametrize("origin", ["link", "upload"])
def test_a_remote_server_from_a_link_or_upload_needs_confirmation(tmp_path: Path, origin: str) -> None:
    """A shared workflow could send prompts, and a secret from this machine's environment as its API key, to any
    server: the first run shows where and asks."""
    fns = _fns(_service(tmp_path, share=False))
    answer = fns["mg_run"]({"workflow": {**WF, "models": REMOTE_MODELS}, "origin": origin}, request=_as("me"))
    assert answer == {"needs_confirmation": True, "code": [], "remote": [
        {"alias": "main", "base_url": "https://elsewhere.example/v1", "model": "m",
         "api_key_env": "AWS_SECRET_ACCESS_KEY"}]}


def test_share_mode_refuses_remote_models(tmp_path: Path) -> None:
    """A visitor's base_url would make the app's server call any address it names (SSRF)."""
    service = _service(tmp_path)
    fns = _fns(service)
    for origin in ("", "link"):
        answer = fns["mg_run"]({"workflow": {**WF, "models": REMOTE_MODELS}, "origin": origin}, request=_as("bob"))
        assert "runs on another server" in answer["error"] and "run_id" not in answer
    saved = fns["mg_save"]({"name": "remote", "workflow": {**WF, "models": REMOTE_MODELS}}, request=_as("bob"))
    assert "runs on another server" in saved["error"]
    assert not service._runs
