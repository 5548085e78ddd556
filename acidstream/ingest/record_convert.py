"""Hive's text -> value conversion rules, written once for every record writer.

The per-record path (:meth:`encode`) calls these converters on each field; the bulk path
(``ingest/record_bulk.py``) converts whole Arrow columns with kernels gated by the same
patterns defined here, and hands every value its gate does not cover back to these
converters. Each rule therefore has one definition.

The rules follow Hive's lazy SerDe classes (``LazyInteger``, ``LazyDouble``,
``HiveDecimal.create`` + ``enforcePrecisionScale``, ``Date.valueOf``, ``Timestamp.valueOf``,
``LazyBinary``) except that a value Hive would silently turn into NULL raises
:class:`ConvError`, which the writers turn into a :class:`~acidstream.acid.errors.SerializationError`.
Values are range-checked to exactly what the ORC writer stores: timestamps and dates in
Hive's range 0001-01-01 .. 9999-12-31, decimals within ``decimal(p,s)``, text valid UTF-8.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import decimal
import math
import re
import struct
from collections.abc import Callable

import numpy as np

from acidstream.acid.errors import ConfigError
from acidstream.acid.schema import HiveType

__all__ = [
    "INT_RANGES",
    "ConvError",
    "TextConv",
    "check_utf8",
    "hive_string",
    "partition_text_conv",
    "primitive_text_conv",
]


class ConvError(Exception):
    """A value could not be converted; the writer adds the column and the record."""


TextConv = Callable[[str], object]

INT_RANGES = {
    "tinyint": (-(2**7), 2**7 - 1),
    "smallint": (-(2**15), 2**15 - 1),
    "int": (-(2**31), 2**31 - 1),
    "bigint": (-(2**63), 2**63 - 1),
}
STRING_KINDS = ("string", "varchar", "char")

# Java's String.trim() removes every char <= U+0020 (Double.parseDouble, HiveDecimal.create
# and Date/Timestamp.valueOf trim that way); Python's \s would also take Unicode spaces.
JAVA_TRIM = "".join(chr(c) for c in range(0x21))
_WS = r"[\x00-\x20]*"

# The patterns below are written in the common subset of Python ``re`` and RE2, so the
# bulk path gates Arrow kernels with the very same text (see ``record_bulk``).
INT_PATTERN = r"[+-]?[0-9]+"
FLOAT_PATTERN = (
    _WS + r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)" + _WS
)
DECIMAL_PATTERN = _WS + r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?" + _WS
_INT_RE = re.compile(INT_PATTERN)
_FLOAT_RE = re.compile(FLOAT_PATTERN)
_DECIMAL_RE = re.compile(DECIMAL_PATTERN)
_DATE_RE = re.compile(_WS + r"([0-9]{1,9})-([0-9]{1,2})-([0-9]{1,2})(?: .*)?", re.DOTALL)
_TS_RE = re.compile(
    _WS + r"([0-9]{1,9})-([0-9]{1,2})-([0-9]{1,2})"
    r"(?:(?: ([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})"
    r"|T([0-9]{2}):([0-9]{2})(?::([0-9]{2}))?)(?:\.([0-9]{1,9}))?)?" + _WS
)
_BASE64_CHARS = frozenset(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_ \t\r\n"
)
# Longest digit strings worth handing to int()/Decimal(): anything longer is out of every
# range, and Python's int() refuses more than 4300 digits (a poison record otherwise).
_MAX_INT_TEXT = 40
_MAX_DECIMAL_EXPONENT = 10_000


def int_conv(kind: str) -> TextConv:
    lo, hi = INT_RANGES[kind]

    def conv(s: str) -> object:
        if not _INT_RE.fullmatch(s):
            raise ConvError(f"not a valid {kind}")
        if len(s) > _MAX_INT_TEXT and len(s.lstrip("+-").lstrip("0")) > _MAX_INT_TEXT:
            raise ConvError(f"out of range for {kind} [{lo}, {hi}]")
        v = int(s)
        if not lo <= v <= hi:
            raise ConvError(f"out of range for {kind} [{lo}, {hi}]")
        return v

    return conv


def float_value(s: str, kind: str) -> float:
    """Java ``Double.parseDouble`` (``Float.parseFloat`` via a double for ``float``)."""
    if not _FLOAT_RE.fullmatch(s):
        raise ConvError(f"not a valid {kind}")
    text = s.strip(JAVA_TRIM).rstrip("fFdD")
    if text.endswith("Infinity"):
        text = text.replace("Infinity", "inf")
    v = float(text)
    if kind == "float":
        v = to_float32(v)
    return v


def to_float32(v: float) -> float:
    """Round a double to the nearest float32 (overflow -> infinity), as a C cast does."""
    try:
        return float(struct.unpack("<f", struct.pack("<f", v))[0])
    except OverflowError:
        return math.copysign(math.inf, v)


def enforce_decimal(d: decimal.Decimal, precision: int, scale: int) -> decimal.Decimal:
    """HiveDecimal.enforcePrecisionScale, strict: overflow raises instead of NULL.

    Rounds HALF_UP to ``scale`` (Hive trims trailing zeros first, which does not change
    the rounded value). Never lets ``decimal.InvalidOperation`` escape.
    """
    if not d.is_finite():
        raise ConvError("not a finite decimal")
    if d != 0 and d.adjusted() >= precision - scale + 1:
        # Checked before quantize: 1e400 would overflow the context instead.
        raise ConvError(f"out of range for decimal({precision},{scale})")
    try:
        with decimal.localcontext() as ctx:
            ctx.prec = 200
            q = d.quantize(decimal.Decimal(1).scaleb(-scale), rounding=decimal.ROUND_HALF_UP)
    except decimal.DecimalException as e:
        raise ConvError(f"out of range for decimal({precision},{scale})") from e
    int_digits = q.adjusted() + 1 if q != 0 else 0
    if int_digits > precision - scale:
        raise ConvError(f"out of range for decimal({precision},{scale})")
    return q


def decimal_conv(t: HiveType) -> TextConv:
    """``HiveDecimal.create`` syntax (exponent allowed, blanks trimmed), then enforce (p,s)."""
    p, s = t.params

    def conv(v: str) -> object:
        if not _DECIMAL_RE.fullmatch(v):
            raise ConvError(f"not a valid {t}")
        text = v.strip(JAVA_TRIM)
        mant, _, exp = text.lower().partition("e")
        if exp and len(exp.lstrip("+-").lstrip("0")) > len(str(_MAX_DECIMAL_EXPONENT)):
            raise ConvError(f"out of range for {t}")
        if len(mant) > 1000:
            raise ConvError(f"too many digits for {t}")
        try:
            d = decimal.Decimal(text)
        except decimal.DecimalException as e:
            raise ConvError(f"not a valid {t}") from e
        return enforce_decimal(d, p, s)

    return conv


def parse_date(s: str) -> _dt.date:
    """``Date.valueOf`` (1-2 digit month/day, a trailing `` ...`` ignored); years 1..9999."""
    m = _DATE_RE.fullmatch(s)
    if not m:
        raise ConvError("not a valid date (yyyy-MM-dd)")
    try:
        return _dt.date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError as e:
        raise ConvError(f"not a valid date: {e}") from None


def parse_timestamp(s: str) -> _dt.datetime:
    """``Timestamp.valueOf`` shapes; Hive's range 0001-01-01 .. 9999-12-31 23:59:59.999999.

    Digits beyond microseconds must be zero: a Python datetime (and the ORC writer's
    input) stops at microseconds, and dropping nanoseconds silently would change the value.
    """
    m = _TS_RE.fullmatch(s)
    if not m:
        raise ConvError("not a valid timestamp (yyyy-MM-dd HH:mm:ss[.fffffffff])")
    hh = m[4] or m[7] or "0"
    mm = m[5] or m[8] or "0"
    ss = m[6] or m[9] or "0"
    frac = (m[10] or "").ljust(9, "0")
    if frac[6:] != "000":
        raise ConvError("nanosecond precision is not representable")
    try:
        return _dt.datetime(
            int(m[1]), int(m[2]), int(m[3]), int(hh), int(mm), int(ss), int(frac[:6] or "0")
        )
    except ValueError as e:
        raise ConvError(f"not a valid timestamp: {e}") from None


def check_utf8(s: str) -> str:
    """Text must be valid UTF-8: ORC strings are UTF-8. Records are decoded with
    surrogateescape (binary columns recover raw bytes) and JSON may carry ``"\\ud800"``:
    both show up here as lone surrogates."""
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            raise ConvError("invalid UTF-8 (or a lone surrogate)") from None
    return s


def fit_text(t: HiveType) -> Callable[[str], str]:
    """varchar(n): truncate to n code points; char(n): truncate, pad with spaces
    (``HiveBaseChar.enforceMaxLength`` / ``getPaddedValue``); string: as is."""
    if t.kind == "varchar":
        n = t.params[0]
        return lambda s: s[:n]
    if t.kind == "char":
        n = t.params[0]
        return lambda s: s[:n].ljust(n)
    return lambda s: s


def lazy_binary(s: str) -> bytes:
    """LazyBinary.init: base64-decode when every byte is base64, else the raw bytes."""
    raw = s.encode("utf-8", "surrogateescape")
    if raw and all(b in _BASE64_CHARS for b in raw):
        compact = (
            bytes(b for b in raw if b not in b" \t\r\n").replace(b"-", b"+").replace(b"_", b"/")
        )
        compact = compact.rstrip(b"=")
        compact = compact[
            : len(compact) - len(compact) % 4 if len(compact) % 4 == 1 else len(compact)
        ]
        try:
            decoded = base64.b64decode(compact + b"=" * (-len(compact) % 4))
        except binascii.Error:
            decoded = b""
        # "use the original bytes in case decoding should fail"
        return decoded if decoded else raw
    return raw


def _boolean(s: str) -> object:
    low = s.lower()
    if low == "true":
        return True
    if low == "false":
        return False
    raise ConvError("not a valid boolean (true/false)")


def primitive_text_conv(t: HiveType) -> TextConv:
    """str -> value for a non-empty, non-null primitive field."""
    k = t.kind
    if k in STRING_KINDS:
        fit = fit_text(t)
        return lambda s: fit(check_utf8(s))
    if k in INT_RANGES:
        return int_conv(k)
    if k in ("float", "double"):
        return lambda s: float_value(s, k)
    if k == "boolean":
        return _boolean
    if k == "decimal":
        return decimal_conv(t)
    if k == "date":
        return parse_date
    if k == "timestamp":
        return parse_timestamp
    if k == "binary":
        return lazy_binary
    raise ConfigError(f"unsupported type {t}")


def nullable_text(conv: TextConv, t: HiveType) -> TextConv:
    """Empty text is NULL for every non-string type (LazySimpleSerDe)."""
    if t.kind in STRING_KINDS:
        return conv
    return lambda s: None if s == "" else conv(s)


# --------------------------------------------------------------------------
# Partition values: typed, then written in Hive's string form


PARTITION_KINDS = frozenset(
    {"string", "varchar", "char", "boolean", "date", "timestamp", "decimal", "float", "double"}
    | set(INT_RANGES)
)


def check_partition_type(name: str, t: HiveType) -> None:
    """Partition columns must be primitive and not binary (Hive names directories by value)."""
    if t.kind not in PARTITION_KINDS:
        raise ConfigError(f"partition column {name!r} has unsupported type {t}")


def partition_text_conv(t: HiveType) -> Callable[[str], str | None]:
    """Text -> the partition value Hive writes, or ``None`` for the default partition.

    Hive's streaming writers read the partition fields with the SerDe's object inspector
    for the column's type and name the directory ``Writable.toString()``; a value the
    type cannot parse is NULL, and NULL or empty goes to ``__HIVE_DEFAULT_PARTITION__``
    (``AbstractRecordWriter.getPartitionValues``). Text columns keep their bytes as they
    are (validity is checked by :func:`acidstream.acid.partition_name.check_partition_value`).
    """
    if t.kind in STRING_KINDS:
        fit = fit_text(t)

        def text(s: str) -> str | None:
            return fit(s) or None

        return text
    conv = primitive_text_conv(t)

    def typed(s: str) -> str | None:
        if s == "":
            return None
        try:
            v = conv(s)
        except ConvError:
            return None
        return hive_string(v, t)

    return typed


def hive_string(v: object, t: HiveType) -> str:
    """``Writable.toString()`` of a converted value (the partition directory form)."""
    k = t.kind
    if k == "boolean":
        return "true" if v else "false"
    if k in ("float", "double"):
        assert isinstance(v, float)
        return java_float_string(v, float32=k == "float")
    if k == "decimal":
        assert isinstance(v, decimal.Decimal)
        # HiveDecimal.toString: plain notation, trailing zeros trimmed, no negative zero.
        if v == 0:
            return "0"
        text = format(v.normalize(), "f")
        return text
    if k == "date":
        assert isinstance(v, _dt.date)
        return f"{v.year:04d}-{v.month:02d}-{v.day:02d}"
    if k == "timestamp":
        assert isinstance(v, _dt.datetime)
        # Timestamp.toString: fraction without trailing zeros, omitted when zero.
        out = f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}"
        if v.microsecond:
            out += "." + f"{v.microsecond:06d}".rstrip("0")
        return out
    return str(v)


def java_float_string(v: float, *, float32: bool) -> str:
    """Java ``Double.toString`` / ``Float.toString`` (JDK 19+ shortest digits).

    Plain notation for 1e-3 <= |v| < 1e7 (at least one fraction digit), otherwise
    ``d.dddE[-]n``; ``NaN``, ``Infinity``, ``-0.0``.
    """
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "-0.0" if math.copysign(1.0, v) < 0 else "0.0"
    shortest = np.format_float_scientific(np.float32(v), unique=True) if float32 else repr(float(v))
    d = decimal.Decimal(shortest)
    sign, digits, _ = d.as_tuple()
    text_digits = "".join(map(str, digits)).rstrip("0") or "0"
    exp10 = d.adjusted()
    neg = "-" if sign else ""
    if 1e-3 <= abs(v) < 1e7:
        if exp10 >= 0:
            whole = text_digits[: exp10 + 1].ljust(exp10 + 1, "0")
            frac = text_digits[exp10 + 1 :] or "0"
        else:
            whole = "0"
            frac = "0" * (-exp10 - 1) + text_digits
        return f"{neg}{whole}.{frac}"
    return f"{neg}{text_digits[0]}.{text_digits[1:] or '0'}E{exp10}"
