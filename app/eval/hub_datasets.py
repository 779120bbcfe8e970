"""Datasets from the Hugging Face Hub, `hf:OWNER/NAME[:CONFIG][@SPLIT]`, loaded with the `datasets` library.

The library caches what it downloads (`HF_DATASETS_CACHE`, default ~/.cache/huggingface/datasets) and reads
the cache when the Hub cannot be reached or `HF_HUB_OFFLINE=1` is set; `HF_ENDPOINT` points it at a mirror.
A split may be sliced as the library allows: `hf:openai/gsm8k:main@test[:100]`.

Offline, the library's own retries took a minute per load before it said anything: the Hub is asked first, once
(`hub_reachable`: a few seconds at most, the answer remembered for a minute), and when it does not answer the
library reads its cache only, so a dataset that is not cached fails at once (`HubUnreachableError`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PREFIX = "hf:"
_SPEC = re.compile(r"^hf:(?P<repo>[A-Za-z0-9][\w.-]*(?:/[\w.-]+)?)(?::(?P<config>[\w.-]+))?"
                   r"(?:@(?P<split>[\w.-]+(?:\[[\w%:+-]*\])?))?$")
PREFERRED_SPLITS = ("test", "validation", "train")
FORM = "hf:OWNER/NAME[:CONFIG][@SPLIT], e.g. hf:openai/gsm8k:main@test"


PROBE_TIMEOUT_S = 3.0
"""How long the Hub may take to answer before it counts as unreachable (any HTTP answer counts as reached)."""
PROBE_MEMO_S = 60.0
"""How long a probe's answer is trusted: an Estimate and a Start right after a failed load fail at once too."""
DEFAULT_ENDPOINT = "https://huggingface.co"
OFFLINE_VALUES = {"1", "true", "yes", "on"}

_probes: dict[str, tuple[float, bool]] = {}
_probe_lock = threading.Lock()
_offline_lock = threading.Lock()


class HubDatasetError(ValueError):
    """A Hub dataset that cannot be loaded; the message names the configs or splits that exist when known."""


class HubUnreachableError(HubDatasetError):
    """A Hub dataset that is not in this machine's cache while the Hub cannot be reached."""


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


def hub_endpoint() -> str:
    """The Hub the library talks to: $HF_ENDPOINT (a mirror), else huggingface.co."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def offline_by_setting() -> bool:
    """Whether the user asked for offline mode ($HF_HUB_OFFLINE / $HF_DATASETS_OFFLINE): the library reads its
    cache only, with no probe of ours."""
    return any(os.environ.get(name, "").strip().lower() in OFFLINE_VALUES
               for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _probe(endpoint: str) -> bool:
    request = urllib.request.Request(endpoint + "/api/datasets?limit=1", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S):  # the user's Hub endpoint
            return True
    except urllib.error.HTTPError:  # it answered, if only to refuse
        return True
    except (urllib.error.URLError, OSError, ValueError) as exc:
        log.info("the Hub at %s did not answer within %g s: %s", endpoint, PROBE_TIMEOUT_S, exc)
        return False


def hub_reachable() -> bool:
    """Whether the Hub answers within PROBE_TIMEOUT_S; asked once per PROBE_MEMO_S (per endpoint)."""
    endpoint = hub_endpoint()
    with _probe_lock:
        known = _probes.get(endpoint)
        if known is not None and time.monotonic() - known[0] < PROBE_MEMO_S:
            return known[1]
    reached = _probe(endpoint)
    with _probe_lock:
        _probes[endpoint] = (time.monotonic(), reached)
    return reached


@contextlib.contextmanager
def _cache_only(datasets: Any) -> Iterator[None]:
    """The library in offline mode for one load (its flags are read at import, so they are set here, under a
    lock, and put back): it reads its cache and never waits on the network."""
    import huggingface_hub.constants as hub_constants

    with _offline_lock:
        saved = datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE
        datasets.config.HF_HUB_OFFLINE = hub_constants.HF_HUB_OFFLINE = True
        try:
            yield
        finally:
            datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE = saved


def _load(spec: HubSpec) -> Any:
    try:
        import datasets
    except ImportError:
        raise HubDatasetError("hf: datasets need the datasets library: pip install datasets") from None
    # the library warns twice (its handler and the root logger) on every load from the cache: keep its errors only
    datasets.logging.set_verbosity_error()
    if offline_by_setting() or hub_reachable():
        return _load_from_library(datasets, spec)
    with _cache_only(datasets):
        try:
            return _load_from_library(datasets, spec)
        except HubDatasetError as exc:
            log.info("%s from the cache only: %s", spec, exc)
            raise HubUnreachableError(f"{spec} is not in this machine's dataset cache and the Hub ({hub_endpoint()}) "
                                      "does not answer: load it once while online (or set HF_ENDPOINT to a mirror), "
                                      "or give a copy of it as a local file") from None


def _load_from_library(datasets: Any, spec: HubSpec) -> Any:
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
