"""Reading chosen row groups of an ORC stripe, not the whole stripe.

pyarrow's ORC reader decodes whole stripes (``ORCFile.read_stripe``: no seek, no
row-group selection). A key lookup (a MERGE, UPDATE or DELETE by key) needs the few row
groups its keys can be in; this module finds them in the row index (positions and
statistics per ``orc.row.index.stride`` rows) and decodes only those, in numpy:

- the tail's stripe list, types and stripe statistics (:class:`OrcMeta`);
- a stripe's footer (streams, encodings) and row indexes (:class:`StripeReader`);
- decompression of only the compression chunks a row group touches (NONE, ZLIB,
  SNAPPY, ZSTD), cached per stripe;
- columns: booleans, tinyint (byte RLE), smallint/int/bigint/date (integer RLE v1/v2),
  float/double, and string/varchar/char (DIRECT, DIRECT_V2, DICTIONARY_V2), with their
  PRESENT streams.

Anything else (another type, LZO/LZ4, a nested column under a struct with nulls) raises
:class:`Unsupported`: the caller reads that stripe with pyarrow instead. The result
equals pyarrow's read of the same rows (``tests/acid/test_orc_row_groups.py`` compares
them on random files).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from acidstream.acid.errors import AcidFormatError
from acidstream.acid.orc_rle import (
    ByteSource,
    decode_booleans,
    decode_byte_rle,
    decode_int_rle_v1,
    decode_int_rle_v2,
)
from acidstream.acid.orc_tail import OrcTail, decompress_chunk, decompress_chunks, parse_tail
from acidstream.acid.protobuf import LEN, VARINT, decode_fields, decode_packed, zigzag_decode
from acidstream.acid.storage import Storage

__all__ = [
    "ColumnStats",
    "OrcBytes",
    "OrcMeta",
    "RowIndexEntry",
    "StripeReader",
    "Unsupported",
    "group_ranges",
]

# Type.Kind
BOOLEAN, BYTE, SHORT, INT, LONG, FLOAT, DOUBLE, STRING = 0, 1, 2, 3, 4, 5, 6, 7
STRUCT, DATE, VARCHAR, CHAR = 12, 15, 16, 17
_INTS = {SHORT: pa.int16(), INT: pa.int32(), LONG: pa.int64(), DATE: pa.date32()}
_STRINGS = {STRING, VARCHAR, CHAR}
# Stream.Kind
PRESENT, DATA, LENGTH, DICTIONARY_DATA, ROW_INDEX = 0, 1, 2, 3, 6
BLOOM_FILTER, BLOOM_FILTER_UTF8 = 7, 8
# ColumnEncoding.Kind
DIRECT, DICTIONARY, DIRECT_V2, DICTIONARY_V2 = 0, 1, 2, 3
_NONE = 0


class Unsupported(Exception):
    """This stripe or column cannot be decoded here; read it with pyarrow instead."""


@dataclass(frozen=True)
class ColumnStats:
    """The parts of an ORC ``ColumnStatistics`` that decide whether a key may be present:
    the non-null value count, and min/max of integer (and date) or string columns."""

    values: int | None = None
    has_null: bool | None = None
    int_min: int | None = None
    int_max: int | None = None
    str_min: str | None = None
    str_max: str | None = None

    @classmethod
    def parse(cls, buf: bytes) -> ColumnStats:
        kw: dict[str, object] = {}
        for num, wt, v in decode_fields(buf):
            if num == 1 and wt == VARINT:
                kw["values"] = v
            elif num == 10 and wt == VARINT:
                kw["has_null"] = bool(v)
            elif num in (2, 7) and wt == LEN:  # IntegerStatistics, DateStatistics
                assert isinstance(v, bytes)
                for n, w, x in decode_fields(v):
                    if w == VARINT and n in (1, 2):
                        assert isinstance(x, int)
                        val = zigzag_decode(x)
                        if num == 7:  # sint32
                            val = (val + (1 << 31)) % (1 << 32) - (1 << 31)
                        kw["int_min" if n == 1 else "int_max"] = val
            elif num == 4 and wt == LEN:  # StringStatistics: min/max only (not bounds)
                assert isinstance(v, bytes)
                for n, w, x in decode_fields(v):
                    if w == LEN and n in (1, 2):
                        assert isinstance(x, bytes)
                        kw["str_min" if n == 1 else "str_max"] = x.decode("utf-8", "replace")
        return cls(**kw)  # type: ignore[arg-type]


@dataclass(frozen=True)
class StripeInfo:
    offset: int
    index_length: int
    data_length: int
    footer_length: int
    rows: int


@dataclass(frozen=True)
class OrcType:
    kind: int
    subtypes: tuple[int, ...]
    names: tuple[str, ...]


@dataclass(frozen=True)
class OrcMeta:
    """What a row-group reader needs from a file's tail."""

    compression: int
    block_size: int
    stripes: tuple[StripeInfo, ...]
    types: tuple[OrcType, ...]
    row_index_stride: int
    # Each stripe's StripeStatistics message, parsed on demand (:meth:`column_stats`).
    stripe_stats: tuple[bytes, ...]

    @classmethod
    def of(cls, tail: OrcTail) -> OrcMeta:
        stripes: list[StripeInfo] = []
        types: list[OrcType] = []
        stride = 0
        for num, _, v in tail.footer_fields:
            if num == 3 and isinstance(v, bytes):
                d = {n: x for n, w, x in decode_fields(v) if w == VARINT}
                stripes.append(
                    StripeInfo(
                        offset=int(d.get(1, 0)),
                        index_length=int(d.get(2, 0)),
                        data_length=int(d.get(3, 0)),
                        footer_length=int(d.get(4, 0)),
                        rows=int(d.get(5, 0)),
                    )
                )
            elif num == 4 and isinstance(v, bytes):
                kind, subs, names = 0, [], []
                for n, w, x in decode_fields(v):
                    if n == 1 and w == VARINT:
                        assert isinstance(x, int)
                        kind = x
                    elif n == 2:
                        if w == LEN:
                            assert isinstance(x, bytes)
                            subs.extend(decode_packed(x))
                        else:
                            assert isinstance(x, int)
                            subs.append(x)
                    elif n == 3 and w == LEN:
                        assert isinstance(x, bytes)
                        names.append(x.decode())
                types.append(OrcType(kind, tuple(subs), tuple(names)))
            elif num == 8 and isinstance(v, int):
                stride = v
        stats: list[bytes] = []
        if tail.metadata_section:
            meta = decompress_chunks(tail.metadata_section, tail.compression)
            stats = [v for num, _, v in decode_fields(meta) if num == 1 and isinstance(v, bytes)]
        if len(stats) != len(stripes):
            stats = []
        return cls(
            compression=tail.compression,
            block_size=tail.block_size,
            stripes=tuple(stripes),
            types=tuple(types),
            row_index_stride=stride,
            stripe_stats=tuple(stats),
        )

    def column_stats(self, stripe: int, column: int) -> ColumnStats | None:
        """Statistics of ``column`` in stripe ``stripe`` (``None`` without them)."""
        if not self.stripe_stats:
            return None
        i = 0
        for n, _, x in decode_fields(self.stripe_stats[stripe]):
            if n == 1:
                if i == column:
                    return ColumnStats.parse(x) if isinstance(x, bytes) else None
                i += 1
        return None

    def column_id(self, path: Sequence[str]) -> int | None:
        """The column id of a field path (``("row", "id")``), names compared
        case-insensitively; ``None`` when absent."""
        col = 0
        for name in path:
            t = self.types[col]
            if t.kind != STRUCT:
                return None
            low = [n.lower() for n in t.names]
            if name.lower() not in low:
                return None
            col = t.subtypes[low.index(name.lower())]
        return col

    def parent(self, column: int) -> int | None:
        for i, t in enumerate(self.types):
            if column in t.subtypes:
                return i
        return None


