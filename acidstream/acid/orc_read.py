"""Read ORC columns into Arrow across Hive's whole timestamp range.

pyarrow's ORC reader decodes timestamps to ``timestamp[ns]`` and fails with
``ArrowInvalid`` on values outside 1677..2262 (Hive's common ``9999-12-31``). Files
are read by pyarrow (fast, columnar); only when pyarrow refuses a file or stripe for
that reason is it decoded by pyorc (the same C++ ORC library, row by row in Python)
with timestamps as exact microseconds. Any other decoding failure becomes an
``AcidFormatError`` naming the file.
"""

from __future__ import annotations

import io
import zoneinfo
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.orc as orc
import pyorc
from pyorc.converters import ORCConverter

from acidstream.acid.errors import AcidFormatError
from acidstream.acid.storage import Storage
from acidstream.acid.timestamps import DEFAULT_TIMESTAMP_UNIT, TimestampUnit, with_timestamp_unit

__all__ = ["read_orc_columns"]

_UTC = zoneinfo.ZoneInfo("UTC")


def _is_out_of_range(e: Exception) -> bool:
    return "out of range" in str(e) and "nanosecond" in str(e)


def read_orc_columns(
    orcf: orc.ORCFile,
    *,
    storage: Storage,
    path: str,
    length: int | None,
    columns: Sequence[str] | None = None,
    stripe: int | None = None,
    timestamp_unit: TimestampUnit = DEFAULT_TIMESTAMP_UNIT,
) -> pa.Table:
    """``columns`` (pyarrow's names: top-level or ``row.x``; default all) of the whole
    file or of one stripe, from ``orcf`` (``path`` opened at logical ``length``).

    Timestamps come back as ``timestamp[ns]`` from the fast path and as
    ``timestamp[<timestamp_unit>]`` from the fallback; callers cast to their unit.

    Raises:
        AcidFormatError: the data cannot be decoded, or a timestamp is outside
            ``timestamp[ns]`` and ``timestamp_unit`` is ``"ns"``.
    """
    cols = list(columns) if columns is not None else None
    try:
        if stripe is None:
            return orcf.read(columns=cols)
        return pa.Table.from_batches([orcf.read_stripe(stripe, columns=cols)])
    except (FileNotFoundError, PermissionError):
        raise  # storage failures keep their standard types
    except (pa.ArrowException, OSError) as e:
        # Corrupt streams surface as ArrowInvalid, ArrowException ("Data error in
        # ZlibDecompressionStream") or OSError ("bad read in RleDecoderV2").
        if not (isinstance(e, pa.ArrowInvalid) and _is_out_of_range(e)):
            raise AcidFormatError(f"{path}: cannot decode ORC data: {e}") from e
        if timestamp_unit == "ns":
            raise AcidFormatError(
                f"{path}: a timestamp is outside the range of timestamp[ns] "
                f"(1677-09-21 .. 2262-04-11); read it with timestamp_unit='us': {e}"
            ) from e
    return _read_with_pyorc(
        orcf, storage=storage, path=path, length=length, columns=cols, stripe=stripe
    )


class _Micros(ORCConverter):
    """Timestamps as integer microseconds since the epoch (UTC wall clock), floored."""

    @staticmethod
    def from_orc(seconds: int, nanoseconds: int, timezone: zoneinfo.ZoneInfo) -> int:
        return seconds * 1_000_000 + nanoseconds // 1000

    @staticmethod
    def to_orc(*args: Any, **kwargs: Any) -> Any:  # never used: this converter only reads
        raise NotImplementedError


def _read_with_pyorc(
    orcf: orc.ORCFile,
    *,
    storage: Storage,
    path: str,
    length: int | None,
    columns: list[str] | None,
    stripe: int | None,
) -> pa.Table:
    heads: list[str] = []
    for c in columns if columns is not None else orcf.schema.names:
        head = c.split(".", 1)[0]
        if head not in heads:
            heads.append(head)
    # File order, as pyarrow returns top-level columns.
    heads.sort(key=orcf.schema.names.index)
    schema = pa.schema([orcf.schema.field(h) for h in heads])
    schema = pa.schema([f.with_type(with_timestamp_unit(f.type, "us")) for f in schema])
    data = storage.read_bytes(path, length=length)
    try:
        reader = pyorc.Reader(
            io.BytesIO(data),
            column_names=heads,
            timezone=_UTC,
            struct_repr=pyorc.StructRepr.DICT,
            converters={pyorc.TypeKind.TIMESTAMP: _Micros},
        )
        rows = list(reader.read_stripe(stripe) if stripe is not None else reader)
        return pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, TypeError, RuntimeError) as e:
        raise AcidFormatError(f"{path}: cannot decode ORC data: {e}") from e
