"""Every catalog entry's models entries and node params pass the real workflow validator (nothing is pulled)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.service.model_roles import catalog_entries, example_workflow, load_catalog
from app.workflow.problems import errors
from app.workflow.spec import workflow_from_dict
from app.workflow.validation import validate
from nodes.registry import default_registry

ENTRIES = catalog_entries()


def test_catalog_has_every_role_the_issue_names() -> None:
    roles = load_catalog()["roles"]
    assert set(roles) == {"generator", "reasoning", "prm", "reward_model", "draft"}
    names = " ".join(e["name"] for e in ENTRIES)
    for want in ("Qwen3-0.6B", "Qwen3-1.7B", "Qwen3-4B", "Llama-3.2-1B-Instruct", "Qwen2.5-Math-1.5B-Instruct",
                 "Math-Shepherd", "Llama3.1-8B-PRM", "bge-reranker-v2-m3", "DeepSeek-R1-Distill"):
        assert want in names
    for role, block in roles.items():
        fits = {e["fits"] for e in block["entries"]}
        assert "laptop" in fits, role
    assert any(e["fits"] == "gpu24" for e in ENTRIES)
    prm = {e["name"]: e["node"]["params"] for e in ENTRIES if e["role"] == "prm"}
    shepherd = next(p for n, p in prm.items() if "Math-Shepherd" in n)
    assert (shepherd["step_tag"], shepherd["good_token"], shepherd["bad_token"]) == (" ки", "+", "-")
    assert next(p for n, p in prm.items() if "RLHFlow" in n)["prm_format"] == "chat"
    rm = next(e for e in ENTRIES if e["role"] == "reward_model")
    assert rm["models"]["rm"]["pooling"] == "rank" and "Qwen3" in rm["notes"]


@pytest.mark.parametrize("entry", ENTRIES, ids=[f"{e['role']}:{e['name']}" for e in ENTRIES])
def test_entry_validates(entry: dict, tmp_path: Path) -> None:
    assert entry["file"].endswith(".gguf") and "/" in entry["repo"] and entry["size_gb"] > 0
    wf = workflow_from_dict(example_workflow(entry, tmp_path))
    problems = errors(validate(wf, default_registry()))
    assert problems == [], [p.format("catalog") for p in problems]
    paths = [m.get("path") for m in wf.models.values() if m.get("source") == "path"]
    assert str(tmp_path / entry["file"]) in paths


def test_a_broken_entry_is_caught(tmp_path: Path) -> None:
    entry = {**ENTRIES[0], "node": {"kind": "sampler", "params": {"think": "sideways"}}}
    assert errors(validate(workflow_from_dict(example_workflow(entry, tmp_path)), default_registry()))
