"""Strict record writers: bytes -> typed row values (Hive Streaming §7.4).

Hive's streaming API ships three writers, each wrapping a SerDe:
``StrictDelimitedInputWriter`` (``LazySimpleSerDe``), ``StrictJsonWriter``
(``JsonSerDe`` / ``HiveJsonReader``) and ``StrictRegexWriter`` (``RegexSerDe``).
The Python equivalents here turn one record into a tuple of Python values in
table column order plus the dynamic-partition values (input columns are the
table columns followed by the partition columns).

The SerDes are lenient: an unparsable number becomes NULL, a non-matching regex
row becomes all-NULL, Jackson turns ``"abc"`` into ``0`` for an int column.
These writers are *strict*: anything Hive would silently turn into NULL or
garbage raises :class:`~acid.errors.SerializationError` naming the column and
the value, while the cases Hive documents as NULL (missing trailing fields, the
null sequence ``\\N``, an empty field of a non-string type, JSON ``null`` or a
missing key) stay NULL. ``docs/record_writers.md`` lists every rule.

Each writer computes a parse plan (one converter callable per column) once, in
:meth:`RecordWriter.bind`; :meth:`BoundRecordWriter.encode` only runs it.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import decimal
import json
import re
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from acid.errors import ConfigError, SerializationError
from acid.schema import HiveType, TableSchema

__all__ = [
    "DEFAULT_LINE_DELIMITER_PATTERN",
    "BoundRecordWriter",
    "RecordWriter",
    "StrictDelimitedInputWriter",
    "StrictJsonWriter",
    "StrictRegexWriter",
    "split_records",
]

#: ``AbstractRecordWriter`` default: ``Scanner.useDelimiter("[\r\n]")``.
DEFAULT_LINE_DELIMITER_PATTERN = "[\r\n]"

Row = tuple[object, ...]
PartitionValues = tuple[str | None, ...]
Encoded = tuple[Row, PartitionValues]


class _ConvError(Exception):
    """A value could not be converted; ``encode`` adds column and record."""


class BoundRecordWriter(Protocol):
    """A record writer bound to one table schema (the parse plan is ready)."""

    def encode(self, record: bytes) -> Encoded:
        """Convert one record into (row values, dynamic-partition values).

        Raises:
            SerializationError: The record is malformed; the message names the
                column and the offending value.
        """
        ...


class RecordWriter(Protocol):
    """Turns raw records into rows; :meth:`bind` builds the parse plan once."""

    @property
    def line_delimiter_pattern(self) -> str:
        """The regular expression that separates records in a stream."""
        ...

    def bind(
        self, schema: TableSchema, *, partition_columns: Sequence[str] = ()
    ) -> BoundRecordWriter:
        """Prepare to encode records for ``schema`` (+ dynamic partition columns).

        Raises:
            ConfigError: The writer cannot handle this schema.
        """
        ...


# --------------------------------------------------------------------------
# Splitting an input stream into records


def split_records(
    stream: bytes | Iterable[bytes],
    *,
    line_delimiter_pattern: str = DEFAULT_LINE_DELIMITER_PATTERN,
    skip_empty: bool = True,
) -> Iterator[bytes]:
    """Split an InputStream-like byte source into records.

    Hive wraps the stream in ``java.util.Scanner(...).useDelimiter(pattern)``;
    with the default ``[\\r\\n]`` a Windows ``\\r\\n`` therefore yields an
    empty token between ``\\r`` and ``\\n``, which Hive writes as an all-NULL
    (or empty-string) row. ``skip_empty=True`` (the default) drops empty
    records instead; ``skip_empty=False`` reproduces Scanner exactly (one
    leading and one trailing empty token are skipped, inner ones are kept).

    Args:
        stream: The whole input, or an iterable of chunks (delimiters may span
            chunk boundaries).
        line_delimiter_pattern: A regular expression matching one delimiter.
        skip_empty: Drop empty records.

    Yields:
        One record per delimited token.
    """
    try:
        pattern = re.compile(line_delimiter_pattern.encode("utf-8"))
    except re.error as e:
        raise ConfigError(f"bad line_delimiter_pattern {line_delimiter_pattern!r}: {e}") from e
    chunks: Iterable[bytes] = (stream,) if isinstance(stream, bytes | bytearray) else stream
    buf = b""
    first = True
    for chunk in chunks:
        if not chunk:
            continue
        buf += bytes(chunk)
        parts = pattern.split(buf)
        buf = parts.pop()
        for part in parts:
            # Scanner skips one delimiter before the first token.
            if first:
                first = False
                if not part:
                    continue
            if part or not skip_empty:
                yield part
    if buf:
        yield buf


# --------------------------------------------------------------------------
# Text converters shared by the delimited and regex writers


_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_INT_RANGES = {
    "tinyint": (-(2**7), 2**7 - 1),
    "smallint": (-(2**15), 2**15 - 1),
    "int": (-(2**31), 2**31 - 1),
    "bigint": (-(2**63), 2**63 - 1),
}
# Java Double.parseDouble's decimal syntax (whitespace trimmed, optional f/d suffix).
_FLOAT_RE = re.compile(
    r"\s*[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)\s*\Z"
)
_DECIMAL_RE = re.compile(r"\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*\Z")
_DATE_RE = re.compile(r"\s*([0-9]{1,9})-([0-9]{1,2})-([0-9]{1,2})(?: .*)?\s*\Z", re.DOTALL)
_TS_RE = re.compile(
    r"\s*([0-9]{1,9})-([0-9]{1,2})-([0-9]{1,2})"
    r"(?:(?: ([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})"
    r"|T([0-9]{2}):([0-9]{2})(?::([0-9]{2}))?)(?:\.([0-9]{1,9}))?)?\s*\Z"
)
_BASE64_CHARS = frozenset(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_ \t\r\n"
)

TextConv = Callable[[str], object]


def _int_conv(kind: str) -> TextConv:
    lo, hi = _INT_RANGES[kind]

    def conv(s: str) -> object:
        if not _INT_RE.match(s):
            raise _ConvError(f"not a valid {kind}")
        v = int(s)
        if not lo <= v <= hi:
            raise _ConvError(f"out of range for {kind} [{lo}, {hi}]")
        return v

    return conv


def _float_value(s: str, kind: str) -> float:
    m = _FLOAT_RE.match(s)
    if not m:
        raise _ConvError(f"not a valid {kind}")
    text = s.strip().rstrip("fFdD")
    if text.endswith("Infinity"):
        text = text.replace("Infinity", "inf")
    v = float(text)
    if kind == "float":
        # Float.parseFloat: round to the nearest float32 (overflow -> infinity).
        try:
            v = struct.unpack("<f", struct.pack("<f", v))[0]
        except OverflowError:
            v = float("inf") if v > 0 else float("-inf")
    return v


def _enforce_decimal(d: decimal.Decimal, precision: int, scale: int) -> decimal.Decimal:
    """HiveDecimal.enforcePrecisionScale, strict: overflow raises instead of NULL."""
    if not d.is_finite():
        raise _ConvError("not a finite decimal")
    # Round HALF_UP to the column scale (Hive trims trailing zeros first, which
    # does not change the rounded value).
    with decimal.localcontext() as ctx:
        ctx.prec = 200
        q = d.quantize(decimal.Decimal(1).scaleb(-scale), rounding=decimal.ROUND_HALF_UP)
    int_digits = q.adjusted() + 1 if q != 0 else 0
    if int_digits > precision - scale:
        raise _ConvError(f"out of range for decimal({precision},{scale})")
    return q


def _decimal_conv(t: HiveType) -> TextConv:
    p, s = t.params

    def conv(v: str) -> object:
        if not _DECIMAL_RE.match(v):
            raise _ConvError(f"not a valid {t}")
        return _enforce_decimal(decimal.Decimal(v.strip()), p, s)

    return conv


def _parse_date(s: str) -> _dt.date:
    m = _DATE_RE.match(s)
    if not m:
        raise _ConvError("not a valid date (yyyy-MM-dd)")
    try:
        return _dt.date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError as e:
        raise _ConvError(f"not a valid date: {e}") from None


def _parse_timestamp(s: str) -> _dt.datetime:
    m = _TS_RE.match(s)
    if not m:
        raise _ConvError("not a valid timestamp (yyyy-MM-dd HH:mm:ss[.fffffffff])")
    hh = m[4] or m[7] or "0"
    mm = m[5] or m[8] or "0"
    ss = m[6] or m[9] or "0"
    frac = (m[10] or "").ljust(9, "0")
    if frac[6:] != "000":
        # Python datetimes stop at microseconds; refuse to drop nanoseconds silently.
        raise _ConvError("nanosecond precision is not representable")
    try:
        return _dt.datetime(
            int(m[1]), int(m[2]), int(m[3]), int(hh), int(mm), int(ss), int(frac[:6] or "0")
        )
    except ValueError as e:
        raise _ConvError(f"not a valid timestamp: {e}") from None


def _check_utf8(s: str) -> str:
    # Records are decoded with surrogateescape so binary columns can recover
    # raw bytes; text columns must be valid UTF-8 (ORC strings are UTF-8).
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            raise _ConvError("invalid UTF-8") from None
    return s


def _varchar(n: int) -> Callable[[str], str]:
    # HiveBaseChar.enforceMaxLength: truncate to n code points.
    return lambda s: s[:n]


def _char(n: int) -> Callable[[str], str]:
    # HiveBaseChar.getPaddedValue: truncate, then pad with spaces to n.
    return lambda s: s[:n].ljust(n)


def _lazy_binary(s: str) -> bytes:
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


def _primitive_text_conv(t: HiveType) -> TextConv:
    """str -> value for a non-empty, non-null primitive field."""
    k = t.kind
    if k == "string":
        return _check_utf8
    if k == "varchar":
        trunc = _varchar(t.params[0])
        return lambda s: trunc(_check_utf8(s))
    if k == "char":
        pad = _char(t.params[0])
        return lambda s: pad(_check_utf8(s))
    if k in _INT_RANGES:
        return _int_conv(k)
    if k in ("float", "double"):
        return lambda s: _float_value(s, k)
    if k == "boolean":

        def boolean(s: str) -> object:
            low = s.lower()
            if low == "true":
                return True
            if low == "false":
                return False
            raise _ConvError("not a valid boolean (true/false)")

        return boolean
    if k == "decimal":
        return _decimal_conv(t)
    if k == "date":
        return _parse_date
    if k == "timestamp":
        return _parse_timestamp
    if k == "binary":
        return _lazy_binary
    raise ConfigError(f"unsupported type {t}")


def _nullable_text(conv: TextConv, t: HiveType) -> TextConv:
    """Empty text is NULL for every non-string type (LazySimpleSerDe)."""
    if t.kind in ("string", "varchar", "char"):
        return conv
    return lambda s: None if s == "" else conv(s)


# --------------------------------------------------------------------------
# Delimited (LazySimpleSerDe)


# LazySerDeParameters: the three configurable separators, then 4..8.
_EXTRA_SEPARATORS = tuple(chr(b) for b in range(4, 9))


def _delimited_conv(t: HiveType, seps: Sequence[str], level: int, null: str) -> TextConv:
    """The LazyFactory object tree: nesting level ``level`` splits on ``seps[level]``."""
    if t.kind in ("array", "map", "struct"):
        need = level + (2 if t.kind == "map" else 1)
        if need > len(seps):
            raise ConfigError(
                f"type {t} nests deeper than the {len(seps)} LazySimpleSerDe separators allow"
            )
    if t.kind == "array":
        sep = seps[level]
        elem = _delimited_field(t.children[0], seps, level + 1, null)

        def arr(s: str) -> object:
            if s == "":
                return []  # LazyArray: zero-length data is an empty array
            return [elem(x) for x in s.split(sep)]

        return arr
    if t.kind == "map":
        item_sep, kv_sep = seps[level], seps[level + 1]
        key = _delimited_field(t.children[0], seps, level + 2, null)
        val = _delimited_field(t.children[1], seps, level + 2, null)

        def mp(s: str) -> object:
            out: dict[object, object] = {}
            if s == "":
                return out
            for item in s.split(item_sep):
                k_text, found, v_text = item.partition(kv_sep)
                k = key(k_text)
                # LazyMap drops NULL keys and keeps the first of duplicate keys.
                if k is not None and k not in out:
                    out[k] = val(v_text) if found else None
            return out

        return mp
    if t.kind == "struct":
        sep = seps[level]
        fields = [_delimited_field(c, seps, level + 1, null) for c in t.children]
        n = len(fields)

        def st(s: str) -> object:
            parts = s.split(sep, n)  # extra fields are ignored
            return tuple(fields[i](parts[i]) if i < len(parts) else None for i in range(n))

        return st
    return _nullable_text(_primitive_text_conv(t), t)


def _delimited_field(t: HiveType, seps: Sequence[str], level: int, null: str) -> TextConv:
    inner = _delimited_conv(t, seps, level, null)
    return lambda s: None if s == null else inner(s)


def _single_char(name: str, value: str) -> str:
    if len(value) != 1 or not value.isascii():
        raise ConfigError(f"{name} must be a single ASCII character, got {value!r}")
    return value


def _column_error(column: str, value: object, reason: str, record: bytes) -> SerializationError:
    shown = value if not isinstance(value, str) or len(value) <= 200 else value[:200] + "..."
    return SerializationError(
        f"Unable to convert byte[] record into Object: column {column!r}: value {shown!r}: {reason}",
        record=record,
    )


def _partition_text(s: str | None) -> str | None:
    return None if s is None or s == "" else s


@dataclass(frozen=True, slots=True)
class _BoundDelimited:
    names: tuple[str, ...]
    convs: tuple[TextConv, ...]
    partition_names: tuple[str, ...]
    field_delimiter: str
    null_format: str

    def encode(self, record: bytes) -> Encoded:
        text = record.decode("utf-8", "surrogateescape")
        parts = text.split(self.field_delimiter)
        n = len(parts)
        null = self.null_format
        row: list[object] = []
        for i, conv in enumerate(self.convs):
            if i >= n:
                row.append(None)  # missing trailing field
                continue
            s = parts[i]
            if s == null:
                row.append(None)
                continue
            try:
                row.append(conv(s))
            except _ConvError as e:
                raise _column_error(self.names[i], s, str(e), record) from None
        ncols = len(self.convs)
        pvals = tuple(
            _partition_text(parts[ncols + j])
            if ncols + j < n and parts[ncols + j] != null
            else None
            for j in range(len(self.partition_names))
        )
        return tuple(row), pvals


@dataclass(frozen=True, slots=True)
class StrictDelimitedInputWriter:
    """Delimited text with ``LazySimpleSerDe`` semantics (Hive ``StrictDelimitedInputWriter``).

    Args:
        field_delimiter: ``field.delim`` (default ``\\x01``).
        collection_delimiter: ``collection.delim`` (default ``\\x02``).
        map_key_delimiter: ``mapkey.delim`` (default ``\\x03``).
        null_format: ``serialization.null.format`` (default ``\\N``).
        line_delimiter_pattern: For :func:`split_records` (default ``[\\r\\n]``).
    """

    field_delimiter: str = "\x01"
    collection_delimiter: str = "\x02"
    map_key_delimiter: str = "\x03"
    null_format: str = "\\N"
    line_delimiter_pattern: str = DEFAULT_LINE_DELIMITER_PATTERN

    def __post_init__(self) -> None:
        seps = (
            _single_char("field_delimiter", self.field_delimiter),
            _single_char("collection_delimiter", self.collection_delimiter),
            _single_char("map_key_delimiter", self.map_key_delimiter),
        )
        if len(set(seps)) != 3:
            raise ConfigError(f"delimiters must differ, got {seps!r}")
        _compile_line_pattern(self.line_delimiter_pattern)

    def bind(
        self, schema: TableSchema, *, partition_columns: Sequence[str] = ()
    ) -> BoundRecordWriter:
        """Build the per-column converters for ``schema``; see :class:`RecordWriter`."""
        first: tuple[str, ...] = (
            self.field_delimiter,
            self.collection_delimiter,
            self.map_key_delimiter,
        )
        seps = first + tuple(c for c in _EXTRA_SEPARATORS if c not in first)
        convs = tuple(_delimited_conv(t, seps, 1, self.null_format) for _, t in schema.columns)
        return _BoundDelimited(
            names=schema.names,
            convs=convs,
            partition_names=_partition_names(schema, partition_columns),
            field_delimiter=self.field_delimiter,
            null_format=self.null_format,
        )


def _partition_names(schema: TableSchema, partition_columns: Sequence[str]) -> tuple[str, ...]:
    names = tuple(p.strip().lower() for p in partition_columns)
    clash = set(names) & set(schema.names)
    if clash or len(set(names)) != len(names):
        raise ConfigError(f"partition columns {names!r} repeat or clash with table columns")
    return names


def _compile_line_pattern(pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as e:
        raise ConfigError(f"bad line_delimiter_pattern {pattern!r}: {e}") from e


# --------------------------------------------------------------------------
# JSON (JsonSerDe / HiveJsonReader)


class _JsonFloat(str):
    """A JSON number with a fraction or exponent, kept as its exact text."""

    __slots__ = ()


JsonConv = Callable[[object], object]
_COL_INDEX_RE = re.compile(r"_col([0-9]+)\Z")


def _json_text(v: object) -> str:
    """Jackson ``asText`` for a value node."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _json_is_number(v: object) -> bool:
    return isinstance(v, int | _JsonFloat) and not isinstance(v, bool)


