"""`metagen models check` and the Models tab's remote check, against llama-cpp-python's own server (a real process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.service.errors import UserError
from app.service.studio import StudioService
from app.share.policy import SharePolicy
from app.ui.remote_check import remote_report_markdown
from tests.remote.conftest import API_KEY, KEY_ENV, ROOT, LlamaServer, free_port


def metagen(*args: str, env_key: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(KEY_ENV, None)
    if env_key:
        env[KEY_ENV] = API_KEY
    return subprocess.run([sys.executable, "-m", "app.cli", "models", "check", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=180)


def test_bad_specs_are_invalid_input(tmp_path: Path) -> None:
    out = metagen("not-a-url")
    assert out.returncode == 2 and "neither a server URL" in out.stderr
    local = tmp_path / "local.yaml"
    local.write_text("version: 1\nname: local\nmodels:\n  main: {source: bundled}\nnodes:\n- id: g\n  kind: generator\n"
                     "  params: {prompt: hi}\noutputs: {text: g.text}\n", encoding="utf-8")
    out = metagen(str(local))
    assert out.returncode == 2 and "no `source: openai` model" in out.stderr
    keyed = tmp_path / "keyed.yaml"
    keyed.write_text(local.read_text(encoding="utf-8").replace(
        "{source: bundled}", "{source: openai, base_url: 'http://127.0.0.1:9/v1', model: m, api_key: sk-1}"),
        encoding="utf-8")
    out = metagen(str(keyed))
    assert out.returncode == 2 and "api_key_env" in out.stderr


def test_an_unreachable_server_fails() -> None:
    out = metagen(f"http://127.0.0.1:{free_port()}/v1")
    assert out.returncode == 1 and "is the server running?" in out.stderr


@pytest.mark.model
def test_check_prints_models_and_capabilities(llama_server: LlamaServer, tmp_path: Path) -> None:
    out = metagen(llama_server.base_url, "--model", "smol", "--api-key-env", KEY_ENV)
    assert out.returncode == 0, out.stderr
    assert "llama-cpp-python" in out.stdout and "models: smol" in out.stdout
    assert "forced decoding" in out.stdout and "n concurrent requests" in out.stdout
    assert API_KEY not in out.stdout + out.stderr
    refused = metagen(llama_server.base_url, "--api-key-env", KEY_ENV, env_key=False)
    assert refused.returncode == 1 and f"${KEY_ENV}, which is not set" in refused.stderr

    wf = tmp_path / "remote.yaml"
    wf.write_text(f"version: 1\nname: remote\nmodels:\n  main: {json.dumps(llama_server.entry())}\nnodes:\n"
                  "- id: g\n  kind: generator\n  params: {prompt: hi}\noutputs: {text: g.text}\n", encoding="utf-8")
    out = metagen(str(wf), "--json")
    assert out.returncode == 0, out.stderr
    (found,) = json.loads(out.stdout)
    assert found["target"] == "remote.yaml: model 'main'"
    assert (found["kind"], found["model"], found["score"], found["n"]) == ("llama_cpp_python", "smol", "forced", False)


@pytest.mark.model
def test_the_models_tab_check(llama_server: LlamaServer, tmp_path: Path) -> None:
    service = StudioService(workflows_dir=tmp_path / "wf", models_dir=tmp_path / "models", dry_run=True)
    report = service.models.check_remote(llama_server.base_url, "", KEY_ENV)
    assert report["model"] == "smol" and report["entry"]["api_key_env"] == KEY_ENV
    text = remote_report_markdown(report)
    assert "| grammar (GBNF) | yes (`grammar` field) |" in text and "api_key_env: " + KEY_ENV in text
    assert API_KEY not in text
    with pytest.raises(UserError, match="base URL"):
        service.models.check_remote("localhost:8000", None, None)
    with pytest.raises(UserError, match="not an environment variable name"):
        service.models.check_remote(llama_server.base_url, None, "sk-123 456")
    shared = StudioService(workflows_dir=tmp_path / "wf2", models_dir=tmp_path / "models", dry_run=True,
                           policy=SharePolicy.for_serving(share=True, model_choices=[]))
    assert shared.share_mode
    with pytest.raises(UserError, match="disabled on a shared app"):
        shared.models.check_remote(llama_server.base_url, None, None)
