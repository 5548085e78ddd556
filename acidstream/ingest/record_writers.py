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
module per writer (``record_delimited``, ``record_json``, ``record_regex``).
"""

from __future__ import annotations

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
from acidstream.ingest.record_regex import StrictRegexWriter

__all__ = [
    "DEFAULT_LINE_DELIMITER_PATTERN",
    "DEFAULT_MAX_RECORD_BYTES",
    "BoundRecordWriter",
    "EncodedBlock",
    "PartitionColumns",
    "RecordWriter",
    "StrictDelimitedInputWriter",
    "StrictJsonWriter",
    "StrictRegexWriter",
    "block_arrow_type",
    "block_schema",
    "split_records",
]