def _json_conv(t: HiveType) -> JsonConv:
    k = t.kind
    if k == "array":
        elem = _json_nullable(_json_conv(t.children[0]))

        def arr(v: object) -> object:
            if not isinstance(v, list):
                raise _ConvError(f"expected a JSON array for {t}")
            return [elem(x) for x in v]

        return arr
    if k == "map":
        if t.children[0].kind in ("array", "map", "struct"):
            raise ConfigError(f"map key must be a primitive type: {t}")
        key = _json_conv(t.children[0])
        val = _json_nullable(_json_conv(t.children[1]))

        def mp(v: object) -> object:
            if not isinstance(v, dict):
                raise _ConvError(f"expected a JSON object for {t}")
            # Keys arrive as text (Jackson TextNode) and are converted to the key type.
            return {key(kk): val(vv) for kk, vv in v.items()}

        return mp
    if k == "struct":
        index = {n: i for i, n in enumerate(t.field_names)}
        fields = [_json_nullable(_json_conv(c)) for c in t.children]

        def st(v: object) -> object:
            if not isinstance(v, dict):
                raise _ConvError(f"expected a JSON object for {t}")
            out: list[object] = [None] * len(fields)
            for kk, vv in v.items():
                i = index.get(kk.lower())
                if i is not None:
                    out[i] = fields[i](vv)
            return tuple(out)

        return st
    if k in ("string", "varchar", "char"):
        fit: Callable[[str], str] = (
            (lambda s: s)
            if k == "string"
            else _varchar(t.params[0])
            if k == "varchar"
            else _char(t.params[0])
        )

        def text(v: object) -> object:
            if isinstance(v, list | dict):
                if k != "string":
                    raise _ConvError(f"a JSON {type(v).__name__} is not a {t}")
                # JsonSerDe's stringify.complex.fields (default true).
                return json.dumps(v, separators=(",", ":"), ensure_ascii=False)
            return fit(_json_text(v))

        return text
    if k in _INT_RANGES:
        as_int = _int_conv(k)

        def integer(v: object) -> object:
            if isinstance(v, bool):
                raise _ConvError(f"a JSON boolean is not a {k}")
            if isinstance(v, int):
                return as_int(str(v))
            if isinstance(v, _JsonFloat):
                d = decimal.Decimal(v)
                if d != d.to_integral_value():
                    raise _ConvError(f"not an integral {k}")
                return as_int(str(int(d)))
            if isinstance(v, str):
                return as_int(v.strip())
            raise _ConvError(f"a JSON {type(v).__name__} is not a {k}")

        return integer
    if k in ("float", "double"):

        def floating(v: object) -> object:
            if isinstance(v, bool) or not isinstance(v, int | str):
                raise _ConvError(f"a JSON {type(v).__name__} is not a {k}")
            return _float_value(str(v), k)

        return floating
    if k == "boolean":

        def boolean(v: object) -> object:
            if isinstance(v, bool):
                return v
            if isinstance(v, str) and not isinstance(v, _JsonFloat):
                low = v.strip().lower()
                if low in ("true", "false"):
                    return low == "true"
            raise _ConvError("not a valid boolean")

        return boolean
    if k == "decimal":
        as_dec = _decimal_conv(t)

        def dec(v: object) -> object:
            if isinstance(v, bool) or not isinstance(v, int | str):
                raise _ConvError(f"a JSON {type(v).__name__} is not a {t}")
            return as_dec(str(v))

        return dec
    if k in ("date", "timestamp"):
        parse: Callable[[str], object] = _parse_date if k == "date" else _parse_timestamp

        def temporal(v: object) -> object:
            if not isinstance(v, str) or isinstance(v, _JsonFloat):
                raise _ConvError(f"a {k} must be a JSON string")
            return parse(v)

        return temporal
    if k == "binary":

        def binary(v: object) -> object:
            # JsonSerDe's default binary encoding is base64 (Jackson binaryValue).
            if not isinstance(v, str) or isinstance(v, _JsonFloat):
                raise _ConvError("binary must be a base64 JSON string")
            try:
                return base64.b64decode(v, validate=True)
            except binascii.Error:
                raise _ConvError("not valid base64") from None

        return binary
    raise ConfigError(f"unsupported type {t}")


