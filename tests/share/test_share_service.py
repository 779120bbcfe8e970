"""Share mode through the service the UI calls (forced on, on localhost): names are not paths, model paths
come from a list, the python verifier is refused, budgets are capped server side, runs are queued."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.run.scheduler import Budget
from app.service.errors import UserError
from app.service.studio import StudioService
from app.share.policy import SharePolicy
from backends.fake import FakeBackend

SAMPLER_WF = {
    "version": 1, "name": "s",
    "inputs": {"question": {"type": "text", "default": "What is 2 + 2?"}},
    "nodes": [
        {"id": "think", "kind": "sampler", "params": {"n": 8, "prompt": "{question}"},
         "inputs": {"question": "inputs.question"}},
        {"id": "vote", "kind": "voter", "params": {"method": "majority"},
         "inputs": {"candidates": "think.candidates"}},
    ],
    "outputs": {"answer": "vote.answer"},
}


def _service(tmp_path: Path, provider: Any = None, **policy_kwargs: Any) -> StudioService:
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    (models / "allowed.gguf").write_bytes(b"GGUF")
    policy = SharePolicy.for_serving("127.0.0.1", force_share_mode=True, models_folder=models, **policy_kwargs)
    assert policy.share_mode
    backend = FakeBackend(reply_fn=lambda prompt, i: "Answer: 4")
    return StudioService(policy=policy, provider=provider or (lambda spec: backend), dry_run=True,
                         workflows_dir=tmp_path / "workflows", examples_dir=tmp_path / "no-examples",
                         models_dir=models, trace_db=tmp_path / "traces.db")


@pytest.mark.parametrize("name", ["../secret", "../../etc/passwd", "/etc/passwd", "sub/dir", "..", "~root"])
def test_workflow_names_that_are_paths_are_refused(tmp_path: Path, name: str) -> None:
    service = _service(tmp_path)
    (tmp_path / "secret.yaml").write_text("version: 1\nname: secret\nnodes: []\noutputs: {}\n")
    with pytest.raises(UserError, match=r"not paths|contains '\.\.'"):
        service.open_workflow(name)
    with pytest.raises(UserError):
        service.save_workflow(name, SAMPLER_WF)
    with pytest.raises(UserError):
        service.save_yaml_text(name, yaml.safe_dump(SAMPLER_WF))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models", "secret.yaml", "workflows"]
    assert list((tmp_path / "workflows").iterdir()) == []


def test_saving_by_name_stays_in_the_workflows_folder(tmp_path: Path) -> None:
    service = _service(tmp_path)
    service.save_workflow("visitor flow", SAMPLER_WF)
    assert (tmp_path / "workflows" / "visitor flow.yaml").is_file()
    assert service.open_workflow("visitor flow")["name"] == "visitor flow"


def _codes(service: StudioService, wf: dict[str, Any]) -> list[str]:
    return [i["code"] for i in service.from_editor(wf)["issues"]]


@pytest.mark.parametrize("path", ["/etc/passwd", "../models/allowed.gguf", "~/.ssh/id_rsa", "/tmp/other.gguf"])
def test_model_paths_outside_the_list_are_refused(tmp_path: Path, path: str) -> None:
    service = _service(tmp_path)
    wf = {**SAMPLER_WF, "models": {"main": {"source": "path", "path": path}}}
    assert "model_path_refused" in _codes(service, wf)
    with pytest.raises(UserError, match="not one of this app's models"):
        service.start_run(wf)


def test_a_model_from_the_list_is_accepted(tmp_path: Path) -> None:
    seen: list[Any] = []
    backend = FakeBackend(reply_fn=lambda prompt, i: "Answer: 4")
    service = _service(tmp_path, provider=lambda spec: seen.append(spec) or backend)
    wf = {**SAMPLER_WF, "models": {"main": {"source": "path", "path": "allowed.gguf"}}}
    assert "model_path_refused" not in _codes(service, wf)
    run = service.start_run(wf)
    assert service.wait_run(run["run_id"], timeout=30)["status"] == "succeeded"
    assert seen and seen[0].path == str((tmp_path / "models" / "allowed.gguf").resolve())


def _python_wf() -> dict[str, Any]:
    return {**SAMPLER_WF, "nodes": [
        SAMPLER_WF["nodes"][0],
        {"id": "check", "kind": "verifier", "params": {"method": "python", "code": "True"},
         "inputs": {"candidates": "think.candidates"}},
        {"id": "vote", "kind": "voter", "params": {"method": "majority"},
         "inputs": {"candidates": "check.candidates"}},
    ]}


def test_python_verifier_is_refused_in_share_mode(tmp_path: Path) -> None:
    service = _service(tmp_path)
    assert "python_disabled" in _codes(service, _python_wf())
    with pytest.raises(UserError, match="python verifier is disabled"):
        service.start_run(_python_wf())
    assert service.scheduler.allow_python is False  # and the nodes refuse it at run time too


def test_python_verifier_allowed_by_the_owner(tmp_path: Path) -> None:
    service = _service(tmp_path, allow_python=True)
    assert "python_disabled" not in _codes(service, _python_wf())
    assert service.scheduler.allow_python is True


def test_budgets_are_capped_server_side(tmp_path: Path) -> None:
    service = _service(tmp_path, max_lm_calls=3)
    run = service.start_run(SAMPLER_WF, budget=Budget(max_lm_calls=1000))  # asks for more than the cap
    final = service.wait_run(run["run_id"], timeout=30)
    assert final["status"] == "budget_exceeded", final
    assert "max_lm_calls=3" in (final.get("error") or "")


def test_concurrent_runs_are_limited_and_queued(tmp_path: Path) -> None:
    release = threading.Event()
    started = threading.Event()

    def slow_reply(prompt: Any, i: int) -> str:
        started.set()
        release.wait(20)
        return "Answer: 4"

    backend = FakeBackend(reply_fn=slow_reply)
    service = _service(tmp_path, provider=lambda spec: backend, max_concurrent_runs=1, max_queue=1)
    first = service.start_run(SAMPLER_WF)
    assert started.wait(10)
    second = service.start_run(SAMPLER_WF, seed=1)
    assert service.run_status(second["run_id"])["status"] == "queued"
    assert service.run_status(second["run_id"])["queue_position"] == 1
    with pytest.raises(UserError, match="already waiting"):
        service.start_run(SAMPLER_WF, seed=2)
    release.set()
    assert service.wait_run(first["run_id"], timeout=30)["status"] == "succeeded"
    assert service.wait_run(second["run_id"], timeout=30)["status"] == "succeeded"


def test_one_visitor_cannot_fill_the_queue(tmp_path: Path) -> None:
    """Class 7: a visitor may have SHARE_MAX_RUNS_PER_VISITOR unfinished runs; another visitor still gets in."""
    release = threading.Event()
    backend = FakeBackend(reply_fn=lambda prompt, i: "Answer: 4" if release.wait(20) else "late")
    service = _service(tmp_path, provider=lambda spec: backend, max_concurrent_runs=1, max_queue=8)
    limit = service.policy.max_runs_per_visitor
    assert limit == 2
    mine = [service.start_run(SAMPLER_WF, seed=i, visitor="alice") for i in range(limit)]
    with pytest.raises(UserError, match=r"you already have 2 run\(s\) going.*the limit is 2"):
        service.start_run(SAMPLER_WF, seed=9, visitor="alice")
    other = service.start_run(SAMPLER_WF, visitor="bob")
    assert other["status"] in ("queued", "running")
    release.set()
    for run in [*mine, other]:
        owner = "bob" if run is other else "alice"
        assert service.wait_run(run["run_id"], timeout=30, visitor=owner)["status"] == "succeeded"
    again = service.start_run(SAMPLER_WF, seed=10, visitor="alice")
    assert service.wait_run(again["run_id"], timeout=30, visitor="alice")["status"] == "succeeded"
