"""Datasets from the Hugging Face Hub, `hf:OWNER/NAME[:CONFIG][@SPLIT]`, loaded with the `datasets` library.

The library caches what it downloads (`HF_DATASETS_CACHE`, default ~/.cache/huggingface/datasets) and reads
the cache when the Hub cannot be reached or `HF_HUB_OFFLINE=1` is set; `HF_ENDPOINT` points it at a mirror.
A split may be sliced as the library allows: `hf:openai/gsm8k:main@test[:100]`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PREFIX = "hf:"
_SPEC = re.compile(r"^hf:(?P<repo>[A-Za-z0-9][\w.-]*(?:/[\w.-]+)?)(?::(?P<config>[\w.-]+))?"
                   r"(?:@(?P<split>[\w.-]+(?:\[[\w%:+-]*\])?))?$")
PREFERRED_SPLITS = ("test", "validation", "train")
FORM = "hf:OWNER/NAME[:CONFIG][@SPLIT], e.g. hf:openai/gsm8k:main@test"


class HubDatasetError(ValueError):
    """A Hub dataset that cannot be loaded; the message names the configs or splits that exist when known."""


@dataclass(frozen=True)
class HubSpec:
    repo: str
    config: str | None = None
    split: str | None = None

    def __str__(self) -> str:
        return PREFIX + self.repo + (f":{self.config}" if self.config else "") + (f"@{self.split}" if self.split
                                                                                  else "")


def is_hub_spec(text: str) -> bool:
    return str(text).strip().startswith(PREFIX)


def parse_hub_spec(text: str) -> HubSpec:
    found = _SPEC.match(str(text).strip())
    if not found:
        raise HubDatasetError(f"{text!r} is not a Hub dataset name; write {FORM}")
    repo = found["repo"]
    problem = _repo_problem(repo)
    if problem:
        raise HubDatasetError(f"{text!r} is not a Hub dataset name: {problem}; write {FORM}")
    return HubSpec(repo, found["config"], found["split"])


def _repo_problem(repo: str) -> str | None:
    """Why `repo` is no Hub name the `datasets` library would look up on the Hub (it reads a local folder or file
    of that name first: `x/..` is the working directory), else None."""
    for part in repo.split("/"):
        if part in (".", "..") or ".." in part or part.startswith((".", "-")) or part.endswith((".", "-")):
            return f"{part!r} is not a name (no '.' or '..' path parts, no leading or trailing '.' or '-')"
    if Path(repo).exists():
        return f"{repo!r} is a file or folder here, which the datasets library would read instead of the Hub"
    return None


def _config_names(repo: str) -> list[str]:
    try:
        from datasets import get_dataset_config_names

        return list(get_dataset_config_names(repo))
    except Exception as exc:  # offline, gated, or no such dataset: the caller says what it knows
        log.debug("no config names for %s: %s", repo, exc)
        return []


def _load(spec: HubSpec) -> Any:
    try:
        import datasets
    except ImportError:
        raise HubDatasetError("hf: datasets need the datasets library: pip install datasets") from None
    # the library warns twice (its handler and the root logger) on every load from the cache: keep its errors only
    datasets.logging.set_verbosity_error()
    try:
        return datasets.load_dataset(spec.repo, spec.config, split=spec.split)
    except ValueError as exc:
        text = str(exc)
        if "split" in text.lower():
            raise HubDatasetError(f"{spec}: {text.splitlines()[0]} Choose one with @SPLIT.") from None
        if "config" in text.lower():
            configs = [] if "available configs" in text.lower() else _config_names(spec.repo)
            known = f"; its configs: {', '.join(configs)}" if configs else ""
            raise HubDatasetError(f"{spec}: {' '.join(text.split())}{known} (write hf:{spec.repo}:CONFIG)") from None
        raise HubDatasetError(f"{spec}: {text}") from None
    except (ConnectionError, OSError) as exc:
        raise HubDatasetError(f"{spec}: not in the local cache, and the Hub cannot be reached ({exc}); load it "
                              "once while online, or set HF_ENDPOINT to a mirror") from None
    except Exception as exc:  # the library's own errors (gated repo, no such dataset, bad files)
        raise HubDatasetError(f"{spec}: {type(exc).__name__}: {exc}") from None


def _pick_split(spec: HubSpec, loaded: Any) -> tuple[Any, str]:
    if spec.split is not None:
        return loaded, spec.split
    splits = list(loaded.keys())
    if len(splits) == 1:
        return loaded[splits[0]], splits[0]
    for name in PREFERRED_SPLITS:
        if name in splits:
            log.info("%s: no split given, using %r of %s", spec, name, splits)
            return loaded[name], name
    raise HubDatasetError(f"{spec} has splits {', '.join(splits)}; choose one with @SPLIT")


def load_hub_rows(text: str, max_rows: int, max_bytes: int) -> tuple[list[dict[str, Any]], HubSpec]:
    """The rows of a Hub dataset split, and the spec with the split that was used."""
    spec = parse_hub_spec(text)
    table, split = _pick_split(spec, _load(spec))
    if len(table) > max_rows:
        raise HubDatasetError(f"{spec} has {len(table)} rows; the limit is {max_rows}: take a slice, e.g. "
                              f"@{split}[:{max_rows}]")
    size = int(getattr(table.data, "nbytes", 0) or 0)
    if size > max_bytes:
        raise HubDatasetError(f"{spec} holds {size} bytes; the limit is {max_bytes}: take a slice, e.g. "
                              f"@{split}[:1000]")
    return table.to_list(), HubSpec(spec.repo, spec.config, split)
