"""Share mode's size limits and the owner's remote models: run inputs, uploads, the YAML parse budget and queue,
the model pool's memory budget, visitors' upload folders pruned, model paths hidden, and `--remote-model`."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from app.cli.main import build_parser
from app.cli.share_flags import policy_from_args
from app.service.errors import UserError
from app.service.studio import StudioService
from app.service.visitor_uploads import VISITORS_FOLDER, prune_visitor_folders
from app.share.policy import (
    SHARE_MAX_INPUT_CHARS,
    RemoteChoice,
    SharePolicy,
    check_workflow_allowed,
    parse_remote_model,
    resolve_model_choices,
    share_memory_budget,
)
from app.workflow import spec as spec_module
from app.workflow.problems import WorkflowError
from app.workflow.spec import MAX_YAML_NODES, PARSE_SLOTS, load_workflow_text
from backends.fake import FakeBackend

WF = """version: 1
name: limits
inputs:
  question: {type: text}
nodes:
- id: answer
  kind: generator
  params: {prompt: '{question}', max_tokens: 8}
  inputs: {question: inputs.question}
outputs: {answer: answer.text}
"""


def _policy(tmp_path: Path, **kwargs: Any) -> SharePolicy:
    return SharePolicy.for_serving("127.0.0.1", force_share_mode=True, models_folder=tmp_path, **kwargs)


def _service(tmp_path: Path, policy: SharePolicy) -> StudioService:
    backend = FakeBackend(replies=["2"])
    return StudioService(policy=policy, provider=lambda spec: backend, dry_run=True, workflows_dir=tmp_path / "wf",
                         examples_dir=tmp_path / "none", models_dir=tmp_path, trace_db=tmp_path / "t.db")


def _args(*argv: str) -> Any:
    return build_parser().parse_args(["ui", *argv])


# ---------------------------------------------------------------------- run inputs and uploads


def test_a_run_input_over_the_limit_is_refused_before_it_is_stored(tmp_path: Path) -> None:
    service = _service(tmp_path, _policy(tmp_path, max_input_chars=1000))
    wf = load_workflow_text(WF).to_dict()
    with pytest.raises(UserError, match="more than 1,000 characters"):
        service.start_run(wf, {"question": "x" * 1001}, visitor="alice")
    assert service.active_runs(visitor="alice") == []
    ok = service.start_run(wf, {"question": "x" * 900}, visitor="alice")
    assert service.wait_run(ok["run_id"], timeout=20, visitor="alice")["status"] == "succeeded"
    service.close()


def test_share_mode_limits_have_defaults_and_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAGEN_MODELS", str(tmp_path))
    policy = policy_from_args(_args("--share-mode"), "127.0.0.1")
    assert policy.max_input_chars == SHARE_MAX_INPUT_CHARS and policy.max_upload_bytes == 20 * 1024 * 1024
    custom = policy_from_args(_args("--share-mode", "--max-input-chars", "500", "--max-upload-mb", "2"), "127.0.0.1")
    assert custom.max_input_chars == 500 and custom.max_upload_bytes == 2 * 1024 * 1024
    local = policy_from_args(_args(), "127.0.0.1")
    assert local.max_input_chars is None and local.max_upload_bytes is None
    with pytest.raises(ValueError, match="--max-upload-mb must be a positive number"):
        policy_from_args(_args("--share-mode", "--max-upload-mb", "0"), "127.0.0.1")


@pytest.mark.timeout(300)
def test_gradios_upload_route_refuses_a_file_over_the_limit(tmp_path: Path) -> None:
    import signal
    import urllib.error

    from tests.ui.ui_process import start_ui, upload

    (tmp_path / "tmp").mkdir()
    proc, url = start_ui(tmp_path / "tmp", tmp_path / "home", "--share-mode", "--max-upload-mb", "0.01")
    try:
        assert upload(url, "small.txt", b"x" * 1000).is_file()
        with pytest.raises(urllib.error.HTTPError) as refused:
            upload(url, "big.txt", b"x" * 200_000)
        assert refused.value.code in (400, 413)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def test_gradio_is_told_the_upload_limit(tmp_path: Path) -> None:
    from app.ui.app import launch_kwargs

    shared = _service(tmp_path, _policy(tmp_path, max_upload_mb=3))
    assert launch_kwargs(shared)["max_file_size"] == 3 * 1024 * 1024
    assert launch_kwargs(_service(tmp_path, SharePolicy.local()))["max_file_size"] is None


# ---------------------------------------------------------------------- YAML parse budget and queue


def test_a_large_flat_yaml_is_refused_by_the_parse_budget() -> None:
    text = WF + "extra:\n" + "".join(f"  k{i}: v{i}\n" for i in range(MAX_YAML_NODES))
    with pytest.raises(WorkflowError) as err:
        load_workflow_text(text)
    assert err.value.issues[0].code == "too_large" and "values" in err.value.issues[0].message


def test_parses_wait_their_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    at_once, peak, lock = [0], [0], threading.Lock()
    real = spec_module._parse_bounded

    def slow(text: str) -> Any:
        with lock:
            at_once[0] += 1
            peak[0] = max(peak[0], at_once[0])
        time.sleep(0.2)
        with lock:
            at_once[0] -= 1
        return real(text)

    monkeypatch.setattr(spec_module, "_parse_bounded", slow)
    threads = [threading.Thread(target=load_workflow_text, args=(WF,)) for _ in range(PARSE_SLOTS + 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert peak[0] == PARSE_SLOTS


# ---------------------------------------------------------------------- memory, upload folders, model paths


def test_share_mode_memory_budget_is_far_below_half_the_ram(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from backends.pool import POOL_MEMORY_ENV, default_memory_budget

    monkeypatch.delenv(POOL_MEMORY_ENV, raising=False)
    half = default_memory_budget()
    assert share_memory_budget() <= max(1024**3, half // 4)
    assert _policy(tmp_path).memory_budget_bytes == share_memory_budget()
    assert SharePolicy.local().memory_budget_bytes is None  # the owner's default stays half the RAM
    monkeypatch.setenv(POOL_MEMORY_ENV, "3G")
    assert share_memory_budget() == 3 * 1024**3  # the owner's explicit budget wins


def test_visitor_upload_folders_are_pruned_by_age_and_total_size(tmp_path: Path) -> None:
    root = tmp_path / "uploads" / VISITORS_FOLDER
    now = time.time()
    ages = {"old": 3 * 86400, "recent": 3600, "newest": 60, "mine": 2 * 86400}
    for name, age in ages.items():
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "d.jsonl").write_bytes(b"x" * 1000)
        os.utime(folder / "d.jsonl", (now - age, now - age))
        os.utime(folder, (now - age, now - age))
    removed = prune_visitor_folders(tmp_path / "uploads", keep=root / "mine", max_total_bytes=2500, now=now)
    assert {p.name for p in removed} == {"old", "recent"}  # too old, then the least recently used over the bound
    assert sorted(p.name for p in root.iterdir()) == ["mine", "newest"]


def test_visitors_see_model_file_names_not_the_owners_folders(tmp_path: Path) -> None:
    service = _service(tmp_path, _policy(tmp_path))
    (tmp_path / "tiny.gguf").write_bytes(b"GGUF" + b"\0" * 64)
    for entry in service.models.entries():
        assert "/" not in entry["path"] and "/" not in entry["key"], entry


# ---------------------------------------------------------------------- the owner's remote models


def test_remote_model_flag_is_parsed_and_checked() -> None:
    choice = parse_remote_model("demo=http://10.0.0.5:8080/v1/#qwen2.5-7b#DEMO_KEY")
    assert choice == RemoteChoice("demo", "http://10.0.0.5:8080/v1", "qwen2.5-7b", "DEMO_KEY")
    assert parse_remote_model("x=https://api.example.com/v1#m").api_key_env is None
    for bad in ("demo", "demo=http://h/v1", "demo=ftp://h#m", "demo=http://u@h/v1#m", "demo=http://h#m#sk-123-key",
                "de mo=http://h#m"):
        with pytest.raises(ValueError, match="--remote-model"):
            parse_remote_model(bad)


def test_visitors_reach_only_the_owners_remote_models_with_the_owners_key(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAGEN_MODELS", str(tmp_path))
    policy = policy_from_args(_args("--share-mode", "--remote-model", "demo=http://10.0.0.5:8080/v1#qwen#DEMO_KEY"),
                              "127.0.0.1")
    assert "remote model(s) demo" in policy.describe()

    def models(entry: str) -> Any:
        return load_workflow_text(WF.replace("nodes:\n", f"models:\n  main: {entry}\nnodes:\n", 1))

    by_name = models("{source: openai, base_url: 'http://10.0.0.5:8080/v1', model: demo}")
    by_model = models("{source: openai, base_url: 'http://10.0.0.5:8080/v1/', model: qwen}")
    for wf in (by_name, by_model):
        assert check_workflow_allowed(wf, policy) == []
        assert resolve_model_choices(wf, policy).models["main"] == {
            "source": "openai", "base_url": "http://10.0.0.5:8080/v1", "model": "qwen", "api_key_env": "DEMO_KEY"}
    refused = {
        "{source: openai, base_url: 'http://10.0.0.6:8080/v1', model: demo}": "model_source_refused",
        "{source: openai, base_url: 'http://10.0.0.5:8080/v1', model: other}": "model_source_refused",
        "{source: openai, base_url: 'http://10.0.0.5:8080/v1', model: demo, api_key_env: AWS_SECRET}":
            "model_option_refused",
        "{source: openai, base_url: 'http://10.0.0.5:8080/v1', model: demo, timeout_s: 3000}": "model_option_refused",
    }
    for entry, code in refused.items():
        assert [i.code for i in check_workflow_allowed(models(entry), policy)] == [code], entry
    plain = policy_from_args(_args("--share-mode"), "127.0.0.1")
    assert [i.code for i in check_workflow_allowed(by_name, plain)] == ["model_source_refused"]
