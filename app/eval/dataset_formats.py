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


PARQUET_BATCH_ROWS = 256
"""Rows decoded at a time; each batch's decoded size is counted before its cells become Python values."""


def parse_parquet(data: bytes, name: str, max_rows: int, max_columns: int, max_bytes: int,
                  ) -> tuple[Rows, list[str]]:
    """A .parquet file's rows (read with pyarrow, which the `datasets` library brings); `max_bytes` bounds the
    decoded data, so a small file cannot expand into gigabytes: text columns are read dictionary-encoded and their
    decoded size (each row's value length) counted, batch by batch, before anything is materialised."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise FormatError("reading .parquet needs pyarrow: pip install pyarrow") from None
    try:
        probe = pq.ParquetFile(pa.BufferReader(data))
        text_columns = [c.path for c in probe.schema if c.physical_type == "BYTE_ARRAY"]
        parquet = pq.ParquetFile(pa.BufferReader(data), read_dictionary=text_columns)
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
    records: Rows = []
    decoded = 0
    try:
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS):
            decoded += sum(_decoded_bytes(column) for column in batch.columns)
            if decoded > max_bytes:
                raise FormatError(f"{name} holds more than {max_bytes} bytes of data once decoded (its values "
                                  "repeat a long text many times); the limit is the same as for any dataset")
            records += batch.to_pylist()
            if len(records) > max_rows:
                break
    except (pa.ArrowException, OSError) as exc:
        raise FormatError(f"{name}: cannot read its rows ({exc})") from None
    return rows_and_columns(records, name, max_rows, max_columns)


def _decoded_bytes(array: Any) -> int:
    """What `array` takes once its values are materialised: a dictionary array counts each row's value length
    (without materialising it), nested arrays their children's, others their buffers."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(array, pa.ChunkedArray):
        return sum(_decoded_bytes(chunk) for chunk in array.chunks)
    kind = array.type
    if pa.types.is_dictionary(kind):
        values = array.dictionary
        if pa.types.is_string(values.type) or pa.types.is_binary(values.type) or \
                pa.types.is_large_string(values.type) or pa.types.is_large_binary(values.type):
            lengths = pc.take(pc.binary_length(values), array.indices)
            return int(pc.sum(lengths).as_py() or 0) + array.indices.nbytes
        return array.indices.nbytes + len(array) * _decoded_bytes(values) // max(1, len(values))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _decoded_bytes(array.flatten()) + len(array) * 8
    if pa.types.is_struct(kind):
        return sum(_decoded_bytes(array.field(i)) for i in range(kind.num_fields)) + len(array)
    if pa.types.is_map(kind):
        return _decoded_bytes(array.keys) + _decoded_bytes(array.items) + len(array) * 8
    return int(array.nbytes)
