"""`metagen models pull | list | search | rm` against the fake Hub, and a workflow run on a pulled model with the
real engine (the bundled model's file served by the fake Hub)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fake_hub import FakeHub
from tests.hub.conftest import TINY_REPO

ROOT = Path(__file__).resolve().parents[2]


def metagen(*args: str, home: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "METAGEN_HOME": str(home), "METAGEN_MODELS": str(home / "models"), "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_pull_list_rm(fake_hub: FakeHub, tmp_path: Path) -> None:
    done = metagen("models", "pull", f"{TINY_REPO}:q8_0", home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "tiny-Q8_0.gguf: downloaded" in done.stdout and "B/s" in done.stderr  # tqdm: bytes, rate
    assert (tmp_path / "models" / "tiny-Q8_0.gguf").is_file()
    listed = json.loads(metagen("models", "list", "--json", home=tmp_path).stdout)
    assert listed["build"]["build"] in ("CPU", "CUDA", "Vulkan", "Metal") or "+" in listed["build"]["build"]
    tiny = next(m for m in listed["models"] if m["file"] == "tiny-Q8_0.gguf")
    assert tiny["rank_head"] is True and tiny["architecture"] == "bert"
    assert tiny["entry"] == {"source": "path", "path": str((tmp_path / "models" / "tiny-Q8_0.gguf").resolve()),
                             "pooling": "rank"}
    assert any(m["source"] == "bundled" for m in listed["models"])
    text = metagen("models", "list", home=tmp_path).stdout
    assert "llama.cpp build:" in text and "tiny-Q8_0.gguf" in text and "rank head" in text
    gone = metagen("models", "rm", "tiny-Q8_0.gguf", home=tmp_path)
    assert gone.returncode == 0 and not (tmp_path / "models" / "tiny-Q8_0.gguf").exists()
    assert metagen("models", "rm", "tiny-Q8_0.gguf", home=tmp_path).returncode == 2


def test_cli_errors_are_one_line(fake_hub: FakeHub, tmp_path: Path) -> None:
    done = metagen("models", "pull", f"{TINY_REPO}:Q2_K", home=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "its quants: Q4_K_M, Q8_0" in done.stderr
    done = metagen("models", "pull", "tester/missing", home=tmp_path)
    assert done.returncode == 2 and "no model repo" in done.stderr


def test_search(fake_hub: FakeHub, tmp_path: Path) -> None:
    done = metagen("models", "search", "tiny", home=tmp_path)
    assert done.returncode == 0 and TINY_REPO in done.stdout and "downloads" in done.stdout
    assert json.loads(metagen("models", "search", "nothing-like-it", "--json", home=tmp_path).stdout) == []


@pytest.mark.model
def test_run_a_workflow_on_a_pulled_model(fake_hub: FakeHub, tmp_path: Path) -> None:
    import metagen as mg
    from backends.llama.models.bundled import bundled_model_path
    from metagen._studio import default_studio

    fake_hub.add("tester/SmolLM2-GGUF", {"SmolLM2-135M-Instruct-Q4_1.gguf": Path(bundled_model_path())})
    path = mg.pull("tester/SmolLM2-GGUF", models_dir=tmp_path / "models", progress=False)
    assert path == tmp_path / "models" / "SmolLM2-135M-Instruct-Q4_1.gguf"
    wf = mg.load(f"""
version: 1
name: pulled
models:
  main: {{source: path, path: '{path}'}}
inputs:
  question: {{type: text, default: 'What is 3 + 4?'}}
nodes:
- id: answer
  kind: generator
  model: main
  params: {{prompt: '{{question}}', temperature: 0.0, max_tokens: 8}}
  inputs: {{question: inputs.question}}
outputs: {{answer: answer.text}}
""")
    try:
        result = wf.run({"question": "What is 3 + 4?"})
    finally:
        default_studio().close()  # the process's shared studio keeps its models loaded until closed
    assert result.status == "succeeded" and result.outputs["answer"].strip()
    assert result.stats.tokens > 0
