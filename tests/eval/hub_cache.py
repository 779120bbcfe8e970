"""A pre-filled `datasets` cache for tests: Hub datasets as the library would have cached them, read offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def prefill(cache: Path, repo: str, config: str, splits: dict[str, list[dict[str, Any]]]) -> None:
    """Write `splits` where `datasets.load_dataset(repo, config)` finds them in `cache` when offline."""
    import pyarrow as pa
    from datasets.naming import camelcase_to_snakecase, filenames_for_dataset_split

    import datasets

    owner, name = repo.split("/")
    # the library's folder: OWNER___name in snake case, then config / version / hash
    folder = cache / f"{owner}___{camelcase_to_snakecase(name)}" / config / "0.0.0" / "0123456789abcdef"
    folder.mkdir(parents=True, exist_ok=True)
    split_dict = datasets.SplitDict()
    features = None
    for split, rows in splits.items():
        table = datasets.Dataset.from_list(rows)
        features = table.features
        path = filenames_for_dataset_split(str(folder), dataset_name=name, split=split, filetype_suffix="arrow")[0]
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_stream(sink, table.data.table.schema) as writer:
            writer.write_table(table.data.table)
        split_dict.add(datasets.SplitInfo(name=split, num_examples=len(rows)))
    datasets.DatasetInfo(features=features, config_name=config, dataset_name=name,
                         splits=split_dict).write_to_directory(str(folder))


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty datasets cache, the Hub offline: only what a test pre-fills can load (nothing is downloaded)."""
    datasets = pytest.importorskip("datasets")
    import huggingface_hub.constants

    cache = tmp_path / "hf-datasets"
    cache.mkdir()
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache
