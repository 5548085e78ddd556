"""``StrictJsonWriter``: one JSON object per record (``JsonSerDe`` / ``HiveJsonReader``)."""

from __future__ import annotations

import base64
import binascii
import decimal
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from acidstream.acid.errors import ConfigError
from acidstream.acid.schema import HiveType, TableSchema
from acidstream.ingest.record_bulk import (
    JoinedLines,
    assemble,
    binary_nbytes,
    block_arrow_type,
    block_schema,
    contains,
    convert_partition,
    convert_text,
    convert_values,
    decimal_read_type,
    decode_utf8,
    fit_text_array,
    joined_lines,
    lacks,
    read_line_parts,
    round_decimal,
    size_suspects,
)
from acidstream.ingest.record_common import (
    DEFAULT_LINE_DELIMITER_PATTERN,
    DEFAULT_MAX_RECORD_BYTES,
    BoundRecordWriter,
    Encoded,
    EncodedBlock,
    PartitionColumns,
    check_max_record_bytes,
    check_record_size,
    column_error,
    compile_line_pattern,
    partition_value,
    record_error,
)
from acidstream.ingest.record_common import partition_columns as _partitions
from acidstream.ingest.record_convert import (
    INT_RANGES,
    STRING_KINDS,
    ConvError,
    check_utf8,
    decimal_conv,
    fit_text,
    float_value,
    int_conv,
    parse_date,
    parse_timestamp,
    partition_text_conv,
)

__all__ = ["StrictJsonWriter", "parse_json"]


class _JsonFloat(str):
    """A JSON number with a fraction or exponent (or a huge integer), kept as its text."""

    __slots__ = ()


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


def _json_int(text: str) -> object:
    # Python's int() refuses > 4300 digits; such a number is out of every range anyway.
    return int(text) if len(text) <= 40 else _JsonFloat(text)


def parse_json(record: bytes) -> object:
    """One JSON text as Python values the converters take (numbers with a fraction kept
    as their text, as Jackson does), or the writers' ``SerializationError``."""
    try:
        return json.loads(
            record, parse_float=_JsonFloat, parse_int=_json_int, parse_constant=_no_constant
        )
    except (ValueError, RecursionError) as e:
        raise record_error(f"malformed JSON: {e}", record) from None


JsonConv = Callable[[object], object]
_COL_INDEX_RE = re.compile(r"_col([0-9]+)")
# Python's json module recurses per nesting level; a record this bracket-heavy may fail
# there (RecursionError) where Arrow's parser would not: such records take the row path.
_BRACKET_LIMIT = 500


