"""A Hub repository's GGUF files grouped by quantisation: parse `REPO[:QUANT]`, tag files, pick the set to pull."""

from __future__ import annotations

import re
from dataclasses import dataclass

from backends.base import BackendError

DEFAULT_QUANT = "Q4_K_M"
"""llama.cpp's `-hf` default and Ollama's: the usual balance of size and quality."""

_QUANT_RE = re.compile(r"(?<![A-Za-z0-9])(I?Q\d(?:_[A-Z0-9]+)*|BF16|F16|F32|MXFP4(?:_MOE)?)(?=[-_.]|$)", re.I)
_SHARD_RE = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.I)
_REPO_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


class HubError(BackendError):
    """A pull or Hub query failed for a reason the user can act on; `code` names the case for tests and UIs."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class HubFile:
    """One file of a Hub repository: its path in the repo, size and the LFS sha256 (None when not in LFS)."""

    path: str
    size: int | None
    sha256: str | None

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def parse_ref(ref: str) -> tuple[str, str | None]:
    """`user/repo[:QUANT]` (optionally prefixed by `hf.co/` or a Hub URL) -> (repo, quant or None)."""
    text = str(ref or "").strip()
    text = re.sub(r"^(https?://)?(huggingface\.co|hf\.co)/", "", text)
    repo, _, quant = text.partition(":")
    repo = repo.strip().strip("/")
    if not _REPO_RE.fullmatch(repo):
        raise HubError("bad_ref", f"{ref!r} is not a Hub model: write USER/REPO or USER/REPO:QUANT, such as "
                                  "unsloth/Qwen3-0.6B-GGUF:Q4_K_M")
    return repo, (quant.strip() or None)


def quant_of(filename: str) -> str | None:
    """The quantisation tag in a GGUF file name (`Qwen3-0.6B-Q4_K_M.gguf` -> `Q4_K_M`), upper-case; None if none."""
    base = _SHARD_RE.sub(".gguf", filename.rsplit("/", 1)[-1])
    found = _QUANT_RE.findall(base)
    return found[-1].upper() if found else None


def shard_group(filename: str) -> str:
    """The name shared by all shards of a split GGUF (the file's own name when it is not split)."""
    return _SHARD_RE.sub("", filename)


def is_model_gguf(path: str) -> bool:
    """A GGUF holding model weights: not a vision projector (mmproj) nor an imatrix."""
    name = path.rsplit("/", 1)[-1].lower()
    return name.endswith(".gguf") and not name.startswith(("mmproj", "imatrix")) and "mmproj" not in name


def gguf_groups(files: list[HubFile]) -> dict[str, list[HubFile]]:
    """The repo's model GGUFs, one list per downloadable model (a single file, or every shard of a split one)."""
    groups: dict[str, list[HubFile]] = {}
    for f in files:
        if is_model_gguf(f.path):
            groups.setdefault(shard_group(f.path), []).append(f)
    return {k: sorted(v, key=lambda f: f.path) for k, v in sorted(groups.items())}


def quants(files: list[HubFile]) -> list[str]:
    """The distinct quantisation tags of the repo's GGUFs, in file order."""
    seen: list[str] = []
    for group in gguf_groups(files).values():
        q = quant_of(group[0].path) or group[0].name
        if q not in seen:
            seen.append(q)
    return seen


def select_files(repo: str, files: list[HubFile], quant: str | None = None,
                 filename: str | None = None) -> list[HubFile]:
    """The files to pull: by `filename` (all its shards), else by `quant` (case-insensitive), else Q4_K_M, else the
    repo's only GGUF. HubError `no_gguf`, `unknown_file`, `unknown_quant` (listing the quants) or `pick_quant`."""
    groups = gguf_groups(files)
    if not groups:
        raise HubError("no_gguf", f"{repo} has no GGUF file; look for a repo with GGUF files (`metagen models "
                                  f"search NAME`, usually named ...-GGUF)")
    if filename:
        wanted = filename.strip()
        for group in groups.values():
            if any(f.path == wanted or f.name == wanted for f in group):
                return group
        names = ", ".join(g[0].path for g in groups.values())
        raise HubError("unknown_file", f"{repo} has no GGUF file {wanted!r}; its GGUF files: {names}")
    available = quants(files)
    if quant is None and len(groups) == 1:
        return next(iter(groups.values()))
    want = (quant or DEFAULT_QUANT).upper()
    matching = [g for g in groups.values() if (quant_of(g[0].path) or "") == want]
    if matching:
        return min(matching, key=lambda g: len(g[0].path))  # prefer the top-level file over variants in folders
    if quant is None:
        raise HubError("pick_quant", f"{repo} has no {DEFAULT_QUANT} file; pick one of its quants: "
                                     f"{', '.join(available)} (metagen models pull {repo}:QUANT)")
    raise HubError("unknown_quant", f"{repo} has no {quant!r} GGUF; its quants: {', '.join(available)}")
