"""Evaluation datasets: load JSONL / CSV / JSON-array / Parquet files and `hf:` Hub datasets safely, bind columns to
workflow inputs, check every row up front."""

from __future__ import annotations

import csv
import difflib
import gzip
import hashlib
import io
import json
import logging
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.eval.bfcl_data import BfclError, is_bfcl_spec
from app.eval.bfcl_data import load_rows as load_bfcl_rows
from app.eval.dataset_formats import FormatError, parse_json_array, parse_parquet, rows_and_columns
from app.eval.hub_datasets import HubDatasetError, is_hub_spec, load_hub_rows
from app.platform import paths, resources

log = logging.getLogger(__name__)

MAX_DATASET_BYTES = 20 * 1024 * 1024
MAX_ROWS = 100_000
MAX_COLUMNS = 1000
"""Columns a dataset may have (a CSV header, the keys of JSONL rows together)."""
SUPPORTED_SUFFIXES = (".jsonl", ".csv", ".json", ".parquet")
_SHOWN_PROBLEMS = 10
_FORMATS = (".jsonl (one JSON object per line), .csv (UTF-8 with a header row), .json (an array of objects), "
            ".parquet, any but parquet gzipped (.jsonl.gz), or hf:OWNER/NAME[:CONFIG][@SPLIT] (a Hugging Face Hub "
            "dataset)")


class DatasetError(ValueError):
    """A dataset that cannot be used; `problems` lists every reason (rows are numbered from 1)."""

    def __init__(self, problems: list[str] | str) -> None:
        self.problems: list[str] = [problems] if isinstance(problems, str) else list(problems)
        super().__init__(self._summary())

    def _summary(self) -> str:
        if len(self.problems) == 1:
            return self.problems[0]
        shown = "\n".join(f"  - {p}" for p in self.problems[:_SHOWN_PROBLEMS])
        more = len(self.problems) - _SHOWN_PROBLEMS
        tail = f"\n  (and {more} more)" if more > 0 else ""
        return f"{len(self.problems)} problems in the dataset:\n{shown}{tail}"

    def __str__(self) -> str:
        return self._summary()


@dataclass
class Dataset:
    """The rows of one dataset file (values as read: strings from CSV, JSON values from JSONL)."""

    path: Path
    rows: list[dict[str, Any]]
    columns: list[str]
    sha256: str
    """Hash of the file's bytes: which data an evaluation ran on."""
    lines: list[int] = field(default_factory=list, repr=False)
    """File line (1-based) where each row starts, for messages; may be empty."""

    def where(self, index: int) -> str:
        """'row N' for the row at `index` (0-based), with its file line when that number differs."""
        label = f"row {index + 1}"
        if index < len(self.lines):
            expected = index + (2 if _format_suffix(self.path) == ".csv" else 1)
            if self.lines[index] != expected:
                label += f" (line {self.lines[index]})"
        return label


@dataclass
class Binding:
    """Which column fills each workflow input, and which column holds the reference answer."""

    inputs: dict[str, str]
    """workflow input -> column; inputs left out use their default."""
    reference: str | None


# ------------------------------------------------------------------ loading


