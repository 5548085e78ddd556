"""Hive values as strict, unambiguous JSON (``acidstream read --format jsonl`` and ``dump``).

Every output line parses with a strict JSON parser (no ``NaN``/``Infinity`` literals)
and each Hive type has one form (``docs/reading.md``, "JSON output"):

==================  ============================================================
Hive type           JSON
==================  ============================================================
boolean             ``true`` / ``false``
tinyint..bigint     number (exact integer)
float, double       number (float: its shortest float32 form); NaN and infinities
                    as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
decimal(p,s)        string in plain notation with the column's scale (``"-0.000000000000000001"``)
string, varchar,    string (char keeps its padding)
char
binary              string, base64 (always, whatever the bytes)
date                string ``YYYY-MM-DD`` (years 0001..9999, four digits)
timestamp           string ``YYYY-MM-DDTHH:MM:SS[.ffffff]`` (ISO 8601, UTC wall clock;
                    the fraction only when non-zero, 9 digits when read in ns)
array               array
struct              object (field names as keys)
map                 object when the key type is a string type; otherwise an array
                    of ``{"key": k, "value": v}`` objects
NULL                ``null``
==================  ============================================================
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from acidstream.acid.errors import AcidFormatError

__all__ = ["json_converter", "json_dumps", "json_lines", "json_rows"]

Converter = Callable[[Any], Any]

# Rows converted per Python step: bounds the Python objects alive at once.
_SLICE_ROWS = 4096


def _identity(v: Any) -> Any:
    return v


def _double(v: Any) -> Any:
    if v is None or math.isfinite(v):
        return v
    if math.isnan(v):
        return "NaN"
    return "Infinity" if v > 0 else "-Infinity"


def _float32(v: Any) -> Any:
    if v is None or not math.isfinite(v):
        return _double(v)
    return float(str(np.float32(v)))  # 0.1f prints as 0.1, not 0.10000000149011612


def _decimal(v: decimal.Decimal | None) -> str | None:
    return None if v is None else format(v, "f")


def _binary(v: bytes | None) -> str | None:
    return None if v is None else base64.b64encode(v).decode("ascii")


def _temporal(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, dt.datetime):
        nanos = int(getattr(v, "nanosecond", 0))
        if hasattr(v, "nanosecond") and (nanos or v.microsecond):
            # pandas.Timestamp (a nanosecond read): all nine digits.
            base = v.replace(microsecond=0, tzinfo=None).isoformat().split(".")[0]
            return f"{base}.{v.microsecond * 1000 + nanos:09d}"
        return v.replace(tzinfo=None).isoformat()
    if isinstance(v, dt.date):
        return v.isoformat()
    return str(v)


def json_converter(typ: pa.DataType) -> Converter:
    """A function from one ``to_pylist()`` value of ``typ`` to its JSON-ready form."""
    if pa.types.is_float32(typ):
        return _float32
    if pa.types.is_floating(typ):
        return _double
    if pa.types.is_decimal(typ):
        return _decimal
    if (
        pa.types.is_binary(typ)
        or pa.types.is_large_binary(typ)
        or pa.types.is_fixed_size_binary(typ)
    ):
        return _binary
    if pa.types.is_timestamp(typ) or pa.types.is_date(typ) or pa.types.is_time(typ):
        return _temporal
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        elem = json_converter(typ.value_type)
        return lambda v: None if v is None else [elem(x) for x in v]
    if pa.types.is_map(typ):
        key, item = json_converter(typ.key_type), json_converter(typ.item_type)
        if pa.types.is_string(typ.key_type) or pa.types.is_large_string(typ.key_type):
            return lambda v: None if v is None else {k: item(x) for k, x in v}
        return lambda v: None if v is None else [{"key": key(k), "value": item(x)} for k, x in v]
    if pa.types.is_struct(typ):
        fields = [
            (typ.field(i).name, json_converter(typ.field(i).type)) for i in range(typ.num_fields)
        ]
        return lambda v: None if v is None else {n: f(v.get(n)) for n, f in fields}
    return _identity


def json_rows(table: pa.Table | pa.RecordBatch) -> Iterator[dict[str, Any]]:
    """The rows of ``table`` as JSON-ready dicts, converted a slice at a time."""
    convs = [json_converter(f.type) for f in table.schema]
    names = table.schema.names
    for start in range(0, table.num_rows, _SLICE_ROWS):
        part = table.slice(start, _SLICE_ROWS)
        cols = [_column_values(part, i, c) for i, c in enumerate(convs)]
        for values in zip(*cols, strict=True):
            yield dict(zip(names, values, strict=True))


def _column_values(part: pa.Table | pa.RecordBatch, i: int, conv: Converter) -> list[Any]:
    try:
        values = part.column(i).to_pylist()
        return values if conv is _identity else [conv(v) for v in values]
    except (pa.ArrowException, decimal.InvalidOperation, OverflowError, ValueError) as e:
        # e.g. a decimal or date the Python types cannot hold
        name = part.schema.field(i).name
        raise AcidFormatError(f"column {name!r}: a value cannot be converted to JSON: {e}") from e


def json_dumps(obj: Any) -> str:
    """Compact strict JSON (``allow_nan=False``: a NaN that slipped through is an error)."""
    return json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def json_lines(table: pa.Table | pa.RecordBatch) -> Iterator[str]:
    """One JSON object per row of ``table`` (no newline)."""
    for row in json_rows(table):
        yield json_dumps(row)
