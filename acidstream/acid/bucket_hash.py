"""Hive's bucket assignment for bucketed (``CLUSTERED BY``) tables.

A row of a bucketed table must land in ``bucket_N`` where ``N`` is exactly the
number Hive would compute, otherwise bucket map joins, bucket pruning and
compaction see rows in the wrong file. Hive has two schemes, chosen by the table
property ``bucketing_version`` (spec §7.3):

* **2** (Hive 3+ default): ``ObjectInspectorUtils.getBucketNumber`` over
  ``getBucketHashCode``, whose per-field hash is ``hashCodeMurmur``.
* **1** (legacy): ``getBucketNumberOld`` over ``getBucketHashCodeOld``, whose
  per-field hash is the legacy ``ObjectInspectorUtils.hashCode``.

Both combine fields as ``h = 31 * h + fieldHash`` (Java ``int`` arithmetic) and
map the result with ``(h & Integer.MAX_VALUE) % numBuckets``.

Sources followed (apache/hive unless noted):
``serde/.../objectinspector/ObjectInspectorUtils.java`` (hashCode, hashCodeMurmur,
getBucketHashCode[Old], getBucketNumber[Old]),
``storage-api/.../hive/common/util/Murmur3.java`` (hash32, DEFAULT_SEED 104729),
``serde/.../io/TimestampWritableV2.java`` (hashCode, getBytes),
``serde/.../io/DateWritableV2.java``, ``serde/.../io/HiveCharWritable.java``,
``serde/.../io/HiveBaseCharWritable.java``, ``storage-api/.../HiveDecimalWritable.java``
(hashCode -> BigDecimal.hashCode, getInternalStorage -> BigInteger bytes),
``FastHiveDecimalImpl.java`` and Hadoop ``WritableComparator.hashBytes``. The
Trino port (trinodb/trino ``HiveBucketingV1/V2.java``) was used as a cross-check.

Python values are those the record writers produce: ``bool``, ``int``,
``float``, ``str``, ``bytes``, ``decimal.Decimal``, ``datetime.date``, naive
``datetime.datetime``, ``list``, ``dict`` and ``tuple`` (struct).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import struct
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pyarrow as pa

from acidstream.acid.errors import ConfigError
from acidstream.acid.schema import HiveType

__all__ = [
    "HIVE_MURMUR3_SEED",
    "bucket_hash_code",
    "bucket_number",
    "bucket_numbers",
    "bucket_numbers_arrow",
    "hive_murmur3_32",
    "murmur3_32",
]

#: ``Murmur3.DEFAULT_SEED`` in Hive's storage-api.
HIVE_MURMUR3_SEED = 104729

_M32 = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_DATE = _dt.date(1970, 1, 1)

_Hasher = Callable[[object], int]


def _i32(x: int) -> int:
    """Wrap to a signed 32-bit value, as Java ``int`` arithmetic does."""
    return ((x + 0x80000000) & _M32) - 0x80000000


def _murmur3(data: bytes, seed: int, *, sign_extend_tail: bool) -> int:
    h = seed & _M32
    n = len(data)
    nblocks = n >> 2
    # The 4-byte body reads little-endian words; unpack them all at once.
    for (k,) in struct.iter_unpack("<I", data[: nblocks << 2]):
        k = (k * _C1) & _M32
        k = ((k << 15) | (k >> 17)) & _M32
        k = (k * _C2) & _M32
        h ^= k
        h = ((h << 13) | (h >> 19)) & _M32
        h = (h * 5 + 0xE6546B64) & _M32
    tail = data[nblocks << 2 :]
    if tail:
        k1 = 0
        for i in range(len(tail) - 1, -1, -1):
            b = tail[i]
            if sign_extend_tail and b >= 0x80:
                # Hive's Murmur3.hash32 does ``k1 ^= data[i] << shift`` on a
                # signed Java byte, so a tail byte >= 0x80 is sign-extended.
                # Hive kept this for compatibility; we must reproduce it.
                b -= 0x100
            k1 ^= (b << (8 * i)) & _M32
        k1 = (k1 * _C1) & _M32
        k1 = ((k1 << 15) | (k1 >> 17)) & _M32
        k1 = (k1 * _C2) & _M32
        h ^= k1
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return _i32(h)


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """Reference MurmurHash3 x86_32 (signed result), as published by smhasher.

    Args:
        data: The bytes to hash.
        seed: The 32-bit seed.

    Returns:
        The hash as a signed 32-bit integer.
    """
    return _murmur3(bytes(data), seed, sign_extend_tail=False)


def hive_murmur3_32(data: bytes, seed: int = HIVE_MURMUR3_SEED) -> int:
    """Hive's ``Murmur3.hash32``: MurmurHash3 x86_32 with Hive's seed and tail quirk.

    It equals the reference algorithm except when one of the last ``len % 4``
    bytes is >= 0x80 (Hive sign-extends those bytes).

    Args:
        data: The bytes to hash.
        seed: The seed; Hive's bucketing always uses 104729.

    Returns:
        The hash as a signed 32-bit integer (Java ``int``).
    """
    return _murmur3(bytes(data), seed, sign_extend_tail=True)


# --------------------------------------------------------------------------
# Helpers shared by both versions


def _hash_bytes_hadoop(data: bytes) -> int:
    """Hadoop ``WritableComparator.hashBytes``: ``h = 1; h = 31*h + (signed byte)``."""
    h = 1
    for b in data:
        h = (31 * h + (b - 256 if b >= 0x80 else b)) & _M32
    return _i32(h)


def _hash_string_v1(data: bytes) -> int:
    # ObjectInspectorUtils.hashCode STRING starts from 0, not 1 like hashBytes.
    h = 0
    for b in data:
        h = (31 * h + (b - 256 if b >= 0x80 else b)) & _M32
    return _i32(h)


def _float_bits(v: float) -> int:
    """Java ``Float.floatToIntBits`` (NaN canonicalised) as a signed int."""
    if math.isnan(v):
        return 0x7FC00000
    return int(struct.unpack(">i", struct.pack(">f", v))[0])


def _double_bits(v: float) -> int:
    """Java ``Double.doubleToLongBits`` (NaN canonicalised) as a signed long."""
    if math.isnan(v):
        return 0x7FF8000000000000
    return int(struct.unpack(">q", struct.pack(">d", v))[0])


def _long_hash(a: int) -> int:
    """Java ``(int) ((a >>> 32) ^ a)`` for a signed 64-bit ``a``."""
    u = a & 0xFFFFFFFFFFFFFFFF
    return _i32((u >> 32) ^ u)


def _strip_char(v: str) -> str:
    # HiveCharWritable.getStrippedValue strips trailing spaces only.
    return v.rstrip(" ")


def _normalized_decimal(v: decimal.Decimal) -> tuple[int, int]:
    """HiveDecimal's normal form as ``(unscaled, scale)``: no trailing zeros, scale >= 0."""
    if not v.is_finite():
        raise ValueError(f"cannot bucket non-finite decimal {v}")
    sign, digits, exp = v.as_tuple()
    assert isinstance(exp, int)
    unscaled = int("".join(map(str, digits)) or "0")
    scale = -exp
    if unscaled == 0:
        return 0, 0
    while scale > 0 and unscaled % 10 == 0:
        unscaled //= 10
        scale -= 1
    if scale < 0:
        unscaled *= 10**-scale
        scale = 0
    return (-unscaled if sign else unscaled), scale


