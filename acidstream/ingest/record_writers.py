"""Strict record writers: bytes -> typed row values (Hive Streaming §7.4).

Hive's streaming API ships three writers, each wrapping a SerDe:
``StrictDelimitedInputWriter`` (``LazySimpleSerDe``), ``StrictJsonWriter``
(``JsonSerDe`` / ``HiveJsonReader``) and ``StrictRegexWriter`` (``RegexSerDe``).
The Python equivalents turn one record into a tuple of Python values in table
column order plus the dynamic-partition values (input columns are the table
columns followed by the partition columns), or a whole block of records into
Arrow columns (:meth:`BoundRecordWriter.encode_block`).

The SerDes are lenient: an unparsable number becomes NULL, a non-matching regex
row becomes all-NULL, Jackson turns ``"abc"`` into ``0`` for an int column.
These writers are *strict*: anything Hive would silently turn into NULL or
garbage raises :class:`~acidstream.acid.errors.SerializationError` naming the column and
the value, while the cases Hive documents as NULL (missing trailing fields, the
null sequence ``\\N``, an empty field of a non-string type, JSON ``null`` or a
missing key) stay NULL. ``docs/record_writers.md`` lists every rule.

This module is the public face; the code lives in ``record_common`` (contract),
``record_convert`` (conversion rules), ``record_bulk`` (columnar conversion) and one
module per writer (``record_delimited``, ``record_json``, ``record_regex``, ``record_raw``).

:func:`record_writer_for` is the one factory from a format name to its writer, used by
``acidstream ingest``, the HTTP server, the Kafka job and the Spark sink's tasks, so a
format means the same everywhere and a setting it needs is refused the same way.
"""

from __future__ import annotations

from collections.abc import Mapping

from acidstream.acid.errors import ConfigError
from acidstream.ingest.record_bulk import block_arrow_type, block_schema
from acidstream.ingest.record_common import (
    DEFAULT_LINE_DELIMITER_PATTERN,
    DEFAULT_MAX_RECORD_BYTES,
    BoundRecordWriter,
    EncodedBlock,
    PartitionColumns,
    RecordWriter,
    split_records,
)
from acidstream.ingest.record_delimited import StrictDelimitedInputWriter
from acidstream.ingest.record_json import StrictJsonWriter
from acidstream.ingest.record_raw import RawWriter
from acidstream.ingest.record_regex import StrictRegexWriter

__all__ = [
    "DEFAULT_LINE_DELIMITER_PATTERN",
    "DEFAULT_MAX_RECORD_BYTES",
    "RECORD_FORMATS",
    "BoundRecordWriter",
    "EncodedBlock",
    "PartitionColumns",
    "RawWriter",
    "RecordWriter",
    "StrictDelimitedInputWriter",
    "StrictJsonWriter",
    "StrictRegexWriter",
    "block_arrow_type",
    "block_schema",
    "record_writer_for",
    "split_records",
]

RECORD_FORMATS = ("json", "delimited", "regex", "raw")
"""The record formats every entry point takes (``--format``, ``format:``, ``format``)."""

#: Hive's field delimiter (``LazySimpleSerDe``): ``\x01``.
HIVE_FIELD_DELIMITER = "\x01"


def record_writer_for(
    format: str,
    *,
    delimiter: str | None = None,
    regex: str | None = None,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    names: Mapping[str, str] | None = None,
) -> RecordWriter:
    """The record writer of ``format`` with the options it needs.

    Args:
        format: one of :data:`RECORD_FORMATS`.
        delimiter: ``delimited``'s field delimiter (default ``\x01``, Hive's).
        regex: ``regex``'s expression (one group per column); required for ``regex``.
        max_record_bytes: longer records are rejected before parsing.
        names: how the caller spells ``format`` and ``regex`` in messages (``--format``
            and ``--regex`` for the CLI; default ``format``, ``regex``).

    Raises:
        ConfigError: an unknown format, ``regex`` without a regex (``None`` or empty),
            or a setting the writer refuses (a regex that does not compile, a delimiter
            of two characters).
    """
    name = {"format": "format", "regex": "regex", **(names or {})}
    if format == "json":
        return StrictJsonWriter(max_record_bytes=max_record_bytes)
    if format == "delimited":
        return StrictDelimitedInputWriter(
            field_delimiter=HIVE_FIELD_DELIMITER if delimiter is None else delimiter,
            max_record_bytes=max_record_bytes,
        )
    if format == "regex":
        if not regex:
            raise ConfigError(f"{name['format']} regex needs {name['regex']}")
        return StrictRegexWriter(regex=regex, max_record_bytes=max_record_bytes)
    if format == "raw":
        return RawWriter(max_record_bytes=max_record_bytes)
    raise ConfigError(
        f"{name['format']} must be one of {', '.join(RECORD_FORMATS)}, got {format!r}"
    )