def _json_nullable(conv: JsonConv) -> JsonConv:
    return lambda v: None if v is None else conv(v)


def _json_partition_text(v: object) -> str | None:
    if v is None:
        return None
    if isinstance(v, list | dict):
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    return _partition_text(_json_text(v))


@dataclass(frozen=True, slots=True)
class _BoundJson:
    names: tuple[str, ...]
    convs: tuple[JsonConv, ...]
    index: dict[str, int] = field(hash=False)
    n_columns: int

    def encode(self, record: bytes) -> Encoded:
        try:
            obj = json.loads(record, parse_float=_JsonFloat)
        except (ValueError, RecursionError) as e:
            raise SerializationError(
                f"Unable to convert byte[] record into Object: malformed JSON: {e}", record=record
            ) from None
        if not isinstance(obj, dict):
            raise SerializationError(
                "Unable to convert byte[] record into Object: "
                f"expected a JSON object, got {type(obj).__name__}",
                record=record,
            )
        vals: list[object] = [None] * len(self.names)
        index = self.index
        for key, value in obj.items():
            i = index.get(key.lower())
            if i is None:
                m = _COL_INDEX_RE.match(key)  # COL_INDEX_PARSING: _colN is column N
                if m is None or int(m[1]) >= len(vals):
                    continue  # unknown fields are ignored (ignore.extra default true)
                i = int(m[1])
            vals[i] = value
        ncols = self.n_columns
        row: list[object] = []
        for i in range(ncols):
            v = vals[i]
            if v is None:
                row.append(None)
                continue
            try:
                row.append(self.convs[i](v))
            except _ConvError as e:
                raise _column_error(self.names[i], v, str(e), record) from None
        return tuple(row), tuple(_json_partition_text(v) for v in vals[ncols:])


