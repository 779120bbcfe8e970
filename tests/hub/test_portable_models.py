"""Portable model references: `{path: NAME.gguf}` in the models folder, `{source: hub, repo, quant|file}` pulled on
first use (the CLI's --pull, or a refusal that names the pull command), and share mode never pulling."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.workflow.model_refs import HubNeed, local_hub_file, record_pull
from app.workflow.model_specs import model_spec_from_dict, model_specs
from app.workflow.problems import WorkflowError
from app.workflow.spec import load_workflow_text
from tests.fake_hub import FakeHub
from tests.hub.conftest import TINY_REPO

ROOT = Path(__file__).resolve().parents[2]
SMOL_REPO = "tester/SmolLM2-GGUF"
SMOL_FILE = "SmolLM2-135M-Instruct-Q4_1.gguf"

HUB_WORKFLOW = f"""version: 1
name: portable
models:
  main: {{source: hub, repo: {SMOL_REPO}, quant: Q4_1, n_ctx: 512}}
inputs:
  question: {{type: text, default: 'What is 3 + 4?'}}
nodes:
- id: answer
  kind: generator
  model: main
  params: {{prompt: '{{question}}', temperature: 0.0, max_tokens: 6}}
  inputs: {{question: inputs.question}}
outputs: {{answer: answer.text}}
"""


def _validate(yaml_text: str) -> list[str]:
    from app.workflow.validation import validate
    from nodes.registry import default_registry

    return [i.code + ": " + i.message for i in validate(load_workflow_text(yaml_text), default_registry())]


@pytest.mark.parametrize(("entry", "needle"), [
    ("{source: hub}", "no repo"),
    ("{source: hub, repo: 'not a repo'}", "is not a Hub repository"),
    ("{source: hub, repo: a/b, quant: Q4_K_M, file: x.gguf}", "both quant and file"),
    ("{source: hub, repo: a/b, file: ../../etc/x.gguf}", "is not a GGUF file"),
    ("{source: hub, repo: a/b, path: /x.gguf}", "a path"),
    ("{source: bundled, repo: a/b}", "only a Hub model takes"),
])
def test_bad_hub_entries_are_bad_model(entry: str, needle: str) -> None:
    problems = _validate(HUB_WORKFLOW.replace(f"{{source: hub, repo: {SMOL_REPO}, quant: Q4_1, n_ctx: 512}}", entry))
    assert any(p.startswith("bad_model") and needle in p for p in problems), problems


def test_a_good_hub_entry_validates() -> None:
    assert _validate(HUB_WORKFLOW) == []


def test_a_bare_file_name_means_the_models_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAGEN_MODELS", str(tmp_path / "models"))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "Mine-Q4_K_M.gguf").write_bytes(b"GGUF")
    spec = model_spec_from_dict({"source": "path", "path": "Mine-Q4_K_M.gguf"})
    assert spec.path == str(tmp_path / "models" / "Mine-Q4_K_M.gguf")
    absolute = model_spec_from_dict({"path": "/somewhere/else.gguf"})
    assert absolute.path == "/somewhere/else.gguf"


def test_a_missing_hub_model_is_model_not_pulled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAGEN_MODELS", str(tmp_path / "models"))
    with pytest.raises(WorkflowError) as err:
        model_specs(load_workflow_text(HUB_WORKFLOW))
    issue = err.value.issues[0]
    assert issue.code == "model_not_pulled"
    assert f"metagen models pull {SMOL_REPO}:Q4_1" in issue.message and issue.line == 4


def test_found_by_ledger_and_by_quant(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    need = HubNeed("main", "unsloth/Qwen3-0.6B-GGUF", "Q4_K_M")
    assert local_hub_file(need, folder) is None
    (folder / "Qwen3-0.6B-Q4_K_M.gguf").write_bytes(b"GGUF")  # pulled before the ledger existed
    assert local_hub_file(need, folder) == folder / "Qwen3-0.6B-Q4_K_M.gguf"
    (folder / "renamed.gguf").write_bytes(b"GGUF")
    record_pull(folder, need, "renamed.gguf")
    assert local_hub_file(need, folder) == folder / "renamed.gguf"
    assert local_hub_file(HubNeed("main", "a/b", file="renamed.gguf"), folder) == folder / "renamed.gguf"


@pytest.mark.parametrize("entry", ["../outside.gguf", "{outside}", "sub/../../outside.gguf", "..", "."])
def test_an_edited_ledger_never_names_a_file_outside_the_models_folder(tmp_path: Path, entry: str) -> None:
    """The ledger is read back as record_pull writes it: a base name. An entry with a folder, an absolute path
    or `..` used to resolve outside the models folder (the loader then echoed another file's first bytes)."""
    import json

    folder = tmp_path / "models"
    folder.mkdir()
    outside = tmp_path / "outside.gguf"
    outside.write_bytes(b"secret")
    need = HubNeed("main", "unsloth/Qwen3-0.6B-GGUF", "Q4_K_M")
    (folder / ".pulls.json").write_text(json.dumps({need.ledger_key: entry.format(outside=outside)}))
    assert local_hub_file(need, folder) is None
    (folder / "outside.gguf").write_bytes(b"GGUF")  # the same base name inside the folder is what it names
    found = local_hub_file(need, folder)
    assert found == (folder / "outside.gguf" if entry not in ("..", ".") else None)


def test_share_mode_never_pulls() -> None:
    from app.share.policy import SharePolicy, check_workflow_allowed

    issues = check_workflow_allowed(load_workflow_text(HUB_WORKFLOW), SharePolicy(share_mode=True))
    assert any(i.code == "model_path_refused" and "never pulls" in i.message for i in issues)


def _metagen(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "METAGEN_HOME": str(home), "METAGEN_MODELS": str(home / "models"),
           "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)


@pytest.mark.model
def test_cli_pulls_on_first_use_with_pull(fake_hub: FakeHub, tmp_path: Path) -> None:
    from backends.llama.models.bundled import bundled_model_path

    fake_hub.add(SMOL_REPO, {SMOL_FILE: Path(bundled_model_path())})
    wf = tmp_path / "portable.yaml"
    wf.write_text(HUB_WORKFLOW)
    refused = _metagen("run", str(wf), "--no-trace", "-q", home=tmp_path)
    assert refused.returncode == 1 and f"metagen models pull {SMOL_REPO}:Q4_1" in refused.stderr
    assert not (tmp_path / "models" / SMOL_FILE).exists()
    ran = _metagen("run", str(wf), "--no-trace", "-q", "--pull", home=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "models" / SMOL_FILE).is_file() and "answer:" in ran.stdout
    again = _metagen("run", str(wf), "--no-trace", "-q", home=tmp_path)  # here now: no question, no pull
    assert again.returncode == 0, again.stderr
    assert len(fake_hub.ranges(SMOL_FILE)) == 1


def test_tiny_repo_default_quant_ledger(fake_hub: FakeHub, tmp_path: Path) -> None:
    from app.service.model_pull import pull_needed_models

    models = {"main": {"source": "hub", "repo": TINY_REPO, "quant": "q8_0"}}
    pulled = pull_needed_models(models, models_dir=tmp_path / "m")
    assert [p.path.name for p in pulled] == ["tiny-Q8_0.gguf"]
    assert pull_needed_models(models, models_dir=tmp_path / "m") == []