def _human_size(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB ({n} bytes)"


def _format_suffix(path: Path) -> str:
    """The format's suffix: `.jsonl` for both `x.jsonl` and a gzipped `x.jsonl.gz` (as HumanEval ships)."""
    suffix = path.suffix.lower()
    return Path(path.stem).suffix.lower() if suffix == ".gz" else suffix


def _gunzip(data: bytes, name: str) -> bytes:
    """A gzipped file's text, never more than the size limit once unpacked (a small file may unpack to gigabytes)."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            text = f.read(MAX_DATASET_BYTES + 1)
    except (OSError, EOFError) as exc:
        raise DatasetError(f"{name} is not a whole gzip file ({exc}); unpack it and check it, or give the "
                           "uncompressed file") from None
    if len(text) > MAX_DATASET_BYTES:
        raise DatasetError(f"{name} unpacks to over the limit of {_human_size(MAX_DATASET_BYTES)}: split it or use "
                           "a smaller file")
    return text


def load_dataset(path: str | Path) -> Dataset:
    """Read a .jsonl, .csv, .json (array) or .parquet file, or an `hf:` Hub dataset; raises DatasetError with
    every problem found."""
    if is_hub_spec(str(path)):
        return _load_hub(str(path))
    if is_bfcl_spec(str(path)):
        return _load_bfcl(str(path))
    p = Path(path)
    if not p.exists():
        raise DatasetError(f"no such dataset file: {p}")
    if p.is_dir():
        raise DatasetError(f"{p} is a folder; give a dataset file: {_FORMATS}")
    suffix = _format_suffix(p)
    if suffix not in SUPPORTED_SUFFIXES or (p.suffix.lower() == ".gz" and suffix == ".parquet"):
        raise DatasetError(f"{p.name}: unsupported dataset format {suffix or '(no suffix)'!r}; "
                           f"supported: {_FORMATS}")
    size = p.stat().st_size
    if size > MAX_DATASET_BYTES:
        raise DatasetError(f"{p.name} is {_human_size(size)}; the limit is {_human_size(MAX_DATASET_BYTES)}: "
                           "split it or use --limit on a smaller file")
    try:
        with p.open("rb") as f:
            data = f.read(MAX_DATASET_BYTES + 1)  # never more, even if the file grew since stat
    except OSError as exc:
        raise DatasetError(f"cannot read {p}: {exc.strerror or exc}") from None
    if len(data) > MAX_DATASET_BYTES:
        raise DatasetError(f"{p.name} is over the limit of {_human_size(MAX_DATASET_BYTES)}")
    if p.suffix.lower() == ".gz":
        data = _gunzip(data, p.name)
    if not data.strip():
        raise DatasetError(f"{p.name} is empty: it has no rows")
    digest = hashlib.sha256(data).hexdigest()
    if suffix == ".parquet":
        try:
            rows, columns = parse_parquet(data, p.name, MAX_ROWS, MAX_COLUMNS, 5 * MAX_DATASET_BYTES)
        except FormatError as exc:
            raise DatasetError(exc.problems) from None
        return Dataset(path=p, rows=rows, columns=columns, sha256=digest)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DatasetError(f"{p.name} is not UTF-8 text: byte 0x{data[exc.start]:02x} at byte offset {exc.start} "
                           f"(line {line}) cannot be decoded; save the file as UTF-8") from None
    text = text.removeprefix("\ufeff")
    if suffix == ".jsonl":
        rows, columns, lines = _parse_jsonl(text, p.name)
    elif suffix == ".json":
        try:
            rows, columns = parse_json_array(text, p.name, MAX_ROWS, MAX_COLUMNS)
        except FormatError as exc:
            raise DatasetError(exc.problems) from None
        lines = []
    else:
        rows, columns, lines = _parse_csv(text, p.name)
    log.debug("loaded %s: %d rows, columns %s", p, len(rows), columns)
    return Dataset(path=p, rows=rows, columns=columns, sha256=digest, lines=lines)


def _load_hub(text: str) -> Dataset:
    """A Hub dataset's split as a Dataset whose `path` is its `hf:` spec (split included) and whose hash is that
    of its rows, so a changed upstream dataset is noticed on --resume."""
    try:
        records, spec = load_hub_rows(text, MAX_ROWS, MAX_DATASET_BYTES)
        rows, columns = rows_and_columns(records, str(spec), MAX_ROWS, MAX_COLUMNS)
    except (HubDatasetError, FormatError) as exc:
        raise DatasetError(getattr(exc, "problems", None) or [str(exc)]) from None
    digest = hashlib.sha256(json.dumps(rows, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()
    log.debug("loaded %s: %d rows, columns %s", spec, len(rows), columns)
    return Dataset(path=Path(str(spec)), rows=rows, columns=columns, sha256=digest)


def _load_bfcl(text: str) -> Dataset:
    """A BFCL category from the bfcl-eval wheel's data files (app/eval/bfcl_data.py), its `path` the spec."""
    try:
        rows, digest = load_bfcl_rows(text)
    except BfclError as exc:
        raise DatasetError(str(exc)) from None
    columns = list(dict.fromkeys(k for row in rows for k in row))
    return Dataset(path=Path(text), rows=rows, columns=columns, sha256=digest)


def _too_many_rows(name: str) -> DatasetError:
    return DatasetError(f"{name} has more than {MAX_ROWS} rows; split it into smaller files")


def _parse_jsonl(text: str, name: str) -> tuple[list[dict[str, Any]], list[str], list[int]]:
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    columns: dict[str, None] = {}
    problems: list[str] = []
    # split on \n only: JSON strings may hold U+2028 and friends, which str.splitlines() would cut at
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        if len(rows) + len(problems) >= MAX_ROWS:
            raise _too_many_rows(name)
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"line {number}: not valid JSON ({exc.msg} at column {exc.colno})")
            continue
        if not isinstance(value, dict):
            kind = "list" if isinstance(value, list) else type(value).__name__
            problems.append(f"line {number}: a JSON {kind}, but each line must be a JSON object "
                            '(like {"question": "...", "answer": "..."})')
            continue
        for key in value:
            columns.setdefault(str(key), None)
        if len(columns) > MAX_COLUMNS:
            raise DatasetError(f"{name}: line {number} brings the columns to {len(columns)}; the limit is "
                               f"{MAX_COLUMNS} (keep the keys the workflow reads)")
        rows.append({str(k): v for k, v in value.items()})
        lines.append(number)
    if problems:
        raise DatasetError(problems)
    if not rows:
        raise DatasetError(f"{name} has no rows (only blank lines)")
    return rows, list(columns), lines