class OrcBytes:
    """Byte ranges of one file (``storage`` local: memory-mapped, no copy)."""

    def __init__(self, storage: Storage, path: str, *, length: int) -> None:
        self.length = length
        self._mm: mmap.mmap | None = None
        self._data: bytes | None = None
        local = storage.local_path(path)
        if local is not None:
            with open(local, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size:
                    self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        else:
            self._data = storage.read_bytes(path, length=length)

    def view(self, offset: int, length: int) -> memoryview:
        if offset < 0 or offset + length > self.length:
            raise AcidFormatError("ORC stream outside the file")
        if self._mm is not None:
            return memoryview(self._mm)[offset : offset + length]
        assert self._data is not None
        return memoryview(self._data)[offset : offset + length]

    def tail(self) -> OrcTail:
        """The tail ending at the file's (logical) length."""
        if self.length < 4:
            raise AcidFormatError("too short to hold an ORC tail")
        last = bytes(self.view(self.length - 1, 1))[0]
        ps = decode_fields(bytes(self.view(self.length - 1 - last, last)))
        vals = {n: v for n, w, v in ps if w == VARINT}
        n = 1 + last + int(vals.get(1, 0)) + int(vals.get(5, 0))
        return parse_tail(bytes(self.view(self.length - n, n)))

    def close(self) -> None:
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                pass  # views still alive: the map goes when they do
            self._mm = None


class RowIndexEntry:
    """One row group's entry of a row index: stream positions and statistics, each
    decoded on first use (a lookup reads the statistics of its key columns only, and
    positions only where a read starts)."""

    def __init__(self, raw: bytes) -> None:
        self._raw = raw
        self._positions: tuple[int, ...] | None = None
        self._stats: ColumnStats | None = None

    def _parse(self) -> None:
        pos: list[int] = []
        stats = ColumnStats()
        for n, w, x in decode_fields(self._raw):
            if n == 1 and w == LEN:
                assert isinstance(x, bytes)
                pos.extend(decode_packed(x))
            elif n == 1 and w == VARINT:
                assert isinstance(x, int)
                pos.append(x)
            elif n == 2 and w == LEN:
                assert isinstance(x, bytes)
                stats = ColumnStats.parse(x)
        self._positions, self._stats = tuple(pos), stats

    @property
    def positions(self) -> tuple[int, ...]:
        if self._positions is None:
            self._parse()
        assert self._positions is not None
        return self._positions

    @property
    def stats(self) -> ColumnStats:
        if self._stats is None:
            self._parse()
        assert self._stats is not None
        return self._stats


@dataclass(frozen=True)
class _Stream:
    kind: int
    column: int
    offset: int
    length: int


def group_ranges(groups: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted row-group numbers as ``[start, stop)`` runs of consecutive groups."""
    out: list[tuple[int, int]] = []
    for g in groups:
        if out and out[-1][1] == g:
            out[-1] = (out[-1][0], g + 1)
        else:
            out.append((g, g + 1))
    return out


@dataclass
class _Cursor:
    """Where a column's row-index positions stand while its streams are opened."""

    positions: tuple[int, ...]
    at: int = 0

    def take(self, n: int) -> tuple[int, ...]:
        out = self.positions[self.at : self.at + n]
        if len(out) != n:
            raise Unsupported("row index holds fewer positions than the column's streams")
        self.at += n
        return out


@dataclass
class StripeReader:
    """One stripe of a file: its streams, encodings and row indexes, and the decoding
    of chosen row groups of its columns (the driver side of a key lookup)."""

    data: OrcBytes
    meta: OrcMeta
    index: int
    streams: dict[tuple[int, int], _Stream] = field(init=False)
    encodings: list[tuple[int, int]] = field(init=False)
    _chunks: dict[tuple[int, int], tuple[bytes, int]] = field(init=False, default_factory=dict)
    _row_index: dict[int, list[RowIndexEntry]] = field(init=False, default_factory=dict)
    _dicts: dict[int, tuple[np.ndarray, bytes]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        s = self.meta.stripes[self.index]
        foot = self._bytes(s.offset + s.index_length + s.data_length, s.footer_length)
        self.streams = {}
        self.encodings = []
        off = s.offset
        for num, _, v in decode_fields(foot):
            if num == 1 and isinstance(v, bytes):
                d = {n: x for n, w, x in decode_fields(v) if w == VARINT}
                st = _Stream(int(d.get(1, 0)), int(d.get(2, 0)), off, int(d.get(3, 0)))
                off += st.length
                self.streams.setdefault((st.column, st.kind), st)
            elif num == 2 and isinstance(v, bytes):
                d = {n: x for n, w, x in decode_fields(v) if w == VARINT}
                self.encodings.append((int(d.get(1, 0)), int(d.get(2, 0))))

    @property
    def rows(self) -> int:
        return self.meta.stripes[self.index].rows

    @property
    def stride(self) -> int:
        return self.meta.row_index_stride

    @property
    def groups(self) -> int:
        if self.stride <= 0:
            return 0
        return -(-self.rows // self.stride)

    def group_rows(self, g: int) -> int:
        return min(self.stride, self.rows - g * self.stride)

    def _bytes(self, offset: int, length: int) -> bytes:
        return decompress_chunks(bytes(self.data.view(offset, length)), self.meta.compression)

    def stream_bytes(self, column: int, kind: int) -> bytes | None:
        """A whole (small) stream decompressed: row indexes, bloom filters, dictionaries."""
        st = self.streams.get((column, kind))
        if st is None:
            return None
        return self._bytes(st.offset, st.length)

    def row_index(self, column: int) -> list[RowIndexEntry] | None:
        """The column's row index (one entry per row group, each parsed when used),
        ``None`` without one."""
        if column in self._row_index:
            return self._row_index[column]
        raw = self.stream_bytes(column, ROW_INDEX)
        if raw is None or self.stride <= 0:
            return None
        entries = [
            RowIndexEntry(v)
            for num, _, v in decode_fields(raw)
            if num == 1 and isinstance(v, bytes)
        ]
        if len(entries) != self.groups:
            return None
        self._row_index[column] = entries
        return entries

    # ------------------------------------------------------------------ decoding
    def _source(self, st: _Stream, cur: _Cursor) -> ByteSource:
        """The stream's bytes from a row-index position on."""
        region = self.data.view(st.offset, st.length)
        if self.meta.compression == _NONE:
            (start,) = cur.take(1)
            step = 256 * 1024
            nxt = [start]

            def more_raw() -> bytes:
                a = nxt[0]
                nxt[0] = a + step
                return bytes(region[a : a + step]) if a < len(region) else b""

            return ByteSource(more_raw(), more_raw)
        chunk, within = cur.take(2)
        at = [chunk]

        def more() -> bytes:
            if at[0] >= len(region):
                return b""
            body, nxt_at = self._chunk(st, region, at[0])
            at[0] = nxt_at
            return body

        return ByteSource(more(), more, pos=within)

    def _chunk(self, st: _Stream, region: memoryview, at: int) -> tuple[bytes, int]:
        key = (st.offset, at)
        hit = self._chunks.get(key)
        if hit is not None:
            return hit
        if at + 3 > len(region):
            raise AcidFormatError("truncated ORC compression chunk header")
        h = region[at] | (region[at + 1] << 8) | (region[at + 2] << 16)
        n, original = h >> 1, h & 1
        body = region[at + 3 : at + 3 + n]
        try:
            out = bytes(body) if original else decompress_chunk(self.meta.compression, body)
        except AcidFormatError as e:
            if "not supported" in str(e):
                raise Unsupported(str(e)) from e
            raise
        self._chunks[key] = (out, at + 3 + n)
        return self._chunks[key]

    def supports(self, column: int) -> bool:
        """Whether :meth:`read` can decode ``column`` in this stripe (its type, encoding,
        row index, and no struct above it with nulls)."""
        t = self.meta.types[column]
        if (
            t.kind not in _INTS
            and t.kind not in _STRINGS
            and t.kind
            not in (
                BOOLEAN,
                BYTE,
                FLOAT,
                DOUBLE,
            )
        ):
            return False
        if column >= len(self.encodings) or self.row_index(column) is None:
            return False
        enc = self.encodings[column][0]
        if t.kind in _STRINGS and enc not in (DIRECT, DIRECT_V2, DICTIONARY_V2):
            return False
        p = self.meta.parent(column)
        while p is not None:
            if self.meta.types[p].kind != STRUCT or (p, PRESENT) in self.streams:
                return False
            p = self.meta.parent(p)
        return True

    def read(self, column: int, ranges: Sequence[tuple[int, int]]) -> pa.Array:
        """The column's values in row groups ``ranges`` (``[start, stop)`` runs), in order,
        as the Arrow type pyarrow reads it as."""
        if not self.supports(column):
            raise Unsupported(f"column {column} of stripe {self.index}")
        const = self._constant(column)
        if const is not None:
            n = sum(self.group_rows(g) for a, b in ranges for g in range(a, b))
            return _with_nulls(np.full(n, const, dtype=np.int64), None, self._arrow_type(column))
        parts = [self._read_range(column, a, b) for a, b in ranges]
        if not parts:
            return pa.array([], self._arrow_type(column))
        return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)

    def _constant(self, column: int) -> int | None:
        """The value of an integer column that holds one value in every row of the stripe
        (statistics: no nulls, ``min == max``), as an ACID file's originalTransaction,
        bucket and currentTransaction do in a base or delta: nothing to decode."""
        if self.meta.types[column].kind not in _INTS:
            return None
        st = self.meta.column_stats(self.index, column)
        if (
            st is None
            or st.values != self.rows
            or st.has_null
            or st.int_min is None
            or st.int_min != st.int_max
        ):
            return None
        return st.int_min

    def _arrow_type(self, column: int) -> pa.DataType:
        k = self.meta.types[column].kind
        if k in _INTS:
            return _INTS[k]
        if k in _STRINGS:
            return pa.string()
        return {BOOLEAN: pa.bool_(), BYTE: pa.int8(), FLOAT: pa.float32(), DOUBLE: pa.float64()}[k]

    def _read_range(self, column: int, g0: int, g1: int) -> pa.Array:
        index = self.row_index(column)
        assert index is not None
        n = sum(self.group_rows(g) for g in range(g0, g1))
        cur = _Cursor(index[g0].positions)
        present: np.ndarray | None = None
        pst = self.streams.get((column, PRESENT))
        if pst is not None:
            src = self._source(pst, cur)
            skip_bytes, skip_bits = cur.take(2)
            present = decode_booleans(src, count=n, skip_bytes=skip_bytes, skip_bits=skip_bits)
        count = n if present is None else int(present.sum())
        kind = self.meta.types[column].kind
        enc = self.encodings[column][0]
        typ = self._arrow_type(column)
        if kind in _STRINGS:
            return self._strings(column, enc, cur, count, present)
        dst = self.streams.get((column, DATA))
        if dst is None:
            if count:
                raise AcidFormatError(f"ORC column {column} has values but no DATA stream")
            return pa.nulls(n, typ)
        src = self._source(dst, cur)
        values: np.ndarray
        if kind == BOOLEAN:
            sb, sbits = cur.take(2)
            values = decode_booleans(src, count=count, skip_bytes=sb, skip_bits=sbits)
        elif kind == BYTE:
            (skip,) = cur.take(1)
            values = decode_byte_rle(src, count=count, skip=skip).view(np.int8)
        elif kind in _INTS:
            (skip,) = cur.take(1)
            if enc == DIRECT_V2:
                values = decode_int_rle_v2(src, signed=True, count=count, skip=skip)
            elif enc == DIRECT:
                values = decode_int_rle_v1(src, signed=True, count=count, skip=skip)
            else:
                raise Unsupported(f"integer encoding {enc}")
        else:  # FLOAT, DOUBLE: little-endian IEEE values
            width = 4 if kind == FLOAT else 8
            raw = src.take(count * width)
            values = np.frombuffer(raw, dtype="<f4" if width == 4 else "<f8")
        return _with_nulls(values, present, typ)

    def _strings(
        self, column: int, enc: int, cur: _Cursor, count: int, present: np.ndarray | None
    ) -> pa.Array:
        n = count if present is None else len(present)
        if enc == DICTIONARY_V2:
            dst = self.streams.get((column, DATA))
            if dst is None:
                return pa.nulls(n, pa.string()) if count == 0 else _missing(column)
            src = self._source(dst, cur)
            (skip,) = cur.take(1)
            idx = decode_int_rle_v2(src, signed=False, count=count, skip=skip)
            offsets, blob = self._dictionary(column)
            if count and (idx.min() < 0 or idx.max() >= len(offsets) - 1):
                raise AcidFormatError(f"ORC dictionary index out of range in column {column}")
            starts, ends = offsets[idx], offsets[idx + 1]
            lengths = ends - starts
            pieces = _gather(np.frombuffer(blob, dtype=np.uint8), starts, lengths)
        else:
            dst = self.streams.get((column, DATA))
            lst = self.streams.get((column, LENGTH))
            if lst is None:
                return pa.nulls(n, pa.string()) if count == 0 else _missing(column)
            data_src = self._source(dst, cur) if dst is not None else ByteSource(b"", bytes)
            if dst is None:
                cur.take(1 if self.meta.compression == _NONE else 2)
            len_src = self._source(lst, cur)
            (skip,) = cur.take(1)
            decode = decode_int_rle_v2 if enc == DIRECT_V2 else decode_int_rle_v1
            lengths = decode(len_src, signed=False, count=count, skip=skip)
            total = int(lengths.sum())
            pieces = np.frombuffer(data_src.take(total), dtype=np.uint8)
        full_lengths = lengths
        if present is not None:
            full_lengths = np.zeros(n, dtype=np.int64)
            full_lengths[present] = lengths
        offsets32 = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(full_lengths, out=offsets32[1:])
        if offsets32[-1] >= 1 << 31:
            raise Unsupported("string row groups above 2 GiB")
        validity = None if present is None else pa.array(present).buffers()[1]
        nulls = 0 if present is None else int(n - present.sum())
        return pa.StringArray.from_buffers(
            n,
            pa.py_buffer(offsets32.astype(np.int32).tobytes()),
            pa.py_buffer(pieces.tobytes()),
            validity,
            nulls,
        )

    def _dictionary(self, column: int) -> tuple[np.ndarray, bytes]:
        """A DICTIONARY_V2 column's dictionary: offsets (``size + 1``) and bytes."""
        hit = self._dicts.get(column)
        if hit is not None:
            return hit
        size = self.encodings[column][1]
        raw_len = self.stream_bytes(column, LENGTH) or b""
        blob = self.stream_bytes(column, DICTIONARY_DATA) or b""
        lengths = decode_int_rle_v2(ByteSource(raw_len, bytes), signed=False, count=size)
        offsets = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if offsets[-1] > len(blob):
            raise AcidFormatError(f"ORC dictionary of column {column} longer than its data")
        self._dicts[column] = (offsets, blob)
        return offsets, blob


def _missing(column: int) -> pa.Array:
    raise AcidFormatError(f"ORC column {column} has values but lacks a stream")


def _gather(blob: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of ``blob[s : s + l]`` for each (start, length), vectorized."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.uint8)
    out_starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=out_starts[1:])
    owner = np.repeat(np.arange(len(lengths)), lengths)
    idx = starts[owner] + (np.arange(total) - out_starts[owner])
    return blob[idx]


def _with_nulls(values: np.ndarray, present: np.ndarray | None, typ: pa.DataType) -> pa.Array:
    if typ == pa.date32():
        values = values.astype(np.int32)
    elif pa.types.is_integer(typ):
        values = values.astype(typ.to_pandas_dtype(), copy=False)
    if present is None:
        return pa.array(values, type=typ) if typ != pa.date32() else pa.array(values).cast(typ)
    full = np.zeros(len(present), dtype=values.dtype)
    full[present] = values
    arr = pa.array(full, mask=~present)
    return arr.cast(typ) if arr.type != typ else arr