@dataclass(frozen=True, slots=True)
class StrictJsonWriter:
    """One UTF-8 JSON object per record (Hive ``StrictJsonWriter`` / ``JsonSerDe``).

    Args:
        line_delimiter_pattern: For :func:`split_records` (default ``[\\r\\n]``).
    """

    line_delimiter_pattern: str = DEFAULT_LINE_DELIMITER_PATTERN

    def __post_init__(self) -> None:
        _compile_line_pattern(self.line_delimiter_pattern)

    def bind(
        self, schema: TableSchema, *, partition_columns: Sequence[str] = ()
    ) -> BoundRecordWriter:
        """Build the per-column converters for ``schema``; see :class:`RecordWriter`."""
        parts = _partition_names(schema, partition_columns)
        names = schema.names + parts
        return _BoundJson(
            names=names,
            convs=tuple(_json_conv(t) for _, t in schema.columns),
            index={n: i for i, n in enumerate(names)},
            n_columns=len(schema.columns),
        )


# --------------------------------------------------------------------------
# Regex (RegexSerDe)


_JAVA_NAMED_GROUP = re.compile(r"\(\?<(?![=!])")


@dataclass(frozen=True, slots=True)
class _BoundRegex:
    names: tuple[str, ...]
    convs: tuple[TextConv, ...]
    pattern: re.Pattern[str]

    def encode(self, record: bytes) -> Encoded:
        text = record.decode("utf-8", "surrogateescape")
        m = self.pattern.fullmatch(text)
        if m is None:
            snippet = text if len(text) <= 200 else text[:200] + "..."
            raise SerializationError(
                "Unable to convert byte[] record into Object: record does not match "
                f"input.regex {self.pattern.pattern!r}: {snippet!r}",
                record=record,
            )
        groups = m.groups()
        row: list[object] = []
        for i, conv in enumerate(self.convs):
            s = groups[i]
            if s is None:
                row.append(None)  # the group did not participate
                continue
            try:
                row.append(conv(s))
            except _ConvError as e:
                raise _column_error(self.names[i], s, str(e), record) from None
        ncols = len(self.convs)
        return tuple(row), tuple(_partition_text(g) for g in groups[ncols:])


