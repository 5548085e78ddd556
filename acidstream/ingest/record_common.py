"""The record-writer contract: protocols, the bulk result type, record splitting and the
helpers every writer shares (error messages, the record size limit, partition values).

Writers live in ``record_delimited``, ``record_json`` and ``record_regex``;
``acidstream.ingest.record_writers`` re-exports the public names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa

from acidstream.acid.errors import ConfigError, SerializationError
from acidstream.acid.partition_name import check_partition_value
from acidstream.acid.schema import HiveType, TableSchema, parse_hive_type
from acidstream.ingest.record_convert import check_partition_type

__all__ = [
    "DEFAULT_LINE_DELIMITER_PATTERN",
    "DEFAULT_MAX_RECORD_BYTES",
    "BoundRecordWriter",
    "EncodedBlock",
    "PartitionColumns",
    "RecordWriter",
    "split_records",
]

#: ``AbstractRecordWriter`` default: ``Scanner.useDelimiter("[\r\n]")``.
DEFAULT_LINE_DELIMITER_PATTERN = "[\r\n]"

#: Records above this many bytes are refused before parsing (bounded memory per record).
DEFAULT_MAX_RECORD_BYTES = 16 * 1024 * 1024

Row = tuple[object, ...]
PartitionValues = tuple[str | None, ...]
Encoded = tuple[Row, PartitionValues]

#: Dynamic partition columns for :meth:`RecordWriter.bind`: names (typed ``string``) or
#: ``(name, hive type)`` pairs, e.g. ``TableDef.partition_keys``.
PartitionColumns = Sequence[str | tuple[str, str | HiveType]]


@dataclass(frozen=True, slots=True)
class EncodedBlock:
    """The result of :meth:`BoundRecordWriter.encode_block` over ``records``.

    Attributes:
        table: The good rows, in record order, columns in table column order with the
            Arrow types of :func:`acidstream.ingest.record_bulk.block_schema` (those the ACID writer
            takes: ``HiveType.to_arrow()``, timestamps as ``timestamp("us")`` so Hive's
            whole range fits).
        partitions: One string column per dynamic partition column (Hive's string form,
            null for the default partition), row-aligned with ``table``; ``None`` when
            the writer was bound without dynamic partition columns.
        rejected: ``(index into records, error)`` for every bad record, in index order;
            the error is what :meth:`BoundRecordWriter.encode` raises for that record.
        good_indices: For each row of ``table``, the index of its record (ascending).
        nbytes: The bytes of all ``records`` when the parse counted them on the way
            (-1: not counted), so the writer need not count them again.
    """

    table: pa.Table
    partitions: pa.Table | None
    rejected: tuple[tuple[int, SerializationError], ...]
    good_indices: pa.Int64Array
    nbytes: int = -1


class BoundRecordWriter(Protocol):
    """A record writer bound to one table schema (the parse plan is ready)."""

    def encode(self, record: bytes) -> Encoded:
        """Convert one record into (row values, dynamic-partition values).

        Raises:
            SerializationError: The record is malformed; the message names the
                column and the offending value.
        """
        ...

    def encode_block(self, records: Sequence[bytes]) -> EncodedBlock:
        """Convert many records at once (columnar); bad records are returned, not raised.

        Accepts and rejects exactly the records :meth:`encode` does, with identical
        values and identical errors.
        """
        ...


class RecordWriter(Protocol):
    """Turns raw records into rows; :meth:`bind` builds the parse plan once."""

    @property
    def line_delimiter_pattern(self) -> str:
        """The regular expression that separates records in a stream."""
        ...

    def bind(
        self, schema: TableSchema, *, partition_columns: PartitionColumns = ()
    ) -> BoundRecordWriter:
        """Prepare to encode records for ``schema`` (+ dynamic partition columns).

        Raises:
            ConfigError: The writer cannot handle this schema.
        """
        ...


# --------------------------------------------------------------------------
# Splitting an input stream into records


def split_records(
    stream: bytes | Iterable[bytes],
    *,
    line_delimiter_pattern: str = DEFAULT_LINE_DELIMITER_PATTERN,
    skip_empty: bool = True,
) -> Iterator[bytes]:
    """Split an InputStream-like byte source into records.

    Hive wraps the stream in ``java.util.Scanner(...).useDelimiter(pattern)``;
    with the default ``[\\r\\n]`` a Windows ``\\r\\n`` therefore yields an
    empty token between ``\\r`` and ``\\n``, which Hive writes as an all-NULL
    (or empty-string) row. ``skip_empty=True`` (the default) drops empty
    records instead; ``skip_empty=False`` reproduces Scanner exactly (one
    leading and one trailing empty token are skipped, inner ones are kept).

    Args:
        stream: The whole input, or an iterable of chunks (delimiters may span
            chunk boundaries).
        line_delimiter_pattern: A regular expression matching one delimiter.
        skip_empty: Drop empty records.

    Yields:
        One record per delimited token.
    """
    try:
        pattern = re.compile(line_delimiter_pattern.encode("utf-8"))
    except re.error as e:
        raise ConfigError(f"bad line_delimiter_pattern {line_delimiter_pattern!r}: {e}") from e
    chunks: Iterable[bytes] = (stream,) if isinstance(stream, bytes | bytearray) else stream
    buf = b""
    first = True
    for chunk in chunks:
        if not chunk:
            continue
        buf += bytes(chunk)
        parts = pattern.split(buf)
        buf = parts.pop()
        for part in parts:
            # Scanner skips one delimiter before the first token.
            if first:
                first = False
                if not part:
                    continue
            if part or not skip_empty:
                yield part
    if buf:
        yield buf


# --------------------------------------------------------------------------
# Helpers shared by the writers


_PREFIX = "Unable to convert byte[] record into Object: "


def record_error(message: str, record: bytes) -> SerializationError:
    """A SerializationError in the writers' common message form."""
    return SerializationError(_PREFIX + message, record=record)


