"""The catalog of models by role (generator, reasoning, PRM, reward model, draft), read from the packaged data file
`models_catalog.yaml`: each entry's repo and file, and the models entries and node params a workflow needs."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

CATALOG_FILE = Path(__file__).with_name("models_catalog.yaml")
MODELS_PLACEHOLDER = "{models}"


@functools.lru_cache(maxsize=1)
def load_catalog() -> dict[str, Any]:
    """The catalog as data: {"roles": {role: {"about", "entries": [...]}}}."""
    return yaml.safe_load(CATALOG_FILE.read_text(encoding="utf-8"))


def catalog_entries() -> list[dict[str, Any]]:
    """Every entry, flat, each with its `role` and `ref` (what `metagen models pull` takes)."""
    out = []
    for role, block in load_catalog()["roles"].items():
        for entry in block["entries"]:
            out.append({**entry, "role": role, "ref": entry["repo"], "pull": f"{entry['repo']} --file {entry['file']}"})
    return out


def _fill(value: Any, models_dir: Path) -> Any:
    if isinstance(value, str) and value.startswith(MODELS_PLACEHOLDER):
        return str(models_dir / value[len(MODELS_PLACEHOLDER):].lstrip("/"))
    if isinstance(value, dict):
        return {k: _fill(v, models_dir) for k, v in value.items()}
    return value


def entry_models(entry: dict[str, Any], models_dir: Path) -> dict[str, Any]:
    """The entry's `models:` block with the models folder filled in."""
    return _fill(entry["models"], Path(models_dir))


def example_workflow(entry: dict[str, Any], models_dir: Path) -> dict[str, Any]:
    """A smallest workflow using the entry in its role: a sampler (with the entry's params when it generates),
    then the entry's verifier when it scores; what the catalog test validates and docs show."""
    node = entry["node"]
    generates = node["kind"] == "sampler"
    sampler_params = dict(node["params"]) if generates else {"n": 4, "temperature": 0.7, "max_tokens": 256}
    nodes: list[dict[str, Any]] = [{
        "id": "sample", "kind": "sampler", "model": "main",
        "params": {"prompt": "{question}\nGive the final line 'Answer: <number>'.", **sampler_params},
        "inputs": {"question": "inputs.question"},
    }]
    outputs = {"answers": "sample.candidates"}
    if not generates:
        nodes.append({"id": "score", "kind": node["kind"], "model": "main", "params": dict(node["params"]),
                      "inputs": {"candidates": "sample.candidates", "question": "inputs.question"}})
        outputs = {"scores": "score.scores"}
    return {"version": 1, "name": "catalog-" + entry["role"], "models": entry_models(entry, models_dir),
            "inputs": {"question": {"type": "text", "default": "What is 3 + 4?"}}, "nodes": nodes,
            "outputs": outputs}
