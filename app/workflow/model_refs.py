"""Portable model references: a models-folder file by its name, a Hub model by repo and quant, found or missing."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

HUB_FIELDS = ("repo", "quant", "file")
"""Keys that only a `source: hub` entry takes."""
PULL_LEDGER = ".pulls.json"
"""In the models folder: which file each pulled Hub reference (`repo:QUANT` or `repo/file`) became."""
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
_QUANT = re.compile(r"[A-Za-z0-9_]{1,24}")


class ModelNotPulledError(ValueError):
    """A `source: hub` model that is not in the models folder yet (pull it first, or run with --pull)."""

    def __init__(self, need: HubNeed) -> None:
        super().__init__(need.message())
        self.need = need


@dataclass(frozen=True)
class HubNeed:
    """One Hub model a workflow needs: its reference as `metagen models pull` takes it, and the file asked for."""

    alias: str
    repo: str
    quant: str | None = None
    file: str | None = None

    @property
    def ref(self) -> str:
        return f"{self.repo}:{self.quant}" if self.quant else self.repo

    @property
    def ledger_key(self) -> str:
        return f"{self.repo}/{self.file}" if self.file else f"{self.repo}:{(self.quant or '').upper()}"

    def label(self) -> str:
        """What the user is told the workflow needs: the file when named, else the repo and quant."""
        return Path(self.file).name if self.file else self.ref

    def pull_command(self) -> str:
        return f"metagen models pull {self.ref}" + (f" --file {self.file}" if self.file else "")

    def message(self) -> str:
        return (f"model {self.alias!r} needs {self.label()} from the Hub ({self.repo}), which is not in the models "
                f"folder yet: pull it with `{self.pull_command()}`, or run with --pull (the studio offers a Pull "
                "button)")


def hub_need(alias: str, entry: dict[str, Any]) -> HubNeed:
    """The need of a checked `source: hub` entry."""
    quant = entry.get("quant")
    return HubNeed(alias=alias, repo=str(entry.get("repo") or "").strip().strip("/"),
                   quant=str(quant).strip().upper() if quant else None,
                   file=str(entry["file"]).strip() if entry.get("file") else None)


def hub_entry_problems(entry: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(key, problem, hint) of a `source: hub` entry (repo required, quant or file, no path)."""
    problems = []
    repo = entry.get("repo")
    if not repo:
        problems.append(("source", "has source 'hub' but no repo",
                         "add `repo: OWNER/NAME`, such as `repo: unsloth/Qwen3-0.6B-GGUF`"))
    elif not isinstance(repo, str) or not _REPO.fullmatch(repo.strip().strip("/")):
        problems.append(("repo", f"repo {repo!r} is not a Hub repository", "write `repo: OWNER/NAME`"))
    quant = entry.get("quant")
    if quant is not None and (not isinstance(quant, str) or not _QUANT.fullmatch(quant.strip())):
        problems.append(("quant", f"quant {quant!r} is not a quantisation tag", "write `quant: Q4_K_M`"))
    file = entry.get("file")
    if file is not None and (not isinstance(file, str) or not file.strip().endswith(".gguf")
                             or ".." in file.split("/") or file.startswith("/")):
        problems.append(("file", f"file {file!r} is not a GGUF file of the repo",
                         "write the file's name in the repo, such as `file: Qwen3-0.6B-Q4_K_M.gguf`"))
    if quant and file:
        problems.append(("file", "sets both quant and file", "keep one: `quant:` picks a file, `file:` names it"))
    if entry.get("path"):
        problems.append(("path", "has source 'hub' and a path",
                         "remove `path:` (the file is found in the models folder) or use `source: path`"))
    return problems


def is_bare_name(path: str) -> bool:
    """A file name with no folder (`Qwen3-0.6B-Q4_K_M.gguf`): it means the models folder's file of that name."""
    text = str(path).strip()
    return bool(text) and "/" not in text and "\\" not in text and text not in (".", "..") and not text.startswith("~")


def resolve_model_path(path: str, models_folder: Path) -> str:
    """A bare file name found in the models folder becomes its full path; anything else is left as written
    (a bare name that only exists in the working folder still works there)."""
    if not is_bare_name(path):
        return path
    candidate = models_folder / path.strip()
    if candidate.is_file() or not Path(path.strip()).exists():
        return str(candidate)
    return path


def read_ledger(models_folder: Path) -> dict[str, str]:
    """The ledger's Hub reference -> file name entries. Only a file's base name is kept, as record_pull writes it:
    an edited entry with a folder, an absolute path or `..` names a file of the models folder or nothing."""
    try:
        data = json.loads((models_folder / PULL_LEDGER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    names = {str(k): Path(v.replace("\\", "/")).name for k, v in data.items() if isinstance(v, str)}
    return {k: name for k, name in names.items() if name not in ("", ".", "..")}


def record_pull(models_folder: Path, need: HubNeed, file_name: str) -> None:
    """Remember which file a Hub reference became (written atomically; a lost ledger only costs a lookup)."""
    from app.platform.fileio import atomic_write_text

    ledger = read_ledger(models_folder)
    ledger[need.ledger_key] = Path(file_name).name
    try:
        atomic_write_text(models_folder / PULL_LEDGER, json.dumps(ledger, indent=1, sort_keys=True) + "\n")
    except OSError as exc:
        log.warning("could not record the pull of %s in %s: %s", need.ref, models_folder, exc)


def _repo_stem(repo: str) -> str:
    name = repo.rsplit("/", 1)[-1].lower()
    return re.sub(r"[-_.]gguf$", "", name)


def local_hub_file(need: HubNeed, models_folder: Path) -> Path | None:
    """The models folder's file for a Hub need: the ledger's, the named file, else one whose name has the repo's
    model name and the quant (a pull made before the ledger existed)."""
    recorded = read_ledger(models_folder).get(need.ledger_key)
    if recorded and (models_folder / recorded).is_file():
        return models_folder / recorded
    if need.file:
        named = models_folder / Path(need.file).name
        return named if named.is_file() else None
    if not need.quant or not models_folder.is_dir():
        return None
    from backends.llama.models.hub_files import quant_of

    stem = _repo_stem(need.repo)
    for path in sorted(models_folder.glob("*.gguf")):
        if path.name.lower().startswith(stem) and quant_of(path.name) == need.quant:
            return path
    return None


def resolve_hub_entry(alias: str, entry: dict[str, Any], models_folder: Path) -> dict[str, Any]:
    """A `source: hub` entry as the `source: path` entry of its local file; ModelNotPulledError when it is missing."""
    need = hub_need(alias, entry)
    found = local_hub_file(need, models_folder)
    if found is None:
        raise ModelNotPulledError(need)
    rest = {k: v for k, v in entry.items() if k not in (*HUB_FIELDS, "source")}
    return {**rest, "source": "path", "path": str(found)}


def hub_needs(models: dict[str, Any], models_folder: Path, *, missing_only: bool = True) -> list[HubNeed]:
    """The Hub models of a `models:` section (only those not in the models folder, by default)."""
    needs = []
    for alias, entry in (models or {}).items():
        if isinstance(entry, dict) and entry.get("source") == "hub" and not hub_entry_problems(entry):
            need = hub_need(str(alias), entry)
            if not missing_only or local_hub_file(need, models_folder) is None:
                needs.append(need)
    return needs
