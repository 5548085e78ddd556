"""Hive's type rules for SQL expressions over Arrow types: common types, implicit conversions.

What this is for: ``acid/sql_expr.py`` compiles predicates and SET expressions to Arrow;
where Arrow's own type promotion differs from Hive's (an integer next to a decimal, a SET
value narrower or wider than its column), the rules here decide. Format layer, pure
functions of Arrow types.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = [
    "CASTABLE",
    "INT_DIGITS",
    "INT_ORDER",
    "common_numeric",
    "hive_name",
    "is_integer",
    "parses_from_string",
    "widens",
]

INT_DIGITS = {pa.int8(): 3, pa.int16(): 5, pa.int32(): 10, pa.int64(): 19}
INT_ORDER = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]
# CAST may target these Hive types only: complex types have no SQL literal here and no use
# in a predicate or a SET expression of a primitive column.
CASTABLE = {
    "boolean", "tinyint", "smallint", "int", "bigint", "float", "double", "decimal",
    "string", "varchar", "char", "binary", "date", "timestamp",
}  # fmt: skip


def is_integer(t: pa.DataType) -> bool:
    """Any Arrow integer type (Hive's tinyint ... bigint)."""
    return pa.types.is_integer(t)


def parses_from_string(t: pa.DataType) -> bool:
    """The types a string literal converts to implicitly (Hive: DATE, TIMESTAMP, DECIMAL)."""
    return (
        pa.types.is_date(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_decimal(t)
        or t == pa.string()
    )


def common_numeric(types: list[pa.DataType]) -> pa.DataType | None:
    """The one type that holds every value of ``types`` when they are all numbers (Arrow's
    own promotion of int with decimal keeps the decimal's precision and then overflows);
    ``None`` when they are not all numbers."""
    if not types or not all(
        is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) for t in types
    ):
        return None
    if any(pa.types.is_floating(t) for t in types):
        return pa.float32() if all(t == pa.float32() for t in types) else pa.float64()
    decimals = [t for t in types if pa.types.is_decimal(t)]
    if not decimals:
        return max(types, key=INT_ORDER.index)
    scale = max(t.scale for t in decimals)
    whole = max(
        [t.precision - t.scale for t in decimals] + [INT_DIGITS[t] for t in types if is_integer(t)]
    )
    return pa.decimal128(min(whole + scale, 38), scale)


def widens(src: pa.DataType, dst: pa.DataType) -> bool:
    """Hive's implicit conversions that keep every value (or, for floating targets and
    decimal -> double, the ones Hive itself applies without a CAST)."""
    if is_integer(src):
        if is_integer(dst):
            return INT_ORDER.index(src) <= INT_ORDER.index(dst)
        if pa.types.is_floating(dst):
            return True
        if pa.types.is_decimal(dst):
            return bool(dst.precision - dst.scale >= INT_DIGITS[src])
    if pa.types.is_floating(src):
        return dst == pa.float64()
    if pa.types.is_decimal(src):
        if pa.types.is_decimal(dst):
            return bool(
                dst.scale >= src.scale and dst.precision - dst.scale >= src.precision - src.scale
            )
        return dst == pa.float64()
    if pa.types.is_date(src):
        return pa.types.is_timestamp(dst)
    if pa.types.is_timestamp(src):
        return pa.types.is_timestamp(dst)
    return False


def hive_name(t: pa.DataType) -> str:
    """The Hive name of an Arrow type, for error messages."""
    names = {
        pa.bool_(): "boolean", pa.int8(): "tinyint", pa.int16(): "smallint", pa.int32(): "int",
        pa.int64(): "bigint", pa.float32(): "float", pa.float64(): "double",
        pa.string(): "string", pa.binary(): "binary", pa.date32(): "date", pa.null(): "NULL",
    }  # fmt: skip
    if t in names:
        return names[t]
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamp"
    return str(t)