def _parse_csv(text: str, name: str) -> tuple[list[dict[str, Any]], list[str], list[int]]:
    # long prompts are fine: the file size is already capped, so lift the csv module's 128 KB cell limit
    if csv.field_size_limit() < MAX_DATASET_BYTES:
        csv.field_size_limit(MAX_DATASET_BYTES)
    reader = csv.reader(io.StringIO(text, newline=""))
    problems: list[str] = []
    header: list[str] | None = None
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    number = 0  # data rows seen (blank lines skipped)
    previous_end = 0
    try:
        for record in reader:
            start, previous_end = previous_end + 1, reader.line_num
            if not record or (len(record) == 1 and not record[0].strip()):  # a blank line
                continue
            if header is None:
                if len(record) > MAX_COLUMNS:
                    raise DatasetError(f"{name}: the header has {len(record)} columns; the limit is {MAX_COLUMNS} "
                                       "(is this a dataset? keep the columns the workflow reads)")
                header = [cell.strip() for cell in record]
                problems.extend(_header_problems(header))
                continue
            number += 1
            if number > MAX_ROWS:
                raise _too_many_rows(name)
            if len(record) != len(header):
                problems.append(f"row {number} (line {start}): {len(record)} cells, but the header has "
                                f"{len(header)} columns" + (" (an unquoted comma?)" if len(record) > len(header)
                                                            else ""))
                continue
            rows.append(dict(zip(header, record, strict=True)))
            lines.append(start)
    except csv.Error as exc:
        problems.append(f"line {reader.line_num}: {exc}")
    if problems:
        raise DatasetError(problems)
    if header is None:
        raise DatasetError(f"{name} is empty: it has no header row")
    if not rows:
        raise DatasetError(f"{name} has a header row but no data rows")
    return rows, header, lines


def _header_problems(header: list[str]) -> list[str]:
    """Unnamed and duplicate columns, in one pass (a header may be long)."""
    problems = [f"header: column {i} has no name" for i, column in enumerate(header, start=1) if not column]
    seen: set[str] = set()
    duplicates: set[str] = set()
    for column in header:
        if column and column in seen:
            duplicates.add(column)
        seen.add(column)
    if duplicates:
        shown = sorted(duplicates)
        more = f" (and {len(shown) - 20} more)" if len(shown) > 20 else ""
        problems.append(f"header: duplicate column names {', '.join(shown[:20])}{more}")
    return problems


