"""Hive's timestamp and date range (0001-01-01 .. 9999-12-31) in Arrow and ORC.

ORC stores a timestamp as seconds plus nanoseconds, so it holds every Hive value;
Arrow's ``timestamp[ns]`` holds only 1677-09-21 .. 2262-04-11, and Hive tables often
hold ``9999-12-31 23:59:59`` as "no end". acidstream therefore uses **microseconds**
(``timestamp[us]``, Spark's unit, all of Hive's range) as the Arrow type of a Hive
``timestamp`` unless a reader asks for nanoseconds (exact to the nanosecond, but only
for values inside that range). Timestamps are wall-clock values in UTC, as Hive 3+
writes and reads them (``LocalDateTime`` semantics), on the proleptic Gregorian
calendar that ORC's C++ library and Python's ``datetime`` use.

This module holds the unit choice, the cast of read columns to it, and the pyorc
converters: the one the pyorc engine writes Python ``datetime`` values with (exact,
whatever the machine's time zone), and the one the arrow engine's exact path writes
Arrow timestamps with after :func:`split_timestamps` (``acidstream.acid.file_writer``).

How ORC stores a timestamp before 1970 matters to Hive: seconds and a non-negative
nanosecond part, the seconds rounded toward zero when the fraction is at least a
millisecond (ORC Java's and ORC C++'s writers agree; their readers undo it).
pyarrow's ORC writer instead hands ORC C++ a *negative* nanosecond part for any
pre-1970 value with a fraction, which ORC Java refuses ("nanos > 999999999 or < 0");
the arrow engine therefore writes such values through pyorc with (floor seconds,
nanos) pairs, which ORC C++ encodes exactly as ORC Java would. One second is beyond
the format itself: 1969-12-31 23:59:59.001 .. .999999999 is written as Hive writes it
but every ORC reader (Hive's included) reads it back one second later.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyorc.converters import ORCConverter

from acidstream.acid.errors import AcidFormatError, ConfigError

__all__ = [
    "DEFAULT_TIMESTAMP_UNIT",
    "HiveTimestampConverter",
    "SplitTimestampConverter",
    "TimestampUnit",
    "cast_column",
    "check_timestamp_unit",
    "exact_pyorc_values",
    "has_pre_epoch_fraction",
    "split_timestamps",
    "with_timestamp_unit",
]

TimestampUnit = Literal["us", "ns"]
DEFAULT_TIMESTAMP_UNIT: TimestampUnit = "us"

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def check_timestamp_unit(unit: str) -> TimestampUnit:
    """``unit`` if it is ``"us"`` or ``"ns"``; a ``ConfigError`` otherwise."""
    if unit == "us":
        return "us"
    if unit == "ns":
        return "ns"
    raise ConfigError(f"timestamp_unit must be 'us' or 'ns', got {unit!r}")


def with_timestamp_unit(typ: pa.DataType, unit: TimestampUnit) -> pa.DataType:
    """``typ`` with every (nested) timestamp type at ``unit``, time-zone-less."""
    if pa.types.is_timestamp(typ):
        return pa.timestamp(unit)
    if pa.types.is_struct(typ):
        return pa.struct(
            [
                typ.field(i).with_type(with_timestamp_unit(typ.field(i).type, unit))
                for i in range(typ.num_fields)
            ]
        )
    if pa.types.is_map(typ):
        return pa.map_(
            with_timestamp_unit(typ.key_type, unit), with_timestamp_unit(typ.item_type, unit)
        )
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return pa.list_(with_timestamp_unit(typ.value_type, unit))
    return typ


def _has_timestamp(typ: pa.DataType) -> bool:
    return with_timestamp_unit(typ, "us") != with_timestamp_unit(typ, "ns")


def cast_column(col: pa.Array | pa.ChunkedArray, typ: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """``col`` as ``typ`` (a file column cast to the table's type).

    Timestamps going to a coarser unit are floored (sub-microsecond digits dropped, as
    Spark reads Hive's nanoseconds); every other conversion must be exact and raises
    ``AcidFormatError`` when a value does not fit.
    """
    if col.type.equals(typ):
        return col
    if pa.types.is_timestamp(col.type) and pa.types.is_timestamp(typ):
        unit = {"s": "second", "ms": "millisecond", "us": "microsecond", "ns": "nanosecond"}
        col = pc.floor_temporal(col, unit=unit[typ.unit])
    try:
        return pc.cast(col, typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        if _has_timestamp(typ) and not isinstance(e, pa.ArrowNotImplementedError):
            # Nested timestamps losing sub-unit digits: truncate them, as above.
            try:
                return pc.cast(col, typ, safe=False)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass
        raise AcidFormatError(f"cannot read a {col.type} column as {typ}: {e}") from e


class HiveTimestampConverter(ORCConverter):
    """pyorc converter for ``timestamp`` columns covering Hive's whole range exactly.

    pyorc's own converter goes through ``datetime.timestamp()``, which reads a naive
    value in the machine's local zone and fails before 1970 on some platforms and at
    0001-01-01 everywhere. Here a naive ``datetime`` is a UTC wall-clock value (what
    Hive stores); an aware one is converted to UTC; a ``pandas.Timestamp`` keeps its
    nanoseconds.
    """

    @staticmethod
    def to_orc(obj: Any, timezone: zoneinfo.ZoneInfo) -> tuple[int, int]:
        if not isinstance(obj, dt.datetime):
            raise TypeError(f"expected a datetime for a timestamp column, got {type(obj).__name__}")
        delta = obj - (_EPOCH if obj.tzinfo is None else _EPOCH_UTC)
        nanos = obj.microsecond * 1000 + int(getattr(obj, "nanosecond", 0))
        return delta.days * 86400 + delta.seconds, nanos

    @staticmethod
    def from_orc(seconds: int, nanoseconds: int, timezone: zoneinfo.ZoneInfo) -> dt.datetime:
        return _EPOCH + dt.timedelta(seconds=seconds, microseconds=nanoseconds // 1000)


_PER_SECOND = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}


def _floor_seconds_and_nanos(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A timestamp column as (floor seconds since the epoch, nanos 0..999,999,999), the
    pair ORC stores; NULLs as (0, 0)."""
    per = _PER_SECOND[arr.type.unit]
    v = pc.fill_null(arr.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    secs = np.floor_divide(v, per)
    return secs, (v - secs * per) * (1_000_000_000 // per)


def has_pre_epoch_fraction(arr: pa.Array) -> bool:
    """Whether any (nested) timestamp of ``arr`` is before 1970 with a sub-second part."""
    t = arr.type
    if pa.types.is_timestamp(t):
        per_second = _PER_SECOND[t.unit]
        v = pc.fill_null(arr.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        return bool(np.any((v < 0) & (v % per_second != 0)))
    if pa.types.is_map(t):
        return has_pre_epoch_fraction(arr.keys) or has_pre_epoch_fraction(arr.items)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return has_pre_epoch_fraction(arr.flatten())
    if pa.types.is_struct(t):
        return any(has_pre_epoch_fraction(arr.field(i)) for i in range(t.num_fields))
    return False


def split_timestamps(arr: pa.Array) -> pa.Array:
    """``arr`` with every (nested) timestamp turned into ``struct<s: int64, n: int64>``:
    floor seconds since 1970 and the non-negative nanoseconds after them, exact in any
    unit over Hive's whole range (:func:`exact_pyorc_values` turns their Python values
    into the tuples :class:`SplitTimestampConverter` hands pyorc).

    Map keys stay timestamps (a Python dict key must be hashable): they reach pyorc as
    ``datetime`` (or ``pandas.Timestamp`` for nanoseconds), which the converter also takes.
    """
    t = arr.type
    if pa.types.is_timestamp(t):
        secs, nanos = _floor_seconds_and_nanos(arr)
        return pa.StructArray.from_arrays(
            [pa.array(secs, pa.int64()), pa.array(nanos, pa.int64())],
            names=["s", "n"],
            mask=arr.is_null() if arr.null_count else None,
        )
    if pa.types.is_struct(t):
        children = [split_timestamps(c) for c in arr.flatten()]
        return pa.StructArray.from_arrays(
            children,
            fields=[t.field(i).with_type(c.type) for i, c in enumerate(children)],
            mask=arr.is_null() if arr.null_count else None,
        )
    if pa.types.is_map(t):
        # ``offsets`` of a sliced map still index its whole key and item children.
        return pa.MapArray.from_arrays(
            _fresh(arr.offsets),
            arr.keys,
            split_timestamps(arr.items),
            mask=arr.is_null() if arr.null_count else None,
        )
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
        return cls.from_arrays(
            _fresh(arr.offsets),
            split_timestamps(arr.values),
            mask=arr.is_null() if arr.null_count else None,
        )
    return arr


def _fresh(offsets: pa.Array) -> pa.Array:
    """A copy of a (sliced) offsets array: pyarrow builds a list with a validity mask
    only from offsets that are not a slice."""
    return pa.array(offsets.to_numpy(zero_copy_only=False), offsets.type)


def exact_pyorc_values(arr: pa.Array) -> list[Any]:
    """The Python values pyorc (``StructRepr.TUPLE``) writes ``arr`` from, timestamps
    exact: each a ``(floor seconds, nanos)`` tuple for :class:`SplitTimestampConverter`;
    structs as tuples, maps as dicts. A plain timestamp column takes two numpy passes
    and a zip; nested values take a Python walk (rare: the arrow engine's exact path)."""
    t = arr.type
    if pa.types.is_timestamp(t):
        secs, nanos = _floor_seconds_and_nanos(arr)
        out: list[Any] = list(zip(secs.tolist(), nanos.tolist(), strict=True))
        if arr.null_count:
            for i in np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False)).tolist():
                out[i] = None
        return out
    if not _has_timestamp(t) and not _has_struct(t):
        return list(arr.to_pylist(maps_as_pydicts="lossy"))
    split = split_timestamps(arr)
    return [_tupled(v, split.type) for v in split.to_pylist(maps_as_pydicts="lossy")]


def _has_struct(t: pa.DataType) -> bool:
    if pa.types.is_struct(t):
        return True
    if pa.types.is_map(t):
        return _has_struct(t.key_type) or _has_struct(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _has_struct(t.value_type)
    return False


def _tupled(v: Any, t: pa.DataType) -> Any:
    """A ``to_pylist`` value with structs (and split timestamps) as tuples."""
    if v is None:
        return None
    if pa.types.is_struct(t):
        return tuple(_tupled(v[t.field(i).name], t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return {k: _tupled(x, t.item_type) for k, x in v.items()}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_tupled(x, t.value_type) for x in v]
    return v


class SplitTimestampConverter(HiveTimestampConverter):
    """pyorc converter for the arrow engine's exact path: takes the ``(seconds, nanos)``
    tuples of :func:`exact_pyorc_values` as they are (and ``datetime`` values, such as
    timestamp map keys, as its parent does)."""

    @staticmethod
    def to_orc(obj: Any, timezone: zoneinfo.ZoneInfo) -> tuple[int, int]:
        if type(obj) is tuple:
            return obj
        return HiveTimestampConverter.to_orc(obj, timezone)
