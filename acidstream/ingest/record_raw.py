"""The ``raw`` record writer: each record is the value of the table's one column.

For streams whose records are opaque (logs, payloads kept verbatim): the table has a
single ``string`` (records must be UTF-8) or ``binary`` column and no partitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from acidstream.acid.errors import ConfigError, SerializationError
from acidstream.acid.schema import TableSchema
from acidstream.ingest.record_common import EncodedBlock

__all__ = ["RawWriter"]


@dataclass(frozen=True)
class _BoundRaw:
    as_text: bool
    arrow_type: pa.DataType

    def encode(self, record: bytes) -> tuple[tuple[Any, ...], tuple[str | None, ...]]:
        if not self.as_text:
            return (record,), ()
        try:
            return (record.decode("utf-8"),), ()
        except UnicodeDecodeError as e:
            raise SerializationError(f"raw value is not UTF-8 text: {e}", record=record) from e

    def encode_block(self, records: Sequence[bytes]) -> EncodedBlock:
        arr = pa.array(records, pa.binary())
        good = list(range(len(records)))
        rejected: list[tuple[int, SerializationError]] = []
        if self.as_text:
            try:
                arr = arr.cast(pa.string())
            except pa.ArrowInvalid:
                # Some record is not UTF-8: find which, keep the others.
                good = []
                for i, r in enumerate(records):
                    try:
                        self.encode(r)
                        good.append(i)
                    except SerializationError as e:
                        rejected.append((i, e))
                arr = pa.array([records[i] for i in good], pa.binary()).cast(pa.string())
        table = pa.table([arr.cast(self.arrow_type)], names=["value"])
        return EncodedBlock(
            table=table,
            partitions=None,
            rejected=tuple(rejected),
            good_indices=pa.array(good, pa.int64()),
        )


class RawWriter:
    """Binds to a table with one ``string``/``varchar``/``binary`` column and no partitions."""

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
        return _BoundRaw(as_text=kind != "binary", arrow_type=schema.columns[0][1].to_arrow())
