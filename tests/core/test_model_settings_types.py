"""Model settings are checked once against their schema: string numbers are refused, share caps see numbers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.service.errors import UserError
from app.service.studio import StudioService
from app.share.policy import SharePolicy, check_workflow_allowed
from app.workflow.model_specs import model_spec_from_dict
from app.workflow.spec import load_workflow_text
from app.workflow.validation import validate
from backends.fake import FakeBackend
from nodes.registry import default_registry

ROOT = Path(__file__).resolve().parents[2]

WF_TEXT = """version: 1
name: typed
models:
  main:
    source: fake
    n_ctx: {n_ctx}
    threads: {threads}
inputs:
  question: {{type: text, default: hi}}
nodes:
  - id: gen
    kind: generator
    params: {{prompt: "{{question}}"}}
    inputs: {{question: inputs.question}}
outputs:
  answer: gen.text
"""


def _wf_data(n_ctx: Any, threads: Any = 2) -> dict[str, Any]:
    return {
        "version": 1, "name": "typed",
        "models": {"main": {"source": "fake", "n_ctx": n_ctx, "threads": threads}},
        "inputs": {"question": {"type": "text", "default": "hi"}},
        "nodes": [{"id": "gen", "kind": "generator", "params": {"prompt": "{question}"},
                   "inputs": {"question": "inputs.question"}}],
        "outputs": {"answer": "gen.text"},
    }


def test_validate_cli_refuses_string_n_ctx_with_line_and_code(tmp_path: Path) -> None:
    path = tmp_path / "typed.yaml"
    path.write_text(WF_TEXT.format(n_ctx='"16384"', threads='"6"'))
    env = {**os.environ, "METAGEN_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "app.cli", "validate", str(path)], capture_output=True,
                         text=True, env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if "bad_model" in line]
    assert any(f"{path}:6:" in line and "n_ctx" in line and "remove the quotes" in line for line in lines), lines
    assert any(f"{path}:7:" in line and "threads" in line for line in lines), lines


def test_validate_cli_accepts_integer_settings(tmp_path: Path) -> None:
    path = tmp_path / "typed.yaml"
    path.write_text(WF_TEXT.format(n_ctx=2048, threads=2))
    env = {**os.environ, "METAGEN_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "app.cli", "validate", str(path)], capture_output=True,
                         text=True, env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize(("key", "value"), [("n_ctx", 64), ("n_ctx", 200_000), ("threads", 0), ("threads", True),
                                            ("n_gpu_layers", -2), ("flash_attn", "yes"), ("device", "tpu"),
                                            ("source", "cloud"), ("options", [1]), ("path", 5)])
def test_each_field_is_checked_against_the_schema(key: str, value: Any) -> None:
    wf = load_workflow_text(WF_TEXT.format(n_ctx=2048, threads=2))
    wf.models["main"][key] = value
    found = [i for i in validate(wf, default_registry()) if i.code == "bad_model"]
    assert found and key in found[0].message and found[0].hint
    with pytest.raises(ValueError):
        model_spec_from_dict(wf.models["main"])


@pytest.mark.parametrize("n_ctx", [16384, "16384"])
def test_share_caps_refuse_n_ctx_as_int_or_string(n_ctx: Any) -> None:
    policy = SharePolicy.for_serving("0.0.0.0", model_choices=[])
    assert policy.share_mode and policy.max_n_ctx is not None and policy.max_n_ctx < 16384
    wf = load_workflow_text(WF_TEXT.format(n_ctx=f'"{n_ctx}"' if isinstance(n_ctx, str) else n_ctx,
                                            threads='"6"' if isinstance(n_ctx, str) else 6))
    codes = [(i.code, i.message) for i in check_workflow_allowed(wf, policy)]
    assert any(code == "model_option_refused" and "n_ctx=16384" in msg for code, msg in codes), codes
    assert any(code == "model_option_refused" and "6 threads" in msg for code, msg in codes), codes


@pytest.mark.parametrize("n_ctx", [16384, "16384"])
def test_share_service_start_run_refuses_n_ctx_above_cap(tmp_path: Path, n_ctx: Any) -> None:
    policy = SharePolicy.for_serving("0.0.0.0", model_choices=[])
    backend = FakeBackend(reply_fn=lambda prompt, i: "ok")
    service = StudioService(policy=policy, provider=lambda spec: backend, dry_run=True,
                            workflows_dir=tmp_path / "workflows", examples_dir=tmp_path / "no-examples",
                            models_dir=tmp_path / "models", trace_db=tmp_path / "traces.db")
    with pytest.raises(UserError, match="n_ctx"):
        service.start_run(_wf_data(n_ctx))