def _json_text(v: object) -> str:
    """Jackson ``asText`` for a value node."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _json_value_text(v: object) -> str:
    if isinstance(v, list | dict):
        # JsonSerDe's stringify.complex.fields (default true).
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    return _json_text(v)


def _json_conv(t: HiveType) -> JsonConv:
    k = t.kind
    if k == "array":
        elem = _json_nullable(_json_conv(t.children[0]))

        def arr(v: object) -> object:
            if not isinstance(v, list):
                raise ConvError(f"expected a JSON array for {t}")
            return [elem(x) for x in v]

        return arr
    if k == "map":
        if t.children[0].kind in ("array", "map", "struct"):
            raise ConfigError(f"map key must be a primitive type: {t}")
        key = _json_conv(t.children[0])
        val = _json_nullable(_json_conv(t.children[1]))

        def mp(v: object) -> object:
            if not isinstance(v, dict):
                raise ConvError(f"expected a JSON object for {t}")
            # Keys arrive as text (Jackson TextNode) and are converted to the key type.
            return {key(kk): val(vv) for kk, vv in v.items()}

        return mp
    if k == "struct":
        index = {n: i for i, n in enumerate(t.field_names)}
        fields = [_json_nullable(_json_conv(c)) for c in t.children]

        def st(v: object) -> object:
            if not isinstance(v, dict):
                raise ConvError(f"expected a JSON object for {t}")
            out: list[object] = [None] * len(fields)
            for kk, vv in v.items():
                i = index.get(kk.lower())
                if i is not None:
                    out[i] = fields[i](vv)
            return tuple(out)

        return st
    if k in STRING_KINDS:
        fit = fit_text(t)

        def text(v: object) -> object:
            if isinstance(v, list | dict) and k != "string":
                raise ConvError(f"a JSON {type(v).__name__} is not a {t}")
            return fit(check_utf8(_json_value_text(v)))

        return text
    if k in INT_RANGES:
        as_int = int_conv(k)

        def integer(v: object) -> object:
            if isinstance(v, bool):
                raise ConvError(f"a JSON boolean is not a {k}")
            if isinstance(v, int):
                return as_int(str(v))
            if isinstance(v, _JsonFloat):
                try:
                    d = decimal.Decimal(v)
                except decimal.DecimalException as e:
                    raise ConvError(f"not a valid {k}") from e
                if d.is_finite() and d.adjusted() > 20:
                    raise ConvError(f"out of range for {k}")
                if not d.is_finite() or d != d.to_integral_value():
                    raise ConvError(f"not an integral {k}")
                return as_int(str(int(d)))
            if isinstance(v, str):
                return as_int(v.strip())
            raise ConvError(f"a JSON {type(v).__name__} is not a {k}")

        return integer
    if k in ("float", "double"):

        def floating(v: object) -> object:
            if isinstance(v, bool) or not isinstance(v, int | str):
                raise ConvError(f"a JSON {type(v).__name__} is not a {k}")
            return float_value(str(v), k)

        return floating
    if k == "boolean":

        def boolean(v: object) -> object:
            if isinstance(v, bool):
                return v
            if isinstance(v, str) and not isinstance(v, _JsonFloat):
                low = v.strip().lower()
                if low in ("true", "false"):
                    return low == "true"
            raise ConvError("not a valid boolean")

        return boolean
    if k == "decimal":
        as_dec = decimal_conv(t)

        def dec(v: object) -> object:
            if isinstance(v, bool) or not isinstance(v, int | str):
                raise ConvError(f"a JSON {type(v).__name__} is not a {t}")
            return as_dec(str(v))

        return dec
    if k in ("date", "timestamp"):
        parse: Callable[[str], object] = parse_date if k == "date" else parse_timestamp

        def temporal(v: object) -> object:
            if not isinstance(v, str) or isinstance(v, _JsonFloat):
                raise ConvError(f"a {k} must be a JSON string")
            return parse(v)

        return temporal
    if k == "binary":

        def binary(v: object) -> object:
            # JsonSerDe's default binary encoding is base64 (Jackson binaryValue).
            if not isinstance(v, str) or isinstance(v, _JsonFloat):
                raise ConvError("binary must be a base64 JSON string")
            try:
                return base64.b64decode(v, validate=True)
            except (binascii.Error, ValueError):
                raise ConvError("not valid base64") from None

        return binary
    raise ConfigError(f"unsupported type {t}")


def _json_nullable(conv: JsonConv) -> JsonConv:
    return lambda v: None if v is None else conv(v)


# The Arrow type pyarrow.json reads a column as (values it cannot read fail the block,
# which is then split; see _BoundJson._parse).
def _read_type(t: HiveType) -> pa.DataType | None:
    if t.kind in INT_RANGES:
        return pa.int64()
    if t.kind in ("float", "double"):
        return pa.float64()
    if t.kind == "boolean":
        return pa.bool_()
    if t.kind == "decimal":
        return decimal_read_type(t)
    if t.kind in (*STRING_KINDS, "date", "timestamp", "binary"):
        return pa.string()
    return None  # nested types: the row path


def _case_variants(ch: str) -> str:
    """Characters other than ``ch`` whose ``str.lower()`` is ``ch`` (as a regex class body)."""
    others = [c for c in (ch.upper(), "\u212a" if ch == "k" else "") if c and c != ch]
    return "".join(re.escape(c) if c.isascii() else f"\\x{{{ord(c):x}}}" for c in others)


def _suspect_pattern(names: Sequence[str], columns: Sequence[tuple[str, HiveType]]) -> str:
    """RE2: what sends a record to the row path: a suspect key (:func:`_suspect_key_pattern`)
    or a decimal column's value written with an exponent.

    pyarrow.json reads ``9.7e21`` into the wide decimal type without an overflow check: the
    value wraps around (``52550160.26`` for a ``decimal(10,2)``, or a rounding error), where
    the row rule refuses it as out of range. Such values are rare; the row path decides them.
    """
    keys = _suspect_key_pattern(names)
    decimals = [re.escape(n) for n, t in columns if t.kind == "decimal"]
    if not decimals:
        return keys
    exponent = rf'"(?:{"|".join(decimals)})"\s*:\s*-?[0-9]*\.?[0-9]*[eE]'
    return f"(?:{keys})|(?:{exponent})"


def _suspect_key_pattern(names: Sequence[str]) -> str:
    """RE2: a quoted text that lower-cases to a column name without being it, a ``_colN``
    key, or a key written with escapes; such records take the row path."""
    alts = [r"_col[0-9]+"]
    for name in names:
        for i, ch in enumerate(name):
            var = _case_variants(ch)
            if var:
                alts.append(f"{re.escape(name[:i])}[{var}](?i:{re.escape(name[i + 1 :])})")
    escaped_key = r'"(?:[^"\\]|\\.)*\\(?:[^"\\]|\\.)*"[ \t\r\n]*:'
    # NaN / Infinity are not JSON (Jackson refuses them); Arrow's parser takes them.
    return f'"(?:{"|".join(alts)})"|{escaped_key}|NaN|Infinity'


_HIVE_COL = re.compile(r"_col[0-9]+", re.IGNORECASE)


@dataclass(slots=True)
class _Flag:
    """A mutable boolean a frozen bound writer keeps (what it learned of its input)."""

    value: bool = False


@dataclass(frozen=True, slots=True)
class _BoundJson:
    names: tuple[str, ...]
    types: tuple[HiveType, ...]
    convs: tuple[JsonConv, ...]
    index: dict[str, int] = field(hash=False)
    n_columns: int
    partition_convs: tuple[Callable[[str], str | None], ...]
    max_record_bytes: int
    arrow_schema: pa.Schema
    read_schema: pa.Schema | None
    suspect_keys: str
    #: Whether a block without escapes, NaN or Infinity may skip the suspect-key regex by
    #: reading with unknown keys refused (no column is named like Hive's ``_colN``, and no
    #: decimal column: the regex also finds their exponent values).
    strict_keys: bool
    #: Set once a block held keys the table does not have: later blocks go straight to
    #: the regex check (the refused read would fail each time).
    seen_extra_keys: _Flag = field(hash=False, compare=False)

    def encode(self, record: bytes) -> Encoded:
        if len(record) > self.max_record_bytes:
            check_record_size(record, self.max_record_bytes)
        return self.encode_object(parse_json(record), record)

    def encode_object(self, obj: object, record: bytes) -> Encoded:
        """:meth:`encode` of a record already parsed by :func:`parse_json` (or a part of
        one: the change-event parser converts a Debezium envelope's ``after`` here);
        ``record`` is what errors show."""
        if not isinstance(obj, dict):
            raise record_error(f"expected a JSON object, got {type(obj).__name__}", record)
        vals: list[object] = [None] * len(self.names)
        index = self.index
        for key, value in obj.items():
            i = index.get(key.lower())
            if i is None:
                m = _COL_INDEX_RE.fullmatch(key)  # COL_INDEX_PARSING: _colN is column N
                if m is None or len(m[1]) > 6 or int(m[1]) >= len(vals):
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
            except ConvError as e:
                raise column_error(self.names[i], v, str(e), record) from None
        pvals: list[str | None] = []
        for j, conv in enumerate(self.partition_convs):
            v = vals[ncols + j]
            text = None if v is None else conv(_json_value_text(v))
            pvals.append(partition_value(self.names[ncols + j], text, v, record))
        return tuple(row), tuple(pvals)

    def encode_block(self, records: Sequence[bytes]) -> EncodedBlock:
        """Bulk :meth:`encode`: ``pyarrow.json`` with the table's explicit schema."""
        n = len(records)
        if self.read_schema is None:
            return self._assemble(records, None, [], [], np.ones(n, dtype=bool))
        table: pa.Table | None = None
        quick = joined_lines(records, self.max_record_bytes)
        nbytes = -1 if quick is None else len(quick.data) - n + 1
        if quick is not None and self._plain(records, quick):
            table = self._read_plain(quick)
        if table is not None and table.num_rows == n:
            suspect = np.zeros(n, dtype=bool)
            rows_idx = np.arange(n, dtype=np.int64)
        else:
            arr, suspect = size_suspects(records, self.max_record_bytes)
            nbytes = binary_nbytes(arr)
            text, bad = decode_utf8(arr)
            suspect |= bad | contains(arr, b"\n") | contains(arr, b"\r")
            # Not starting an object (blank, leading space): see :meth:`_plain`.
            suspect |= ~np.asarray(
                pc.fill_null(pc.starts_with(arr, "{"), False).to_numpy(zero_copy_only=False),
                dtype=bool,
            )
            suspect |= np.asarray(
                pc.fill_null(pc.match_substring_regex(text, self.suspect_keys), False).to_numpy(
                    zero_copy_only=False
                ),
                dtype=bool,
            )
            lengths = pc.binary_length(arr).to_numpy(zero_copy_only=False)
            for i in np.flatnonzero(lengths > _BRACKET_LIMIT).tolist():
                suspect[i] |= _bracket_heavy(records[i])
            keep = np.flatnonzero(~suspect)
            table, rows_idx, failed = self._parse(records, keep)
            suspect[failed] = True
            if table is None:
                return self._assemble(records, None, [], [], suspect)
        columns, parts, row_suspect = self.convert_read(table)
        suspect[rows_idx[row_suspect]] = True
        return self._assemble(records, rows_idx, columns, parts, suspect, nbytes=nbytes)

    def convert_read(self, table: pa.Table) -> tuple[list[pa.Array], list[pa.Array], np.ndarray]:
        """The columns of a ``read_schema`` table converted to the table's types (and the
        partition columns to their string form), and a mask of the rows to take the row
        path (:meth:`encode`): a value out of range or that does not parse. Shared with
        the change-event parser, which reads Debezium's ``after`` with ``read_schema``."""
        row_suspect = np.zeros(table.num_rows, dtype=bool)
        columns: list[pa.Array] = []
        for i, t in enumerate(self.types):
            col = table.column(i).combine_chunks()
            if t.kind in INT_RANGES:
                try:
                    # A checked cast: the usual block, every value in range, in one kernel.
                    col = pc.cast(col, t.to_arrow())
                except pa.ArrowInvalid:
                    lo, hi = INT_RANGES[t.kind]
                    ok = pc.and_(pc.greater_equal(col, lo), pc.less_equal(col, hi))
                    row_suspect |= _false_where_null(pc.invert(ok))
                    col = pc.cast(pc.if_else(ok, col, pa.nulls(len(col), col.type)), t.to_arrow())
            elif t.kind == "float":
                col = pc.cast(col, pa.float32())
            elif t.kind == "decimal":
                col, over = round_decimal(col, t)
                row_suspect |= over
            elif t.kind in STRING_KINDS:
                col = fit_text_array(col, t)
            elif t.kind in ("date", "timestamp"):
                col, sus = convert_text(col, t, empty_is_null=False)
                row_suspect |= sus
            elif t.kind == "binary":
                col, sus = convert_values(col.to_pylist(), self.convs[i], block_arrow_type(t))
                row_suspect |= sus
            columns.append(col)
        parts: list[pa.Array] = []
        for j, conv in enumerate(self.partition_convs):
            col = pc.cast(table.column(self.n_columns + j).combine_chunks(), pa.string())
            values, sus = convert_partition(self.names[self.n_columns + j], col, conv)
            row_suspect |= sus
            parts.append(values)
        return columns, parts, row_suspect

    def _plain(self, records: Sequence[bytes], lines: JoinedLines) -> bool:
        """Whether the whole block may be read at once: every record starts an object, valid
        UTF-8 (pyarrow.json does not check), no bracket-heavy record.

        The first condition keeps the row count honest: pyarrow.json skips a blank line and
        reads ``{..} {..}`` as two rows, so one record of each would read as two good rows.
        A record starting otherwise (blank, leading space, not an object) goes the row way."""
        if not lines.all_start_with(_OPEN_BRACE):
            return False
        # ASCII is valid UTF-8: the usual block needs no decoded copy to tell.
        if not lines.data.isascii():
            try:
                lines.data.decode("utf-8")
            except UnicodeDecodeError:
                return False
        if lines.longest_below(_BRACKET_LIMIT + 1):
            return True
        long_ones = np.flatnonzero(lines.lengths() > _BRACKET_LIMIT).tolist()
        return not any(_bracket_heavy(records[i]) for i in long_ones)

    def _read_plain(self, lines: JoinedLines) -> pa.Table | None:
        """Read a plain block at once, or None when some record needs the row path.

        A key needing the row path (a case variant of a column name, ``_colN``, a key
        written with escapes) is always a key the table does not have, so a block without
        backslashes, ``NaN`` or ``Infinity`` that reads with unknown keys refused has
        none: it skips the suspect-key regex, a pass over the block costing about as much
        as a tenth of the parse. Other blocks (and every block once one held extra keys)
        take the regex check and read with unknown keys ignored.
        """
        data = lines.data
        if (
            self.strict_keys
            and not self.seen_extra_keys.value
            and b"\\" not in data
            and lacks(data, b"NaN")
            and lacks(data, b"Infinity")
        ):
            try:
                return self._read(data, threads=True, unknown="error")
            except pa.ArrowInvalid:
                pass  # an unknown key or a bad record: the regex check tells which
        text = pa.array([data.decode("utf-8")])  # valid: checked by _plain
        if pc.match_substring_regex(text, self.suspect_keys)[0].as_py():
            return None
        try:
            table = self._read(data, threads=True)
        except pa.ArrowInvalid:
            return None
        self.seen_extra_keys.value = self.strict_keys
        return table

    def _read(self, data: bytes, *, threads: bool, unknown: str = "ignore") -> pa.Table:
        """``pyarrow.json`` of ``data`` (whole lines) with the read schema; ``threads``:
        in parts on every core (:func:`read_line_parts`), else on the caller's thread."""
        assert self.read_schema is not None
        parse_options = pa_json.ParseOptions(
            explicit_schema=self.read_schema,
            unexpected_field_behavior=unknown,
            newlines_in_values=False,
        )

        def read(buf: pa.Buffer) -> pa.Table:
            return pa_json.read_json(
                # Arrow's own reader over the bytes: zero-copy, no interpreter lock (a
                # Python file object costs a copy and the lock per block).
                pa.BufferReader(buf),
                # One block: a line may not straddle two.
                read_options=pa_json.ReadOptions(
                    use_threads=False, block_size=max(1 << 20, len(buf) + 1)
                ),
                parse_options=parse_options,
            )

        table = read_line_parts(data, read) if threads else read(pa.py_buffer(data))
        return table.select(self.read_schema.names)

    def _parse(
        self, records: Sequence[bytes], keep: np.ndarray
    ) -> tuple[pa.Table | None, np.ndarray, list[int]]:
        """Parse the records ``keep`` with pyarrow.json; a block that fails (or yields
        another row count) is halved until the failing records are isolated."""
        # Below this size a failing piece goes to the row path whole: at most ~2 x 128
        # parses however many records are bad, and one bad record costs one leaf of rows.
        return read_halving(
            keep,
            lambda idx: self._read(b"\n".join([records[i] for i in idx.tolist()]), threads=False),
            leaf=max(64, len(keep) // 128),
        )

    def _assemble(
        self,
        records: Sequence[bytes],
        rows_idx: np.ndarray | None,
        columns: Sequence[pa.Array],
        parts: Sequence[pa.Array],
        suspect: np.ndarray,
        *,
        nbytes: int = -1,
    ) -> EncodedBlock:
        return assemble(
            records,
            self.arrow_schema,
            self.names[self.n_columns :],
            rows_idx,
            columns,
            parts,
            suspect,
            self.encode,
            nbytes=nbytes,
        )


_OPEN_BRACE = ord("{")


def _bracket_heavy(record: bytes) -> bool:
    return record.count(b"[") + record.count(b"{") > _BRACKET_LIMIT


def _false_where_null(arr: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


@dataclass(frozen=True, slots=True, kw_only=True)
class StrictJsonWriter:
    """One UTF-8 JSON object per record (Hive ``StrictJsonWriter`` / ``JsonSerDe``).

    Args:
        line_delimiter_pattern: For :func:`split_records` (default ``[\\r\\n]``).
        max_record_bytes: Longer records are rejected before parsing (default 16 MiB).
    """

    line_delimiter_pattern: str = DEFAULT_LINE_DELIMITER_PATTERN
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES

    def __post_init__(self) -> None:
        compile_line_pattern(self.line_delimiter_pattern)
        check_max_record_bytes(self.max_record_bytes)

    def bind(
        self, schema: TableSchema, *, partition_columns: PartitionColumns = ()
    ) -> BoundRecordWriter:
        """Build the per-column converters for ``schema``; see :class:`RecordWriter`."""
        pnames, ptypes = _partitions(schema, partition_columns)
        names = schema.names + pnames
        read_types = [_read_type(t) for _, t in schema.columns]
        read_types += [
            pa.int64()
            if t.kind in INT_RANGES
            else pa.bool_()
            if t.kind == "boolean"
            else pa.string()
            for t in ptypes
        ]
        read_schema = (
            None
            if any(r is None for r in read_types)
            else pa.schema([pa.field(n, r) for n, r in zip(names, read_types, strict=True)])
        )
        return _BoundJson(
            names=names,
            types=tuple(t for _, t in schema.columns),
            convs=tuple(_json_conv(t) for _, t in schema.columns),
            index={n: i for i, n in enumerate(names)},
            n_columns=len(schema.columns),
            partition_convs=tuple(partition_text_conv(t) for t in ptypes),
            max_record_bytes=self.max_record_bytes,
            arrow_schema=block_schema(schema),
            read_schema=read_schema,
            suspect_keys=_suspect_pattern(names, schema.columns),
            strict_keys=not any(_HIVE_COL.fullmatch(n) for n in names)
            and not any(t.kind == "decimal" for _, t in schema.columns),
            seen_extra_keys=_Flag(),
        )


def read_halving(
    keep: np.ndarray, read: Callable[[np.ndarray], pa.Table], *, leaf: int
) -> tuple[pa.Table | None, np.ndarray, list[int]]:
    """``read`` the records ``keep`` (their indices) in one piece; a piece that fails
    (``ArrowInvalid``) or yields another row count is halved until pieces of ``leaf``
    records or fewer, which are given up whole. Returns the pieces read (concatenated),
    the indices of their rows in order, and the indices given up (for the row path)."""
    pieces: list[tuple[np.ndarray, pa.Table]] = []
    failed: list[int] = []

    def step(idx: np.ndarray) -> None:
        if not len(idx):
            return
        try:
            t = read(idx)
            if t.num_rows == len(idx):
                pieces.append((idx, t))
                return
        except pa.ArrowInvalid:
            pass
        if len(idx) <= leaf:
            failed.extend(idx.tolist())
            return
        mid = len(idx) // 2
        step(idx[:mid])
        step(idx[mid:])

    step(keep)
    if not pieces:
        return None, np.zeros(0, dtype=np.int64), failed
    table = pa.concat_tables([t for _, t in pieces])
    return table, np.concatenate([i for i, _ in pieces]), failed