@dataclass(frozen=True, slots=True)
class StrictRegexWriter:
    """Regex capture groups -> columns (Hive ``StrictRegexWriter`` / ``RegexSerDe``).

    The whole record must match (``Matcher.matches``); the pattern is compiled
    with DOTALL as RegexSerDe does. Java's ``(?<name>...)`` groups are accepted.

    Args:
        regex: ``input.regex``; one capture group per input column.
        case_insensitive: ``input.regex.case.insensitive``.
        line_delimiter_pattern: For :func:`split_records` (default ``[\\r\\n]``).
    """

    regex: str
    case_insensitive: bool = False
    line_delimiter_pattern: str = DEFAULT_LINE_DELIMITER_PATTERN

    def __post_init__(self) -> None:
        self._compile()
        _compile_line_pattern(self.line_delimiter_pattern)

    def _compile(self) -> re.Pattern[str]:
        flags = re.DOTALL | (re.IGNORECASE if self.case_insensitive else 0)
        try:
            return re.compile(_JAVA_NAMED_GROUP.sub("(?P<", self.regex), flags)
        except re.error as e:
            raise ConfigError(f"bad regex {self.regex!r}: {e}") from e

    def bind(
        self, schema: TableSchema, *, partition_columns: Sequence[str] = ()
    ) -> BoundRecordWriter:
        """Check the group count and build converters; see :class:`RecordWriter`.

        Raises:
            ConfigError: A column is not primitive (RegexSerDe refuses them) or
                is ``binary`` (RegexSerDe never fills it), or the number of
                capture groups differs from the number of input columns.
        """
        parts = _partition_names(schema, partition_columns)
        pattern = self._compile()
        n_inputs = len(schema.columns) + len(parts)
        if pattern.groups != n_inputs:
            raise ConfigError(
                f"regex has {pattern.groups} capture groups but there are {n_inputs} "
                "input columns (table columns + partition columns)"
            )
        convs: list[TextConv] = []
        for name, t in schema.columns:
            if t.kind in ("array", "map", "struct", "binary"):
                raise ConfigError(f"RegexSerDe doesn't allow column {name!r} with type {t}")
            convs.append(_nullable_text(_primitive_text_conv(t), t))
        return _BoundRegex(names=schema.names, convs=tuple(convs), pattern=pattern)
