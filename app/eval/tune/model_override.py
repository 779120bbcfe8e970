"""`metagen tune --model`: a model given as text (a file, a Hub reference, a remote server or replicas) made a
workflow's `models:` entry, and put in place of every generating model of a candidate."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from app.eval.tune.errors import TuneError

SCORING_KEYS = (("api", ("rerank", "pooling")), ("pooling", ("rank",)))
"""Entries that score rather than generate (rank / reward models) keep their model."""


def model_entry(text: str) -> dict[str, Any]:
    """The `models:` entry for `--model TEXT`: bundled | fake | a .gguf file | http(s)://HOST/v1[,URL...][#MODEL]
    (a remote OpenAI-compatible server, several URLs a replica list) | OWNER/REPO[:QUANT] (a Hub model)."""
    clean = str(text or "").strip()
    if not clean:
        raise TuneError("--model is empty: give a .gguf file, a Hub reference OWNER/REPO[:QUANT] or a server URL")
    if clean in ("bundled", "fake"):
        return {"source": clean}
    if clean.startswith(("http://", "https://")):
        urls, _, name = clean.partition("#")
        servers = [u.strip() for u in urls.split(",") if u.strip()]
        entry: dict[str, Any] = {"source": "openai", "base_url": servers[0] if len(servers) == 1 else servers}
        if name:
            entry["model"] = name
        return entry
    path = Path(clean).expanduser()
    if path.suffix.lower() == ".gguf" or path.is_file():
        if not path.is_file():
            raise TuneError(f"--model {clean}: no such file; give an existing .gguf file (or `metagen models list`)")
        return {"source": "path", "path": str(path.resolve())}
    repo, _, quant = clean.partition(":")
    if repo.count("/") == 1:
        return {"source": "hub", "repo": repo, **({"quant": quant} if quant else {})}
    raise TuneError(f"--model {clean!r}: not a .gguf file, a Hub reference OWNER/REPO[:QUANT] or an http(s):// URL")


def _scores(entry: Any) -> bool:
    return isinstance(entry, dict) and any(entry.get(key) in values for key, values in SCORING_KEYS)


def replace_models(data: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """A copy of a workflow's dict with every generating model entry replaced by `entry`."""
    out = copy.deepcopy(data)
    models = out.get("models") or {}
    out["models"] = {alias: (spec if _scores(spec) else copy.deepcopy(entry)) for alias, spec in models.items()}
    return out


def model_label(entry: dict[str, Any] | None) -> str:
    """A short name of the model for file names and reports: bundled, a file's stem, a repo's name, a URL's host."""
    if not entry:
        return "bundled"
    source = entry.get("source")
    if source == "path":
        return Path(str(entry.get("path"))).stem
    if source == "hub":
        return str(entry.get("repo", "hub")).split("/")[-1]
    if source == "openai":
        return str(entry.get("model") or "remote").split("/")[-1]
    return str(source or "model")