# ------------------------------------------------------------------ binding


def _input_type(spec: Any) -> str:
    value = spec.get("type", "text") if isinstance(spec, Mapping) else getattr(spec, "type", "text")
    return str(value or "text")


def _may_be_empty(spec: Any) -> bool:
    """Whether a row may leave this input empty: a number or json input with a default (it applies), or a text
    input whose default is "" — a text default like "What is 3 + 4?" is a demo value, never a stand-in for a
    missing item."""
    if not _has_default(spec):
        return False
    return _input_type(spec) != "text" or _input_default(spec) == ""


def _input_default(spec: Any) -> Any:
    return spec.get("default") if isinstance(spec, Mapping) else getattr(spec, "default", None)


def _has_default(spec: Any) -> bool:
    return _input_default(spec) is not None


def _close(word: str, options: list[str]) -> str:
    match = difflib.get_close_matches(word, options, n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _names(options: list[str]) -> str:
    return ", ".join(repr(o) for o in options) or "none"


def bind(dataset: Dataset, workflow_inputs: Mapping[str, Any], mapping: Mapping[str, str] | None = None,
         reference: str | None = None) -> Binding:
    """Fill each workflow input from `mapping[input]`, else the column of the same name; inputs with a
    default may stay unbound. `workflow_inputs` maps names to specs: dicts {type, default} or InputSpec."""
    mapping = dict(mapping or {})
    columns = list(dataset.columns)
    problems: list[str] = []
    for name, column in mapping.items():
        if name not in workflow_inputs:
            problems.append(f"the mapping names input {name!r}, but the workflow has no such input"
                            f"{_close(name, list(workflow_inputs))}; its inputs: {_names(list(workflow_inputs))}")
        elif column not in columns:
            problems.append(f"input {name!r} is mapped to column {column!r}, which the dataset does not have"
                            f"{_close(column, columns)}; columns: {_names(columns)}")
    bound: dict[str, str] = {}
    for name, spec in workflow_inputs.items():
        if name in mapping:
            if mapping[name] in columns:
                bound[name] = mapping[name]
        elif name in columns:
            bound[name] = name
        elif not _has_default(spec):
            problems.append(f"workflow input {name!r} has no column and no default: the dataset has columns "
                            f"{_names(columns)}; map one to it (input=column){_close(name, columns)}")
    ref: str | None
    if reference is not None:
        ref = reference
        if reference not in columns:
            problems.append(f"reference column {reference!r} is not in the dataset{_close(reference, columns)}; "
                            f"columns: {_names(columns)}")
    else:
        ref = "answer" if "answer" in columns else None
    if problems:
        raise DatasetError(problems)
    return Binding(inputs=bound, reference=ref)


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _to_number(value: Any) -> int | float:
    """The number a cell holds (the CLI's rule: '2' -> 2, '2.5' / '1e3' -> float); ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"must be a number, got {json.dumps(value)}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        number: int | float = value
    elif isinstance(value, str):
        text = value.strip()
        try:
            number = float(text) if any(c in text for c in ".eEnN") else int(text)
        except ValueError:
            raise ValueError(f"must be a number, got {value!r}") from None
    else:
        raise ValueError(f"must be a number, got {type(value).__name__}")
    if isinstance(number, float) and not math.isfinite(number):
        raise ValueError(f"must be a finite number, got {value!r}")
    return number


def check_rows(dataset: Dataset, binding: Binding, workflow_inputs: Mapping[str, Any]) -> None:
    """Check the whole file before anything runs: values present where needed, numbers that parse, JSON
    that parses. Every problem of every row is collected, then raised once as DatasetError."""
    problems: list[str] = []
    for index, row in enumerate(dataset.rows):
        where = dataset.where(index)
        for name, column in binding.inputs.items():
            spec = workflow_inputs.get(name, {})
            value = row.get(column)
            if _is_empty(value):
                if not _may_be_empty(spec):
                    why = "is missing" if column not in row else "is empty"
                    hint = " (an input whose workflow default is \"\" may be left empty)" \
                        if _input_type(spec) == "text" and _has_default(spec) else ""
                    problems.append(f"{where}: no value for input {name!r} (column {column!r} {why}){hint}")
                continue
            kind = _input_type(spec)
            if kind == "number":
                try:
                    _to_number(value)
                except ValueError as exc:
                    problems.append(f"{where}: input {name!r} (column {column!r}) {exc}")
            elif kind == "json" and isinstance(value, str):
                try:
                    json.loads(value)
                except json.JSONDecodeError as exc:
                    problems.append(f"{where}: input {name!r} (column {column!r}) is not valid JSON: {exc.msg}")
    if problems:
        raise DatasetError(problems)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def item_inputs(row: Mapping[str, Any], binding: Binding, workflow_inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The workflow input values of one row: numbers as int/float, text as str, json as given (a string is
    parsed by the scheduler). An input with no column, or an empty number/json cell, keeps the workflow's
    default (the scheduler fills it)."""
    values: dict[str, Any] = {}
    for name, column in binding.inputs.items():
        spec = workflow_inputs.get(name, {})
        value = row.get(column)
        if _is_empty(value):
            if _has_default(spec):
                values[name] = _input_default(spec)
            continue
        kind = _input_type(spec)
        if kind == "number":
            values[name] = _to_number(value)
        elif kind == "json":
            values[name] = value
        else:
            values[name] = _as_text(value)
    return values


def item_reference(row: Mapping[str, Any], binding: Binding) -> str | None:
    """The reference answer of one row as text, or None (no reference column, or an empty cell)."""
    if binding.reference is None:
        return None
    value = row.get(binding.reference)
    return None if _is_empty(value) else _as_text(value)


def select_items(n_rows: int, limit: int | None, shuffle: bool, seed: int) -> list[int]:
    """Row indices to evaluate: all rows, shuffled with `random.Random(seed)` when asked, then cut to `limit`."""
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    indices = list(range(n_rows))
    if shuffle:
        random.Random(seed).shuffle(indices)
    return indices if limit is None else indices[:limit]


# ------------------------------------------------------------------ finding datasets


def dataset_dirs() -> list[Path]:
    """Where datasets are looked up by name: the data folder's datasets/ ($METAGEN_DATASETS overrides it), then
    the repo's datasets/ (next to static/, when it is there)."""
    dirs = [paths.datasets_dir()]
    try:
        bundled = resources.static_dir().parent / "datasets"
    except FileNotFoundError:
        bundled = None
    if bundled is not None and bundled.is_dir():
        dirs.append(bundled)
    return dirs


def available_datasets() -> list[Path]:
    """Every dataset file in `dataset_dirs()` (a name in an earlier folder hides the same name later)."""
    found: dict[str, Path] = {}
    for folder in dataset_dirs():
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.suffix.lower() in SUPPORTED_SUFFIXES:
                found.setdefault(path.name, path)
    return list(found.values())


def resolve_dataset(name_or_path: str | Path) -> Path:
    """An existing path as given, else a file of that name (with or without suffix) in `dataset_dirs()`; an `hf:`
    spec is kept as it is (loaded by `load_dataset`)."""
    if is_hub_spec(str(name_or_path)):
        return Path(str(name_or_path).strip())
    given = Path(name_or_path).expanduser()
    if given.exists():
        return given
    name = str(name_or_path)
    if name and Path(name).name == name:  # a bare name, never a path into or out of the folders
        for folder in dataset_dirs():
            for candidate in (name, *(name + s for s in SUPPORTED_SUFFIXES)):
                path = folder / candidate
                if path.is_file():
                    return path
    names = sorted({p.stem if p.suffix else p.name for p in available_datasets()})
    where = ", ".join(str(d) for d in dataset_dirs())
    raise DatasetError(f"no dataset {name!r}: it is not a file, nor a dataset in {where}; "
                       f"available datasets: {', '.join(names) or 'none'}")
