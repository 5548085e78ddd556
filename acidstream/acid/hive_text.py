"""Hive's text of a column value: what ``Writable.toString()`` prints, column at a time.

List bucketing compares a row's skewed values with the declared tuples as text
(``FileSinkOperator.generateListBucketingDirName``: ``standObj.toString()`` of the row
copied to writables, spec §8), so a writer must print each value exactly as Java does:

- integers as decimal digits, booleans ``true`` / ``false``, strings as they are,
  varchars cut to their length, chars cut and padded to their length (``HiveChar.toString`` is the padded value);
- ``double`` / ``float`` as ``Double.toString`` / ``Float.toString``: shortest digits,
  ``1.0`` (never ``1``), ``1.0E10`` / ``1.0E-5`` outside ``[1e-3, 1e7)``, ``NaN``,
  ``Infinity``;
- ``decimal`` as ``HiveDecimal`` prints it: trailing zeros trimmed (``1.50`` -> ``1.5``);
- ``date`` as ``yyyy-MM-dd``; ``timestamp`` as ``yyyy-MM-dd HH:mm:ss`` plus the
  fraction without trailing zeros when there is one;
- ``binary`` as ``BytesWritable`` prints it: hex bytes separated by spaces.

NULL stays NULL (it never matches a declared tuple). Integers, booleans, strings and
dates are cast by Arrow; the other types are printed once per distinct value (a
dictionary encoding), not once per row.
"""

from __future__ import annotations

import datetime
import decimal
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.schema import HiveType

__all__ = ["hive_text", "java_float_text"]

_CAST_KINDS = frozenset({"boolean", "tinyint", "smallint", "int", "bigint", "string", "date"})
_EPOCH = datetime.datetime(1970, 1, 1)


def java_float_text(x: float, *, single: bool = False) -> str:
    """``Double.toString(x)`` (``Float.toString`` with ``single``): shortest digits."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    v: Any = np.float32(x) if single else float(x)
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        return str(np.format_float_positional(v, unique=True, trim="0"))
    mant, exp = str(np.format_float_scientific(v, unique=True, trim="0")).split("e")
    return f"{mant}E{int(exp)}"


def _decimal_text(d: decimal.Decimal) -> str:
    s = format(d, "f")
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def _timestamp_text(units: int, per_second: int) -> str:
    secs, frac = divmod(units, per_second)
    t = _EPOCH + datetime.timedelta(seconds=secs)
    out = f"{t.year:04d}-{t.month:02d}-{t.day:02d} {t.hour:02d}:{t.minute:02d}:{t.second:02d}"
    if frac:
        nanos = frac * (1_000_000_000 // per_second)
        out += "." + f"{nanos:09d}".rstrip("0")
    return out


def _per_value(arr: pa.Array, fn: Callable[[Any], str]) -> pa.Array:
    """``fn`` applied once per distinct value of ``arr``, NULLs kept."""
    enc = pc.dictionary_encode(arr)
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    texts = pa.array(
        [None if v is None else fn(v) for v in enc.dictionary.to_pylist()], pa.string()
    )
    return pc.take(texts, enc.indices)


def hive_text(arr: pa.Array | pa.ChunkedArray, hive: HiveType) -> pa.Array:
    """Every value of ``arr`` (a column of Hive type ``hive``) as Hive prints it."""
    a = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    k = hive.kind
    if k in _CAST_KINDS:
        return a if pa.types.is_string(a.type) else pc.cast(a, pa.string())
    if k == "varchar":
        # The value as the file stores it (cut to the length), as Hive's row holds it.
        return pc.utf8_slice_codeunits(pc.cast(a, pa.string()), 0, hive.params[0])
    if k == "char":
        n = hive.params[0]
        return pc.utf8_rpad(pc.utf8_slice_codeunits(pc.cast(a, pa.string()), 0, n), n, " ")
    if k in ("float", "double"):
        single = k == "float"
        return _per_value(a, lambda v: java_float_text(v, single=single))
    if k == "decimal":
        return _per_value(a, _decimal_text)
    if k == "timestamp":
        unit = a.type.unit if pa.types.is_timestamp(a.type) else "us"
        per_second = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[unit]
        ints = pc.cast(a, pa.int64()) if pa.types.is_timestamp(a.type) else a
        return _per_value(ints, lambda v: _timestamp_text(v, per_second))
    if k == "binary":
        return _per_value(a, lambda v: " ".join(f"{b:02x}" for b in v))
    return _per_value(a, str)