def _biginteger_bytes(n: int) -> bytes:
    """Java ``BigInteger.toByteArray``: minimal big-endian two's complement."""
    java_bit_length = (n if n >= 0 else ~n).bit_length()
    return n.to_bytes(java_bit_length // 8 + 1, "big", signed=True)


def _biginteger_hash(n: int) -> int:
    """Java ``BigInteger.hashCode``: 31-fold over 32-bit magnitude words, times signum."""
    mag = abs(n)
    words: list[int] = []
    while mag:
        words.append(mag & _M32)
        mag >>= 32
    h = 0
    for w in reversed(words):
        h = (31 * h + w) & _M32
    return _i32(h * (1 if n > 0 else -1 if n < 0 else 0))


def _epoch_seconds_nanos(v: _dt.datetime) -> tuple[int, int]:
    if v.tzinfo is not None:
        raise ValueError("Hive timestamps are zone-less; pass a naive datetime")
    delta = v - _EPOCH
    seconds = delta.days * 86400 + delta.seconds
    return seconds, delta.microseconds * 1000


def _write_vlong(out: bytearray, value: int) -> None:
    """Hadoop ``WritableUtils.writeVLong`` / LazyBinaryUtils.writeVLongToByteArray."""
    if -112 <= value <= 127:
        out.append(value & 0xFF)
        return
    length = -112
    if value < 0:
        value ^= -1
        length = -120
    tmp = value
    while tmp:
        tmp >>= 8
        length -= 1
    out.append(length & 0xFF)
    nbytes = -(length + 120) if length < -120 else -(length + 112)
    out += value.to_bytes(nbytes, "big")


def _timestamp_writable_bytes(v: _dt.datetime) -> bytes:
    """``TimestampWritableV2.getBytes()`` (convertTimestampToBytes) for ``v``."""
    seconds, nanos = _epoch_seconds_nanos(v)
    has_second_vint = seconds < 0 or seconds > 0x7FFFFFFF
    # The nanos are stored with their 9 decimal digits reversed (0.1s -> 1).
    reversed_nanos = int(f"{nanos:09d}"[::-1]) if nanos else 0
    rest = bytearray()
    if has_second_vint or reversed_nanos:
        _write_vlong(rest, -reversed_nanos - 1 if has_second_vint else reversed_nanos)
    first = seconds & _M32
    if reversed_nanos or has_second_vint:
        first |= 0x80000000
    else:
        first &= 0x7FFFFFFF
    if has_second_vint:
        _write_vlong(rest, seconds >> 31)
    return first.to_bytes(4, "big") + bytes(rest)


def _days(v: _dt.date) -> int:
    if isinstance(v, _dt.datetime):
        v = v.date()
    return (v - _EPOCH_DATE).days


# --------------------------------------------------------------------------
# Version 1: ObjectInspectorUtils.hashCode


def _v1_hasher(t: HiveType) -> _Hasher:
    k = t.kind
    if k == "boolean":
        return lambda v: 1 if v else 0
    if k in ("tinyint", "smallint", "int"):
        return lambda v: _i32(int(v))  # type: ignore[call-overload]
    if k == "bigint":
        return lambda v: _long_hash(int(v))  # type: ignore[call-overload]
    if k == "float":
        return lambda v: _float_bits(float(v))  # type: ignore[arg-type]
    if k == "double":
        return lambda v: _long_hash(_double_bits(float(v)))  # type: ignore[arg-type]
    if k == "string":
        return lambda v: _hash_string_v1(str(v).encode("utf-8"))
    if k == "varchar":
        # HiveVarcharWritable.hashCode -> Text.hashCode -> WritableComparator.hashBytes.
        return lambda v: _hash_bytes_hadoop(str(v).encode("utf-8"))
    if k == "char":
        return lambda v: _hash_bytes_hadoop(_strip_char(str(v)).encode("utf-8"))
    if k == "binary":
        return lambda v: _hash_bytes_hadoop(bytes(v))  # type: ignore[call-overload]
    if k == "date":
        return lambda v: _i32(_days(v))  # type: ignore[arg-type]
    if k == "timestamp":

        def ts(v: object) -> int:
            assert isinstance(v, _dt.datetime)
            seconds, nanos = _epoch_seconds_nanos(v)
            packed = ((seconds << 30) | nanos) & 0xFFFFFFFFFFFFFFFF
            return _i32((packed >> 32) ^ packed)

        return ts
    if k == "decimal":

        def dec(v: object) -> int:
            unscaled, scale = _normalized_decimal(decimal.Decimal(v))  # type: ignore[arg-type]
            # BigDecimal.hashCode = 31 * unscaledValue.hashCode() + scale.
            return _i32(31 * _biginteger_hash(unscaled) + scale)

        return dec
    return _complex_hasher(t, _v1_hasher, _v1_hasher)


# --------------------------------------------------------------------------
# Version 2: ObjectInspectorUtils.hashCodeMurmur


def _v2_hasher(t: HiveType) -> _Hasher:
    k = t.kind
    m = hive_murmur3_32
    if k == "boolean":
        return lambda v: 1 if v else 0
    if k == "tinyint":
        # BYTE is returned as-is, not murmured.
        return lambda v: _i32(int(v))  # type: ignore[call-overload]
    if k == "smallint":
        return lambda v: m(struct.pack(">h", v))
    if k == "int":
        return lambda v: m(struct.pack(">i", v))
    if k == "bigint":
        return lambda v: m(struct.pack(">q", v))
    if k == "float":
        # ``byteBuffer.putFloat(Float.floatToIntBits(f))`` widens the int bits
        # back to a float (int -> float rounding) before writing them: sic.
        return lambda v: m(struct.pack(">f", float(_float_bits(float(v)))))  # type: ignore[arg-type]
    if k == "double":
        # Same quirk: ``putDouble(Double.doubleToLongBits(d))`` (long -> double).
        return lambda v: m(struct.pack(">d", float(_double_bits(float(v)))))  # type: ignore[arg-type]
    if k in ("string", "varchar"):
        return lambda v: m(str(v).encode("utf-8"))
    if k == "char":
        return lambda v: m(_strip_char(str(v)).encode("utf-8"))
    if k == "binary":
        return lambda v: m(bytes(v))  # type: ignore[call-overload]
    if k == "date":
        return lambda v: m(struct.pack(">i", _days(v)))  # type: ignore[arg-type]
    if k == "timestamp":
        return lambda v: m(_timestamp_writable_bytes(v))  # type: ignore[arg-type]
    if k == "decimal":
        return lambda v: m(_biginteger_bytes(_normalized_decimal(decimal.Decimal(v))[0]))  # type: ignore[arg-type]
    # Map values use the *legacy* hash even in version 2 (Hive's code does so).
    return _complex_hasher(t, _v2_hasher, _v1_hasher)


def _complex_hasher(
    t: HiveType,
    child: Callable[[HiveType], _Hasher],
    map_value: Callable[[HiveType], _Hasher],
) -> _Hasher:
    k = t.kind
    if k == "array":
        elem = _nullable(child(t.children[0]))

        def arr(v: object) -> int:
            h = 0
            for e in v:  # type: ignore[attr-defined]
                h = (31 * h + elem(e)) & _M32
            return _i32(h)

        return arr
    if k == "map":
        key = _nullable(child(t.children[0]))
        val = _nullable(map_value(t.children[1]))

        def mp(v: object) -> int:
            h = 0
            for kk, vv in v.items():  # type: ignore[attr-defined]
                h = (h + (key(kk) ^ val(vv))) & _M32
            return _i32(h)

        return mp
    if k == "struct":
        fields = [_nullable(child(c)) for c in t.children]
        names = t.field_names

        def st(v: object) -> int:
            vals = [v.get(n) for n in names] if isinstance(v, dict) else list(v)  # type: ignore[call-overload]
            h = 0
            for f, fv in zip(fields, vals, strict=True):
                h = (31 * h + f(fv)) & _M32
            return _i32(h)

        return st
    raise ConfigError(f"Hive cannot bucket on type {t}")


def _nullable(h: _Hasher) -> _Hasher:
    return lambda v: 0 if v is None else h(v)


def _plan(types: Sequence[HiveType], bucketing_version: int) -> list[_Hasher]:
    if bucketing_version == 2:
        return [_nullable(_v2_hasher(t)) for t in types]
    if bucketing_version == 1:
        return [_nullable(_v1_hasher(t)) for t in types]
    raise ConfigError(f"bucketing_version must be 1 or 2, got {bucketing_version!r}")


def _combine(plan: list[_Hasher], values: Sequence[object]) -> int:
    if len(values) != len(plan):
        raise ConfigError(f"expected {len(plan)} bucket column values, got {len(values)}")
    h = 0
    for f, v in zip(plan, values, strict=True):
        h = (31 * h + f(v)) & _M32
    return _i32(h)


def bucket_hash_code(
    values: Sequence[object], types: Sequence[HiveType], *, bucketing_version: int = 2
) -> int:
    """Hive's ``getBucketHashCode`` (v2) or ``getBucketHashCodeOld`` (v1).

    Args:
        values: One row's bucket-column values, in ``CLUSTERED BY`` order.
        types: The Hive types of those columns.
        bucketing_version: The table's ``bucketing_version`` (1 or 2).

    Returns:
        The combined hash as a signed 32-bit integer.
    """
    return _combine(_plan(types, bucketing_version), values)


def _to_bucket(h: int, num_buckets: int) -> int:
    return (h & 0x7FFFFFFF) % num_buckets


def _check_buckets(num_buckets: int) -> None:
    if num_buckets <= 0:
        raise ConfigError(f"number of buckets must be > 0, got {num_buckets}")


def bucket_number(
    values: Sequence[object],
    types: Sequence[HiveType],
    num_buckets: int,
    *,
    bucketing_version: int = 2,
) -> int:
    """The bucket Hive assigns to one row.

    Args:
        values: The row's bucket-column values (``None`` for NULL).
        types: The Hive types of the bucket columns.
        num_buckets: The table's bucket count (> 0).
        bucketing_version: 2 (Murmur3, Hive 3+) or 1 (legacy hashCode).

    Returns:
        ``(hash & Integer.MAX_VALUE) % num_buckets``.
    """
    _check_buckets(num_buckets)
    return _to_bucket(
        bucket_hash_code(values, types, bucketing_version=bucketing_version), num_buckets
    )


def bucket_numbers(
    rows: Iterable[Sequence[object]],
    types: Sequence[HiveType],
    num_buckets: int,
    *,
    bucketing_version: int = 2,
) -> list[int]:
    """Bucket numbers for many rows; the per-type hash plan is built once.

    Args:
        rows: Each row's bucket-column values.
        types: The Hive types of the bucket columns.
        num_buckets: The table's bucket count (> 0).
        bucketing_version: 2 (Murmur3) or 1 (legacy).

    Returns:
        One bucket number per row, in input order.
    """
    _check_buckets(num_buckets)
    plan = _plan(types, bucketing_version)
    return [_to_bucket(_combine(plan, row), num_buckets) for row in rows]


# --------------------------------------------------------------------------
# Columns at a time: integer-like bucketing columns hashed with numpy


#: Types :func:`bucket_numbers_arrow` hashes column-wise (fixed-width, no per-value
#: conversion): everything else goes row by row through :func:`bucket_numbers`.
VECTOR_KINDS = frozenset({"boolean", "tinyint", "smallint", "int", "bigint", "date"})


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _murmur3_words(words: Sequence[np.ndarray], tail: np.ndarray | None, n: int) -> np.ndarray:
    """Hive's ``Murmur3.hash32`` of ``n``-byte values given as their little-endian 4-byte
    body words (uint32 arrays) and the tail's ``k1`` (uint32, Hive's sign extension
    applied): :func:`_murmur3` with numpy's wrapping uint32 arithmetic."""
    size = len(words[0]) if words else len(tail) if tail is not None else 0
    h = np.full(size, HIVE_MURMUR3_SEED, dtype=np.uint32)
    c1, c2 = np.uint32(_C1), np.uint32(_C2)
    for k in words:
        k = _rotl(k * c1, 15) * c2
        h ^= k
        h = _rotl(h, 13) * np.uint32(5) + np.uint32(0xE6546B64)
    if tail is not None:
        h ^= _rotl(tail * c1, 15) * c2
    h ^= np.uint32(n)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h


def _column_hash(values: np.ndarray, kind: str, bucketing_version: int) -> np.ndarray:
    """Per-value hash (uint32 bits of Hive's ``int``) of a non-null integer-like column."""
    if kind == "boolean":
        return values.astype(np.uint32)
    if kind == "bigint":
        v = values.astype(np.int64)
        if bucketing_version == 1:  # (int) ((a >>> 32) ^ a)
            u = v.view(np.uint64)
            return ((u >> np.uint64(32)) ^ u).astype(np.uint32)
        w = v.astype(">i8").view("<u4").reshape(-1, 2)  # the big-endian bytes, read as LE words
        return _murmur3_words([w[:, 0].copy(), w[:, 1].copy()], None, 8)
    if kind in ("int", "date"):
        v32 = values.astype(np.int32)
        if bucketing_version == 1:
            return v32.view(np.uint32)
        return _murmur3_words([v32.astype(">i4").view("<u4")], None, 4)
    if kind == "tinyint" or bucketing_version == 1:  # tinyint as is, in both versions
        return values.astype(np.int32).view(np.uint32)
    # smallint, version 2: two big-endian bytes, all tail; Hive sign-extends tail bytes.
    be = values.astype(">i2").view(np.uint8).reshape(-1, 2)
    b0 = be[:, 0].astype(np.int8).astype(np.int32).view(np.uint32)
    b1 = be[:, 1].astype(np.int8).astype(np.int32).view(np.uint32)
    return _murmur3_words([], (b1 << np.uint32(8)) ^ b0, 2)


def bucket_numbers_arrow(
    columns: Sequence[pa.Array | pa.ChunkedArray],
    types: Sequence[HiveType],
    num_buckets: int,
    *,
    bucketing_version: int = 2,
) -> np.ndarray | None:
    """Bucket numbers of every row of Arrow columns, hashed a column at a time: the same
    numbers as :func:`bucket_numbers` on the rows (NULL hashes to 0), without Python
    objects per row. Used by writers of bucketed tables for their rows' buckets.

    Args:
        columns: The bucketing columns, in ``CLUSTERED BY`` order, of equal length.
        types: Their Hive types.
        num_buckets: The table's bucket count (> 0).
        bucketing_version: 2 (Murmur3) or 1 (legacy).

    Returns:
        An int32 array of bucket numbers, or ``None`` when a column's type is not one of
        :data:`VECTOR_KINDS` (the caller hashes row by row).
    """
    _check_buckets(num_buckets)
    if bucketing_version not in (1, 2):
        raise ConfigError(f"bucketing_version must be 1 or 2, got {bucketing_version!r}")
    if len(columns) != len(types):
        raise ConfigError(f"expected {len(types)} bucket columns, got {len(columns)}")
    if not all(t.kind in VECTOR_KINDS for t in types):
        return None
    n = len(columns[0]) if columns else 0
    h = np.zeros(n, dtype=np.uint32)
    for col, t in zip(columns, types, strict=True):
        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if not (
            pa.types.is_integer(arr.type) or pa.types.is_boolean(arr.type)
            or pa.types.is_date32(arr.type)
        ):  # fmt: skip
            return None  # values not yet typed as the column: the row-wise path converts
        if t.kind == "date":
            arr = arr.cast(pa.int32())
        elif t.kind == "boolean":
            arr = arr.cast(pa.uint8())
        valid = None if arr.null_count == 0 else arr.is_valid().to_numpy(zero_copy_only=False)
        values = arr.fill_null(0).to_numpy(zero_copy_only=False) if valid is not None else (
            arr.to_numpy(zero_copy_only=False)
        )  # fmt: skip
        fh = _column_hash(values, t.kind, bucketing_version)
        if valid is not None:
            fh = np.where(valid, fh, np.uint32(0))
        h = h * np.uint32(31) + fh  # Java int arithmetic: h = 31 * h + fieldHash
    return ((h & np.uint32(0x7FFFFFFF)) % np.uint32(num_buckets)).astype(np.int32)
