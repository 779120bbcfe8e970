"""A dataset's own metric: the `NAME.meta.yaml` file beside `NAME.jsonl` (or .csv, .json, .parquet) says how it is
graded when no metric is given, e.g. `metric: number` for datasets/arithmetic.jsonl."""

from __future__ import annotations

import logging
from pathlib import Path

import yaml

from app.eval.metrics import MetricError, parse_metric

log = logging.getLogger(__name__)

META_SUFFIX = ".meta.yaml"
MAX_META_BYTES = 64 * 1024
META_KEYS = ("metric",)


class DatasetMetaError(ValueError):
    """The dataset's meta file is unreadable or names a metric that does not exist."""


def meta_path(dataset: Path) -> Path:
    """Where a dataset file's meta file is: `arithmetic.jsonl` -> `arithmetic.meta.yaml` in the same folder."""
    return dataset.with_name(dataset.stem + META_SUFFIX)


def declared_metric(dataset: Path | None) -> str | None:
    """The metric the dataset's meta file declares (None without a meta file, or for Hub datasets and rows). A
    metric that runs code (`python:FILE`, `tests`) is refused there: the user names those with --metric."""
    if dataset is None or str(dataset).startswith("hf:"):
        return None
    path = meta_path(dataset)
    if not path.is_file():
        return None
    try:
        data = path.read_bytes()[:MAX_META_BYTES + 1]
        if len(data) > MAX_META_BYTES:
            raise DatasetMetaError(f"{path.name} is over {MAX_META_BYTES // 1024} KB; it holds one line, "
                                   "e.g. `metric: number`")
        meta = yaml.safe_load(data.decode("utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise DatasetMetaError(f"cannot read {path.name}: {exc}") from None
    if not isinstance(meta, dict):
        raise DatasetMetaError(f"{path.name} must be a mapping such as `metric: number`")
    unknown = sorted(str(k) for k in meta if k not in META_KEYS)
    if unknown:
        raise DatasetMetaError(f"{path.name}: unknown key(s) {', '.join(unknown)}; it may set: {', '.join(META_KEYS)}")
    metric = meta.get("metric")
    if metric is None:
        return None
    if not isinstance(metric, str) or not metric.strip():
        raise DatasetMetaError(f"{path.name}: metric must be a metric name such as number, exact or math")
    metric = metric.strip()
    try:
        parsed = parse_metric(metric) if not metric.lower().startswith("python:") else None
    except MetricError as exc:
        raise DatasetMetaError(f"{path.name}: metric {metric!r}: {exc}") from None
    if parsed is None or parsed.uses_python or parsed.runs_code:
        raise DatasetMetaError(f"{path.name}: the metric {metric!r} runs code, so it is not taken from a meta file; "
                               "give it with --metric (or pick it in the Evaluate tab)")
    log.debug("%s declares the metric %s", path, metric)
    return metric
