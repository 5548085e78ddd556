"""The columnar (bulk) half of the record writers: Arrow arrays in, typed Arrow columns out.

A writer's ``encode_block`` parses a whole block with one Arrow call (``pyarrow.csv``,
``pyarrow.json``, ``pyarrow.compute.extract_regex``), then converts each column here. A
column converter returns the typed array and a *suspect* mask: rows whose values it cannot
convert with certainty (anything outside the shapes its kernels are gated on, every value
the per-record rule would reject). :func:`assemble` re-runs the per-record ``encode`` on
exactly the suspect records, so a suspect row ends as the per-record path decides: the
same value or the same :class:`~acidstream.acid.errors.SerializationError`. The gates use the
patterns of ``acidstream.ingest.record_convert`` and the values they admit convert with kernels
that give the per-record result (checked by ``tests/ingest/test_record_bulk.py``).
Low-cardinality values (dates, partition values) run through the per-record converter
once per distinct value.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import itertools
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.errors import SerializationError
from acidstream.acid.partition_name import check_partition_value
from acidstream.acid.schema import HiveType, TableSchema
from acidstream.acid.thread_pools import SharedPool
from acidstream.ingest.number_gate import float_gate, int_gate, plain_float_cast, plain_int_cast
from acidstream.ingest.record_common import Encoded, EncodedBlock
from acidstream.ingest.record_convert import (
    INT_RANGES,
    STRING_KINDS,
    ConvError,
    parse_date,
)

__all__ = [
    "BYTE_GATED_KINDS",
    "JoinedLines",
    "assemble",
    "binary_nbytes",
    "block_arrow_type",
    "block_read_size",
    "block_schema",
    "buffer_has",
    "contains",
    "convert_partition",
    "convert_text",
    "convert_values",
    "decimal_read_type",
    "decode_utf8",
    "fit_text_array",
    "joined_lines",
    "lacks",
    "read_line_parts",
    "round_decimal",
    "size_suspects",
]

_EPOCH = _dt.date(1970, 1, 1)
# Gates: shapes whose Arrow conversion equals the per-record rule (RE2 syntax, anchored).
_DATE_GATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_TS_GATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?)?$"

#: Column kinds whose gate checks the text's bytes (``acidstream.ingest.number_gate``): a value that is
#: not valid UTF-8 fails it, so their text may skip UTF-8 validation.
BYTE_GATED_KINDS = frozenset({"float", "double", *INT_RANGES})

#: Column kinds the vectorized text converter handles (others go value by value).
VECTOR_KINDS = frozenset(
    {"boolean", "float", "double", "decimal", "date", "timestamp", *STRING_KINDS, *INT_RANGES}
)


def block_read_size(nbytes: int, longest: int) -> int:
    """The ``block_size`` of an Arrow JSON/CSV read of ``nbytes`` of lines: blocks small
    enough for the reader's threads to share a 10,000-line block (Arrow's 1 MiB default
    leaves a 0.5 MB block to one thread: 5.7 ms vs 3.1 ms in 64 KiB blocks for 10,000
    JSON lines on 2 cores), never smaller than the longest line (a line may not straddle
    two blocks)."""
    return max(longest + 1, min(1 << 20, max(64 << 10, nbytes // 8)))


_PART_MIN = 64 << 10  # bytes: below this a part's parse costs less than handing it over
# The parse parts' threads (a forked child makes its own: acidstream.acid.thread_pools).
_parts_pool = SharedPool("acidstream-read", lambda: pa.cpu_count() - 1)


def read_line_parts(data: bytes, read: Callable[[pa.Buffer], pa.Table]) -> pa.Table:
    """``read`` (a single-threaded Arrow read of whole lines) over ``data`` cut at line
    breaks into one part per CPU (Arrow's count, parts of 64 KiB or more), the parts
    after the first read on a shared pool while the caller reads the first; the tables
    concatenated in order. The first error, in part order, is raised once every part
    ended. Any thread.

    For a block of some 10,000 lines this beats one read with Arrow's own threads: the
    reader's stages (chunking, parsing, converting the blocks) hand over between its
    threads per 64 KiB block, and on a busy machine each handover waits for a core
    (30 reads of 10,000 JSON lines on 2 shared cores: 132 vs 225 ms, the same CPU).
    """
    buf = pa.py_buffer(data)
    k = min(pa.cpu_count(), len(data) // _PART_MIN)
    cuts = [0]
    for i in range(1, k):
        nl = data.find(b"\n", max(cuts[-1], len(data) * i // k))
        if nl < 0 or nl + 1 >= len(data):
            break
        cuts.append(nl + 1)
    parts = [buf.slice(a, b - a - 1) for a, b in itertools.pairwise(cuts)]
    parts.append(buf.slice(cuts[-1]))
    if len(parts) == 1:
        return read(buf)
    futures: list[Future[pa.Table]] = [_parts_pool.get().submit(read, p) for p in parts[1:]]
    tables: list[pa.Table] = []
    error: BaseException | None = None
    try:
        tables.append(read(parts[0]))
    except BaseException as e:
        error = e
    for f in futures:
        try:
            tables.append(f.result())
        except BaseException as e:
            error = error or e
    if error is not None:
        raise error
    return pa.concat_tables(tables)


def block_arrow_type(t: HiveType) -> pa.DataType:
    """The Arrow type of a Hive type in an :class:`EncodedBlock`: ``HiveType.to_arrow()``
    except ``timestamp`` -> ``timestamp("us")`` (nanosecond Arrow timestamps end in 2262,
    Hive's range is 0001..9999; the row path stops at microseconds too)."""
    if t.kind == "timestamp":
        return pa.timestamp("us")
    if t.kind == "array":
        return pa.list_(block_arrow_type(t.children[0]))
    if t.kind == "map":
        return pa.map_(block_arrow_type(t.children[0]), block_arrow_type(t.children[1]))
    if t.kind == "struct":
        return pa.struct(
            [
                pa.field(n, block_arrow_type(c))
                for n, c in zip(t.field_names, t.children, strict=True)
            ]
        )
    return t.to_arrow()


def block_schema(schema: TableSchema) -> pa.Schema:
    """The Arrow schema of :attr:`EncodedBlock.table` for ``schema``."""
    return pa.schema([pa.field(n, block_arrow_type(t)) for n, t in schema.columns])


# --------------------------------------------------------------------------
# Column converters


def _np_mask(arr: pa.Array) -> np.ndarray:
    """A boolean Arrow array (nulls = False) as a numpy bool array."""
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


def _gate(arr: pa.Array, pattern: str) -> pa.Array:
    """Rows matching an anchored RE2 pattern (never null: a NULL field is not a match)."""
    return pc.fill_null(pc.match_substring_regex(arr, pattern), False)


def _and(a: pa.Array, b: pa.Array) -> pa.Array:
    """Logical and where null counts as false."""
    return pc.fill_null(pc.and_kleene(a, b), False)


def _where(mask: pa.Array, arr: pa.Array) -> pa.Array:
    """``arr`` where ``mask`` is true, else null (no copy when every row is kept)."""
    if mask.null_count == 0 and pc.all(mask).as_py() is not False:
        return arr
    return pc.if_else(mask, arr, pa.nulls(len(arr), arr.type))


def _keep(gate: np.ndarray, arr: pa.Array) -> pa.Array:
    """``arr`` where the numpy ``gate`` holds, else null (no copy when the gate leaves
    out only null rows)."""
    if gate.all() or not (arr.is_valid().to_numpy(zero_copy_only=False) & ~gate).any():
        return arr
    return pc.if_else(pa.array(gate), arr, pa.nulls(len(arr), arr.type))


def fit_text_array(arr: pa.Array, t: HiveType) -> pa.Array:
    """varchar/char fitting, vectorized (code points, as :func:`record_convert.fit_text`)."""
    if t.kind == "varchar":
        return pc.utf8_slice_codeunits(arr, 0, t.params[0])
    if t.kind == "char":
        n = t.params[0]
        return pc.utf8_rpad(pc.utf8_slice_codeunits(arr, 0, n), n, " ")
    return arr


def _per_distinct(
    arr: pa.Array, fn: Callable[[str], object], out_type: pa.DataType
) -> tuple[pa.Array, np.ndarray]:
    """Run a per-record converter once per distinct value; ConvError marks rows suspect."""
    enc = pc.dictionary_encode(arr)
    values = enc.dictionary.to_pylist()
    out: list[object] = []
    bad = np.zeros(len(values) + 1, dtype=bool)
    for i, v in enumerate(values):
        try:
            out.append(fn(v))
        except ConvError:
            out.append(None)
            bad[i] = True
    idx = enc.indices
    result = pc.take(pa.array(out, out_type), idx)
    codes = np.asarray(pc.fill_null(idx, len(values)).to_numpy(zero_copy_only=False))
    return result, bad[codes]


def convert_text(arr: pa.Array, t: HiveType, *, empty_is_null: bool) -> tuple[pa.Array, np.ndarray]:
    """Text fields (string array; null = NULL field) -> typed array + suspect mask.

    ``empty_is_null``: LazySimpleSerDe/RegexSerDe make an empty field NULL for non-text
    types; JSON text goes to the converter as it is (where ``""`` is an error).
    """
    k = t.kind
    n = len(arr)
    if k in STRING_KINDS:
        return fit_text_array(arr, t), np.zeros(n, dtype=bool)
    suspect = np.zeros(n, dtype=bool)
    if not empty_is_null:
        suspect |= _np_mask(pc.equal(arr, ""))

    def outside(gate: np.ndarray) -> np.ndarray:
        """Non-empty fields the gate did not pass (none, when it passed every field:
        the usual block, spared three kernels and two conversions)."""
        if gate.all():
            return np.zeros(n, dtype=bool)
        return _np_mask(pc.and_(pc.not_equal(arr, ""), pa.array(~gate)))

    if k in INT_RANGES:
        vals = plain_int_cast(arr, t.to_arrow())  # the usual block: every value plain digits
        if vals is not None:
            return vals, suspect
        gate, plus = int_gate(arr)
        clean = _keep(gate, arr)
        if plus:
            clean = pc.replace_substring_regex(clean, r"^\+", "")
        out_of_gate = outside(gate)
        try:
            # Arrow's cast checks the type's range: when every gated value fits, it is
            # the whole rule (one kernel instead of a 64-bit cast and two comparisons).
            return pc.cast(clean, t.to_arrow()), suspect | out_of_gate
        except pa.ArrowInvalid:
            pass
        wide = pc.cast(clean, pa.int64())
        lo, hi = INT_RANGES[k]
        ok = _and(pa.array(gate), _and(pc.greater_equal(wide, lo), pc.less_equal(wide, hi)))
        suspect |= _np_mask(pc.and_(pc.not_equal(arr, ""), pc.invert(ok)))
        return pc.cast(_where(ok, wide), t.to_arrow()), suspect
    if k in ("float", "double"):
        vals = plain_float_cast(arr)  # the usual block: every value plain decimal text
        if vals is None:
            gate = float_gate(arr)
            vals = pc.cast(_keep(gate, arr), pa.float64())
            suspect |= outside(gate)
        if k == "float":
            # Via a double, as the row rule (Float.parseFloat would round once).
            vals = pc.cast(vals, pa.float32())
        return vals, suspect
    nonempty = pc.not_equal(arr, "")
    if k == "boolean":
        low = pc.utf8_lower(arr)
        is_true = pc.equal(low, "true")
        ok = pc.fill_null(pc.or_(is_true, pc.equal(low, "false")), False)
        suspect |= _np_mask(pc.and_(nonempty, pc.invert(ok)))
        return _where(ok, is_true), suspect
    if k == "decimal":
        p, s = t.params
        whole = p - s
        int_part = "0" if whole == 0 else f"(?:0|[1-9][0-9]{{0,{whole - 1}}})"
        ok = _gate(arr, rf"^[+-]?{int_part}(?:\.[0-9]{{0,{decimal_read_scale(t)}}})?$")
        vals, over = round_decimal(pc.cast(_where(ok, arr), decimal_read_type(t)), t)
        suspect |= over | _np_mask(pc.and_(nonempty, pc.invert(ok)))
        return vals, suspect
    if k == "date":
        ok = _gate(arr, _DATE_GATE)
        vals, bad = _per_distinct(_where(ok, arr), parse_date, pa.date32())
        suspect |= bad | _np_mask(pc.and_(nonempty, pc.invert(ok)))
        return vals, suspect
    if k == "timestamp":
        return _timestamps(arr, nonempty, suspect)
    raise AssertionError(f"no vectorized converter for {t}")


def decimal_read_scale(t: HiveType) -> int:
    """Fraction digits a decimal(p,s) value is read with before rounding: as many as
    precision 38 holds next to p-s+1 integer digits (room for the overflow bound 10^(p-s))."""
    return 37 - max(t.params[0] - t.params[1], 1)


def decimal_read_type(t: HiveType) -> pa.DataType:
    """The exact Arrow type decimal text is read into before rounding to ``t``."""
    return pa.decimal128(38, decimal_read_scale(t))


def round_decimal(wide: pa.Array, t: HiveType) -> tuple[pa.Array, np.ndarray]:
    """Round HALF_UP (away from zero, as ``enforce_decimal``) to decimal(p,s); values that
    then need more than p-s integer digits are null and suspect (the row rule rejects them)."""
    p, s = t.params
    rounded = pc.round(wide, ndigits=s, round_mode="half_towards_infinity")
    limit = pa.scalar(decimal.Decimal(10) ** (p - s), wide.type)
    fits = pc.fill_null(pc.less(pc.abs(rounded), limit), True)
    over = ~_np_mask(fits)
    return pc.cast(_where(fits, rounded), pa.decimal128(p, s)), over


# Hive's first instant (0001-01-01 00:00:00) in microseconds since the epoch: Arrow's
# ISO 8601 parser accepts year 0, which Hive's Timestamp.valueOf does not.
_TS_MIN_US = -62_135_596_800_000_000


def _timestamps(
    arr: pa.Array, nonempty: pa.Array, suspect: np.ndarray
) -> tuple[pa.Array, np.ndarray]:
    """Timestamp text -> ``timestamp("us")``: Hive's shapes (``yyyy-MM-dd``, with
    `` HH:mm:ss`` or ``THH:mm:ss`` and up to 6 fraction digits); other text, an
    impossible date or time, or a year outside 1..9999 marks its row suspect (the row
    path then decides, as ``Timestamp.valueOf`` would)."""
    ok = _gate(arr, _TS_GATE)
    if ok.true_count == len(arr) - arr.null_count:
        # The usual column: every value has a shape Hive reads. Arrow's cast parses those
        # shapes alike (its parser refuses a day the month lacks, hour 24, minute or
        # second 60) in one kernel, ~20x the field-by-field path below; a value it refuses
        # or a year 0 sends the whole column there instead (same result, same suspects).
        try:
            fast = pc.cast(arr, pa.timestamp("us"))
        except pa.ArrowInvalid:
            pass
        else:
            low = pc.min(fast.cast(pa.int64())).as_py()
            if low is None or low >= _TS_MIN_US:
                return fast, suspect
    return _timestamps_by_field(arr, ok, nonempty, suspect)


def _timestamps_by_field(
    arr: pa.Array, ok: pa.Array, nonempty: pa.Array, suspect: np.ndarray
) -> tuple[pa.Array, np.ndarray]:
    """:func:`_timestamps` field by field: the date part per distinct value
    (``parse_date``), hours, minutes, seconds and fraction as integers, each checked."""
    gated = _where(ok, arr)
    days, bad = _per_distinct(pc.utf8_slice_codeunits(gated, 0, 10), parse_date, pa.date32())

    def part(start: int, stop: int) -> pa.Array:
        return pc.cast(
            pc.if_else(
                pc.greater(pc.utf8_length(gated), start),
                pc.utf8_slice_codeunits(gated, start, stop),
                "0",
            ),
            pa.int64(),
        )

    hh, mm, ss = part(11, 13), part(14, 16), part(17, 19)
    frac = pc.if_else(
        pc.greater(pc.utf8_length(gated), 20),
        pc.utf8_rpad(pc.utf8_slice_codeunits(gated, 20, 26), 6, "0"),
        "0",
    )
    micros = pc.cast(frac, pa.int64())
    in_range = _and(pc.less_equal(hh, 23), _and(pc.less_equal(mm, 59), pc.less_equal(ss, 59)))
    day_us = pc.multiply(pc.cast(pc.cast(days, pa.int32()), pa.int64()), 86_400_000_000)
    tod = pc.add(
        pc.multiply(pc.add(pc.multiply(pc.add(pc.multiply(hh, 60), mm), 60), ss), 1_000_000),
        micros,
    )
    vals = pc.cast(_where(in_range, pc.add(day_us, tod)), pa.timestamp("us"))
    suspect |= bad | _np_mask(pc.and_(nonempty, pc.invert(_and(ok, in_range))))
    return vals, suspect


def convert_values(
    values: Sequence[Any], conv: Callable[[Any], object], out_type: pa.DataType
) -> tuple[pa.Array, np.ndarray]:
    """Value-by-value conversion with the per-record converter (binary, nested types)."""
    out: list[object] = []
    suspect = np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values):
        if v is None:
            out.append(None)
            continue
        try:
            out.append(conv(v))
        except ConvError:
            out.append(None)
            suspect[i] = True
    return pa.array(out, out_type), suspect


def convert_partition(
    key: str, arr: pa.Array, conv: Callable[[str], str | None]
) -> tuple[pa.Array, np.ndarray]:
    """Raw partition text (null = NULL) -> Hive's string form once per distinct value;
    values no directory can hold mark their rows suspect (``encode`` rejects them)."""

    def one(v: str) -> str | None:
        s = conv(v)
        if s is not None:
            try:
                check_partition_value(key, s)
            except SerializationError as e:
                raise ConvError(str(e)) from None
        return s

    return _per_distinct(arr, one, pa.string())


def decode_utf8(arr: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Binary -> string; invalid UTF-8 rows become null and suspect."""
    try:
        return pc.cast(arr, pa.string()), np.zeros(len(arr), dtype=bool)
    except pa.ArrowInvalid:
        pass
    vals = arr.to_pylist()
    bad = np.zeros(len(vals), dtype=bool)
    for i, v in enumerate(vals):
        if v is not None:
            try:
                v.decode("utf-8")
            except UnicodeDecodeError:
                bad[i] = True
    clean = pc.if_else(pa.array(bad), pa.nulls(len(arr), arr.type), arr)
    return pc.cast(clean, pa.string()), bad


# --------------------------------------------------------------------------
# Assembling the block


def assemble(
    records: Sequence[bytes],
    schema: pa.Schema,
    partition_names: Sequence[str],
    rows_idx: np.ndarray | None,
    columns: Sequence[pa.Array],
    partitions: Sequence[pa.Array],
    suspect: np.ndarray,
    encode: Callable[[bytes], Encoded],
    *,
    nbytes: int = -1,
) -> EncodedBlock:
    """Build the block: bulk-converted rows that are not suspect, ``encode`` for the rest.

    ``columns`` and ``partitions`` hold the values of the records ``rows_idx`` (ascending;
    ``None``: no record was converted in bulk); ``suspect`` covers every record, and a
    record not in ``rows_idx`` must be suspect.
    """
    fallback_idx: list[int] = []
    fallback_rows: list[Encoded] = []
    rejected: list[tuple[int, SerializationError]] = []
    for i in np.flatnonzero(suspect).tolist():
        try:
            fallback_rows.append(encode(records[i]))
            fallback_idx.append(i)
        except SerializationError as e:
            rejected.append((i, e))
    pnames = list(partition_names)
    if rows_idx is not None and len(rows_idx):
        keep = ~suspect[rows_idx]
        good = rows_idx[keep]
        take = None if keep.all() else pa.array(np.flatnonzero(keep))
        cols = [c if take is None else c.take(take) for c in columns]
        fast = pa.Table.from_arrays(
            [
                c if c.type.equals(f.type) else c.cast(f.type)
                for c, f in zip(cols, schema, strict=True)
            ],
            schema=schema,
        )
        fparts = [p if take is None else p.take(take) for p in partitions]
    else:
        good = np.zeros(0, dtype=np.int64)
        fast = schema.empty_table()
        fparts = [pa.array([], pa.string()) for _ in pnames]
    if fallback_rows:
        slow = pa.Table.from_arrays(
            [pa.array([r[c] for r, _ in fallback_rows], f.type) for c, f in enumerate(schema)],
            schema=schema,
        )
        sparts = [
            pa.array([pv[j] for _, pv in fallback_rows], pa.string()) for j in range(len(pnames))
        ]
        src = np.concatenate([good, np.asarray(fallback_idx, dtype=np.int64)])
        order = np.argsort(src, kind="stable")
        perm = pa.array(order)
        table = pa.concat_tables([fast, slow]).take(perm)
        parts = [pa.concat_arrays([a, b]).take(perm) for a, b in zip(fparts, sparts, strict=True)]
        indices = src[order]
    else:
        table, parts, indices = fast, list(fparts), good
    return EncodedBlock(
        table=table.combine_chunks(),
        partitions=pa.Table.from_arrays(parts, names=pnames) if pnames else None,
        rejected=tuple(rejected),
        good_indices=pa.array(np.asarray(indices, dtype=np.int64), pa.int64()),
        nbytes=nbytes,
    )


def size_suspects(records: Sequence[bytes], limit: int) -> tuple[pa.Array, np.ndarray]:
    """The records as one binary array, and the ones over the size limit or empty."""
    arr = pa.array(records, pa.binary())
    lengths = pc.binary_length(arr).to_numpy(zero_copy_only=False)
    return arr, (lengths > limit) | (lengths == 0)


def contains(arr: pa.Array, needle: bytes | str) -> np.ndarray:
    """Rows of a binary/string array containing ``needle``."""
    return _np_mask(pc.match_substring(arr, needle))


def lacks(data: bytes, word: bytes) -> bool:
    """``word not in data``, answered by one ``memchr`` for its first byte when that byte
    is absent (a multi-byte ``in`` costs 0.3-0.4 ms on a 0.5 MB block, holding the GIL;
    ``memchr`` 10 us)."""
    return word[:1] not in data or word not in data


class JoinedLines:
    """A block of plain lines (non-empty, no CR/LF) joined by ``\\n`` for one Arrow read.

    Holds the offsets of the line breaks (one vectorized pass found them): every question
    about the lines (their first bytes, their lengths) is then a pass over one offset per
    line, not over the bytes.
    """

    __slots__ = ("_lengths", "_newlines", "data")

    def __init__(self, data: bytes, newlines: np.ndarray) -> None:
        self.data = data
        self._newlines = newlines  # offsets of the n - 1 line breaks
        self._lengths: np.ndarray | None = None

    def newlines(self) -> np.ndarray:
        """The offsets of the line breaks (``n - 1`` of them)."""
        return self._newlines

    def lengths(self) -> np.ndarray:
        """Each line's length in bytes."""
        if self._lengths is None:
            nl = self._newlines
            ends = np.append(nl, len(self.data))
            self._lengths = ends - np.concatenate(([0], nl + 1))
        return self._lengths

    def all_start_with(self, byte: int) -> bool:
        """Whether every line's first byte is ``byte`` (one gather, no pass per line)."""
        d = np.frombuffer(self.data, dtype=np.uint8)
        return bool(d[0] == byte) and bool((d[self._newlines + 1] == byte).all())

    def longest_below(self, bound: int) -> bool:
        """Whether every line is shorter than ``bound`` bytes."""
        return len(self.data) < bound or int(self.lengths().max()) < bound

    def longest_bound(self) -> int:
        """The longest line's length, or a bound above it that gives the same
        :func:`block_read_size` (what a read of these lines needs to know)."""
        size = block_read_size(len(self.data), 0)
        return size - 1 if self.longest_below(size) else int(self.lengths().max())


def joined_lines(records: Sequence[bytes], limit: int) -> JoinedLines | None:
    """The records joined by ``\\n``, when every record is a plain line: non-empty, within
    ``limit``, without CR/LF. ``None`` otherwise (the caller then finds the odd records one
    by one). Costs a few passes over the bytes, none per record."""
    n = len(records)
    if not n or not records[0] or not records[-1]:  # (an empty first or last record)
        return None
    data = b"\n".join(records)
    if data.find(b"\r") >= 0:
        return None
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    # A record holding a line break, or an empty one (two breaks in a row).
    if len(newlines) != n - 1 or (n > 2 and bool((np.diff(newlines) == 1).any())):
        return None
    lines = JoinedLines(data, newlines)
    if len(data) > limit and not lines.longest_below(limit + 1):
        return None
    return lines


def binary_nbytes(arr: pa.Array) -> int:
    """The bytes of the values of a binary/string array (from its offsets)."""
    if not len(arr):
        return 0
    large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    offsets = np.frombuffer(
        arr.buffers()[1],
        np.int64 if large else np.int32,
        len(arr) + 1,
        arr.offset * (8 if large else 4),
    )
    return int(offsets[-1]) - int(offsets[0])


def buffer_has(arr: pa.Array, needles: bytes) -> bool:
    """Whether any value of a binary/string array holds one of the bytes ``needles``."""
    buf = arr.buffers()[2]
    if buf is None:
        return False
    data = np.frombuffer(buf, dtype=np.uint8)
    return bool(np.isin(data, np.frombuffer(needles, dtype=np.uint8)).any())


class _Assemblable(Protocol):
    @property
    def arrow_schema(self) -> pa.Schema: ...
    @property
    def partition_names(self) -> tuple[str, ...]: ...

    def encode(self, record: bytes) -> Encoded: ...


def assemble_bound(
    bound: _Assemblable,
    records: Sequence[bytes],
    rows_idx: np.ndarray | None,
    columns: Sequence[pa.Array],
    partitions: Sequence[pa.Array],
    suspect: np.ndarray,
    *,
    nbytes: int = -1,
) -> EncodedBlock:
    """:func:`assemble` for a bound writer that keeps its block schema, its partition
    names and its per-record ``encode`` (the delimited and regex writers)."""
    return assemble(
        records, bound.arrow_schema, bound.partition_names, rows_idx, columns, partitions,
        suspect, bound.encode, nbytes=nbytes,
    )  # fmt: skip