def _shown(value: object) -> object:
    if isinstance(value, str) and len(value) > 200:
        return value[:200] + "..."
    if isinstance(value, bytes) and len(value) > 200:
        return value[:200] + b"..."
    return value


def column_error(column: str, value: object, reason: str, record: bytes) -> SerializationError:
    """A bad column value: the message names the column, the value and the reason."""
    return record_error(f"column {column!r}: value {_shown(value)!r}: {reason}", record)


def check_record_size(record: bytes, limit: int) -> None:
    """Refuse a record over ``limit`` bytes before any parsing (memory stays bounded)."""
    if len(record) > limit:
        raise record_error(
            f"record is {len(record)} bytes, over the limit of {limit} (max_record_bytes)",
            record,
        )


def check_max_record_bytes(value: int) -> None:
    """Validate a writer's ``max_record_bytes`` option."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"max_record_bytes must be a positive integer, got {value!r}")


def partition_value(key: str, value: str | None, raw: object, record: bytes) -> str | None:
    """Check a converted partition value with the one partition-name codec; a value no
    directory can hold (NUL, lone surrogate, over 255 bytes escaped) rejects the record."""
    if value is None:
        return None
    try:
        check_partition_value(key, value)
    except SerializationError as e:
        raise record_error(
            f"partition column {key!r}: value {_shown(raw)!r}: {e}", record
        ) from None
    return value


def partition_columns(
    schema: TableSchema, columns: PartitionColumns
) -> tuple[tuple[str, ...], tuple[HiveType, ...]]:
    """Normalize ``bind``'s partition columns: lower-case names and their Hive types."""
    names: list[str] = []
    types: list[HiveType] = []
    for c in columns:
        if isinstance(c, str):
            name, typ = c, HiveType("string")
        else:
            name, raw = c
            typ = raw if isinstance(raw, HiveType) else parse_hive_type(raw)
        names.append(name.strip().lower())
        check_partition_type(name, typ)
        types.append(typ)
    clash = set(names) & set(schema.names)
    if clash or len(set(names)) != len(names):
        raise ConfigError(f"partition columns {names!r} repeat or clash with table columns")
    return tuple(names), tuple(types)


def compile_line_pattern(pattern: str) -> None:
    """Validate a ``line_delimiter_pattern`` option."""
    try:
        re.compile(pattern)
    except re.error as e:
        raise ConfigError(f"bad line_delimiter_pattern {pattern!r}: {e}") from e
