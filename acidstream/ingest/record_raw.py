"""The ``raw`` record writer: each record is the value of the table's one column.

For streams whose records are opaque (logs, payloads kept verbatim): the table has a
single ``string`` (records must be UTF-8) or ``binary`` column and no partitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.errors import ConfigError, SerializationError
from acidstream.acid.schema import TableSchema
from acidstream.ingest.record_common import (
    DEFAULT_LINE_DELIMITER_PATTERN,
    DEFAULT_MAX_RECORD_BYTES,
    EncodedBlock,
    check_max_record_bytes,
    check_record_size,
)

__all__ = ["RawWriter"]


@dataclass(frozen=True)
class _BoundRaw:
    as_text: bool
    arrow_type: pa.DataType
    max_record_bytes: int

    def encode(self, record: bytes) -> tuple[tuple[Any, ...], tuple[str | None, ...]]:
        check_record_size(record, self.max_record_bytes)
        if not self.as_text:
            return (record,), ()
        try:
            return (record.decode("utf-8"),), ()
        except UnicodeDecodeError as e:
            raise SerializationError(f"raw value is not UTF-8 text: {e}", record=record) from e

    def encode_block(self, records: Sequence[bytes]) -> EncodedBlock:
        arr = pa.array(records, pa.binary())
        longest = pc.max(pc.binary_length(arr)).as_py() if records else 0
        if longest <= self.max_record_bytes:
            try:
                whole = arr.cast(pa.string()) if self.as_text else arr
                return self._block(whole, list(range(len(records))), [])
            except pa.ArrowInvalid:
                pass
        # Some record is not UTF-8 or too long: find which (with encode's errors), keep
        # the others.
        good: list[int] = []
        rejected: list[tuple[int, SerializationError]] = []
        for i, r in enumerate(records):
            try:
                self.encode(r)
                good.append(i)
            except SerializationError as e:
                rejected.append((i, e))
        kept = pa.array([records[i] for i in good], pa.binary())
        return self._block(kept.cast(pa.string()) if self.as_text else kept, good, rejected)

    def _block(
        self, arr: pa.Array, good: list[int], rejected: list[tuple[int, SerializationError]]
    ) -> EncodedBlock:
        return EncodedBlock(
            table=pa.table([arr.cast(self.arrow_type)], names=["value"]),
            partitions=None,
            rejected=tuple(rejected),
            good_indices=pa.array(good, pa.int64()),
        )


@dataclass(frozen=True, kw_only=True)
class RawWriter:
    """Binds to a table with one ``string``/``varchar``/``binary`` column and no partitions.

    Attributes:
        line_delimiter_pattern: For ``split_records`` (default ``[\\r\\n]``).
        max_record_bytes: Longer records are rejected (default 16 MiB), as by the other
            writers.
    """

    line_delimiter_pattern: str = DEFAULT_LINE_DELIMITER_PATTERN
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES

    def __post_init__(self) -> None:
        check_max_record_bytes(self.max_record_bytes)

    def bind(self, schema: TableSchema, *, partition_columns: Any = ()) -> _BoundRaw:
        kind = schema.columns[0][1].kind
        if (
            partition_columns
            or len(schema.columns) != 1
            or kind not in ("string", "binary", "varchar")
        ):
            raise ConfigError(
                "format raw needs an unpartitioned table with one string or binary column"
            )
        return _BoundRaw(
            as_text=kind != "binary",
            arrow_type=schema.columns[0][1].to_arrow(),
            max_record_bytes=self.max_record_bytes,
        )
