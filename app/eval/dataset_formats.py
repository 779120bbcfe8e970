"""Dataset formats beyond JSONL and CSV: a JSON array of objects, Parquet, and rows from the `datasets` library,
each turned into plain rows (JSON values) and their columns, within the same row and column limits."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from collections.abc import Iterable, Mapping
from typing import Any

Rows = list[dict[str, Any]]


class FormatError(ValueError):
    """The file or table cannot be read as rows; `problems` lists why (the caller wraps it in DatasetError)."""

    def __init__(self, problems: list[str] | str) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("; ".join(self.problems))


def plain(value: Any) -> Any:
    """A cell as a JSON value: dates and decimals as text, bytes as base64, nested lists and maps kept."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dt.date | dt.datetime | dt.time | dt.timedelta | decimal.Decimal):
        return str(value)
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return plain(value.tolist())
    return str(value)


def rows_and_columns(records: Iterable[Any], name: str, max_rows: int, max_columns: int,
                     ) -> tuple[Rows, list[str]]:
    """Check and copy records that should each be an object; every non-object is reported by its number."""
    rows: Rows = []
    columns: dict[str, None] = {}
    problems: list[str] = []
    for number, record in enumerate(records, start=1):
        if number > max_rows:
            raise FormatError(f"{name} has more than {max_rows} rows; split it into smaller files")
        if not isinstance(record, Mapping):
            kind = "list" if isinstance(record, list) else type(record).__name__
            problems.append(f"row {number}: a JSON {kind}, but each row must be an object "
                            '(like {"question": "...", "answer": "..."})')
            continue
        for key in record:
            columns.setdefault(str(key), None)
        if len(columns) > max_columns:
            raise FormatError(f"{name}: row {number} brings the columns to {len(columns)}; the limit is "
                              f"{max_columns} (keep the columns the workflow reads)")
        rows.append({str(k): plain(v) for k, v in record.items()})
    if problems:
        raise FormatError(problems)
    if not rows:
        raise FormatError(f"{name} has no rows")
    return rows, list(columns)


def parse_json_array(text: str, name: str, max_rows: int, max_columns: int) -> tuple[Rows, list[str]]:
    """A .json file: an array of objects (one per row)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{name}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(value, list):
        hint = (" (a JSONL file has one object per line: name it .jsonl)" if isinstance(value, dict) else "")
        raise FormatError(f"{name}: a .json dataset must be an array of objects, like "
                          f'[{{"question": "...", "answer": "..."}}], got a JSON {type(value).__name__}{hint}')
    return rows_and_columns(value, name, max_rows, max_columns)


def parse_parquet(data: bytes, name: str, max_rows: int, max_columns: int, max_bytes: int,
                  ) -> tuple[Rows, list[str]]:
    """A .parquet file's rows (read with pyarrow, which the `datasets` library brings); `max_bytes` bounds the
    uncompressed data, so a small file cannot expand into gigabytes."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise FormatError("reading .parquet needs pyarrow: pip install pyarrow") from None
    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as exc:
        raise FormatError(f"{name} is not a Parquet file ({exc})") from None
    meta = parquet.metadata
    if meta.num_rows > max_rows:
        raise FormatError(f"{name} has {meta.num_rows} rows; the limit is {max_rows}: split it into smaller files")
    if meta.num_columns > max_columns:
        raise FormatError(f"{name} has {meta.num_columns} columns; the limit is {max_columns}")
    expanded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    if expanded > max_bytes:
        raise FormatError(f"{name} holds {expanded} bytes of data once uncompressed; the limit is {max_bytes}")
    try:
        table = parquet.read()
    except (pa.ArrowException, OSError) as exc:
        raise FormatError(f"{name}: cannot read its rows ({exc})") from None
    return rows_and_columns(table.to_pylist(), name, max_rows, max_columns)
