"""Insert events' five key columns spliced into the stripes pyarrow writes for their rows.

An insert event's ``operation``, ``originalTransaction``, ``bucket`` and
``currentTransaction`` are constant over a write and its ``rowId`` counts up by one, so
their ORC streams are a few bytes per 512 rows. Yet ORC C++ spends more time encoding
them than the table's own columns (a third of a 300,000-row event write here), through
the same RLEv2 analysis it gives any integers. So a streaming piece lets pyarrow encode
only the rows (a file of ``struct<row:...>``) and :func:`splice_insert_events` adds the
five columns: their ``DATA`` streams, row-index entries, encodings, statistics and types,
with the row's columns renumbered by five. ORC stripes are self-describing (each stream's
column and length are in the stripe footer), so the streams go in where ORC C++ would put
them: after column 0's in each section.

The runs follow ORC C++'s ``RleEncoderV2`` on such input (runs of 512 as fixed-delta
``DELTA``; a shorter last run as ``DIRECT`` with aligned bit widths, ``SHORT_REPEAT`` or
``DELTA``), so a piece holding one write, or writes that continue each other's rowIds, is
byte for byte the file pyarrow writes for the whole event table
(``tests/acid/test_orc_events.py`` checks this, and ORC Java reads the spliced files).
Field numbers are those of ``orc_proto.proto``.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from acidstream.acid.errors import AcidFormatError
from acidstream.acid.orc_tail import OrcTail, compress_chunks, decompress_chunks
from acidstream.acid.protobuf import (
    LEN,
    VARINT,
    Field,
    decode_fields,
    decode_packed,
    encode_fields,
    encode_packed,
    encode_varint,
    fields_dict,
    read_varint,
    zigzag_encode,
)

__all__ = ["InsertRun", "splice_insert_events"]

_EVENT_COLUMNS = 5
_NAMES = (b"operation", b"originalTransaction", b"bucket", b"rowId", b"currentTransaction")
# ORC Type.Kind of each event column (INT, LONG, INT, LONG, LONG), with the zero
# maximumLength/precision/scale ORC C++ writes for every type.
_TYPES = tuple(
    encode_fields([(1, VARINT, k), (4, VARINT, 0), (5, VARINT, 0), (6, VARINT, 0)])
    for k in (3, 4, 3, 4, 4)
)
_DIRECT_V2 = encode_fields([(1, VARINT, 2), (2, VARINT, 0)])  # ColumnEncoding
_ROW_INDEX, _DATA = 6, 1  # Stream.Kind
_INDEX_KINDS = frozenset((6, 7, 8))  # ROW_INDEX, BLOOM_FILTER, BLOOM_FILTER_UTF8
_RUN = 512  # RLEv2's longest run
_SMALL_VARINTS = tuple(bytes((i,)) for i in range(0x80))  # one-byte varints
_I64_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class InsertRun:
    """``count`` insert events of ``write_id`` (original and current transaction) whose
    rowIds count up from ``first_row_id``: one write into a piece, in row order."""

    write_id: int
    first_row_id: int
    count: int


# A column's values over a row range: arithmetic sequences (first value, step, count).
_Seq = tuple[int, int, int]


def _columns(runs: Sequence[InsertRun], bucket: int) -> list[list[_Seq]]:
    """The five columns of ``runs``; a run that continues the one before (same value,
    next rowId) extends its sequence, as ORC C++'s encoder continues its run."""
    cols: list[list[_Seq]] = [[] for _ in range(_EVENT_COLUMNS)]
    for r in runs:
        if not r.count:
            continue
        for col, (first, step) in zip(
            cols,
            ((0, 0), (r.write_id, 0), (bucket, 0), (r.first_row_id, 1), (r.write_id, 0)),
            strict=True,
        ):
            if col:
                v, d, n = col[-1]
                if d == step and v + d * n == first:
                    col[-1] = (v, d, n + r.count)
                    continue
            col.append((first, step, r.count))
    return cols


def _take(seqs: list[_Seq], rows: int) -> tuple[list[_Seq], list[_Seq]]:
    """The first ``rows`` rows of ``seqs`` and the rest."""
    head: list[_Seq] = []
    rest = list(seqs)
    while rows and rest:
        v, d, n = rest[0]
        if n <= rows:
            head.append(rest.pop(0))
            rows -= n
        else:
            head.append((v, d, rows))
            rest[0] = (v + d * rows, d, n - rows)
            rows = 0
    return head, rest


# ------------------------------------------------------------------------- RLEv2
_ALIGNED = (1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64)
_WIDTH_CODE = {w: w - 1 for w in range(1, 25)} | {32: 27, 40: 28, 48: 29, 56: 30, 64: 31}


def _direct(values: list[int]) -> bytes:
    """A ``DIRECT`` run, bit width aligned as ORC C++ aligns it (1, 2, 4, 8, 16, 24...)."""
    zz = [zigzag_encode(v) & ((1 << 64) - 1) for v in values]
    bits = max(max(zz).bit_length(), 1)
    width = next(w for w in _ALIGNED if w >= bits)
    n = len(zz)
    packed = 0
    for z in zz:
        packed = (packed << width) | z
    nbytes = (n * width + 7) // 8
    packed <<= nbytes * 8 - n * width
    code = _WIDTH_CODE[width]
    header = bytes((0x40 | (code << 1) | ((n - 1) >> 8), (n - 1) & 0xFF))
    return header + packed.to_bytes(nbytes, "big")


def _short_repeat(value: int, n: int) -> bytes:
    z = zigzag_encode(value) & ((1 << 64) - 1)
    nbytes = max((z.bit_length() + 7) // 8, 1)
    return bytes((((nbytes - 1) << 3) | (n - 3),)) + z.to_bytes(nbytes, "big")


def _delta(first: int, step: int, n: int) -> bytes:
    """A fixed-delta ``DELTA`` run (bit width 0): header, base, delta as signed varints."""
    return (
        bytes((0xC0 | ((n - 1) >> 8), (n - 1) & 0xFF))
        + encode_varint(zigzag_encode(first) & ((1 << 64) - 1))
        + encode_varint(zigzag_encode(step) & ((1 << 64) - 1))
    )


def _encode(seqs: list[_Seq]) -> tuple[bytes, list[int], list[int]]:
    """RLEv2 of ``seqs``: the bytes, and each run's first row and byte offset."""
    out = bytearray()
    run_rows: list[int] = []
    run_offsets: list[int] = []
    row = 0
    for v, d, n in seqs:
        full, last = divmod(n, _RUN)
        if full:
            # Every full run of a constant is the same bytes: build one, repeat it.
            first_run = _delta(v, d, _RUN)
            for k in range(full):
                run_rows.append(row + k * _RUN)
                run_offsets.append(len(out))
                out += first_run if d == 0 else _delta(v + d * k * _RUN, d, _RUN)
        if last:
            run_rows.append(row + full * _RUN)
            run_offsets.append(len(out))
            start = v + d * full * _RUN
            if last < 3 or (d and last == 3):
                out += _direct([start + d * i for i in range(last)])
            elif d == 0 and last <= 10:
                out += _short_repeat(start, last)
            else:
                out += _delta(start, d, last)
        row += n
    return bytes(out), run_rows, run_offsets


# -------------------------------------------------------------------- statistics
def _stats(seqs: Sequence[_Seq], lo: int, hi: int) -> bytes:
    """``ColumnStatistics`` of rows ``lo``..``hi`` (no nulls): count, min, max, sum (left
    out when it overflows a long, as ORC does)."""
    mn: int | None = None
    mx: int | None = None
    total = 0
    row = 0
    for v, d, n in seqs:
        a, b = max(lo, row), min(hi, row + n)
        if a < b:
            first, last, k = v + d * (a - row), v + d * (b - 1 - row), b - a
            lo_v, hi_v = min(first, last), max(first, last)
            mn = lo_v if mn is None else min(mn, lo_v)
            mx = hi_v if mx is None else max(mx, hi_v)
            total += (first + last) * k // 2
        row += n
    fields: list[Field] = [(1, VARINT, hi - lo)]
    if mn is not None and mx is not None:
        ints: list[Field] = [(1, VARINT, zigzag_encode(mn)), (2, VARINT, zigzag_encode(mx))]
        if -_I64_MAX - 1 <= total <= _I64_MAX:
            ints.append((3, VARINT, zigzag_encode(total) & ((1 << 64) - 1)))
        fields.append((2, LEN, encode_fields(ints)))
    fields.append((10, VARINT, 0))
    return encode_fields(fields)


# ------------------------------------------------------------------------ splice
def _plain_stream(raw: bytes) -> bool:
    """Whether a ``Stream`` message has the shape ORC C++ writes for small schemas: kind,
    column and length in that order, kind and column one byte each. Such a message is
    read and renumbered in place; any other goes through the general codec."""
    return (
        len(raw) >= 6
        and raw[0] == 0x08
        and raw[1] < 0x80
        and raw[2] == 0x10
        and raw[3] < 0x80
        and raw[4] == 0x18
    )


def _stream_fields(raw: bytes) -> tuple[int, int, int]:
    """A ``Stream`` message's kind, column and length."""
    if _plain_stream(raw):
        length, end = read_varint(raw, 5)
        if end == len(raw):
            return raw[1], raw[3], length
    d = fields_dict(decode_fields(raw))
    return int(d.get(1, 0)), int(d.get(2, 0)), int(d.get(3, 0))


def _renumber_stream(raw: bytes) -> bytes:
    """A ``Stream`` message of a row column with its column moved past the event ones."""
    if _plain_stream(raw) and 0 < raw[3] < 0x80 - _EVENT_COLUMNS:
        return raw[:3] + _SMALL_VARINTS[raw[3] + _EVENT_COLUMNS] + raw[4:]
    return encode_fields(
        [
            (n, w, v + _EVENT_COLUMNS if n == 2 and isinstance(v, int) and v else v)
            for n, w, v in decode_fields(raw)
        ]
    )


def _with_event_stats(stripe_stats: bytes, extra: Sequence[bytes]) -> bytes:
    """A ``StripeStatistics`` message with the event columns' statistics after column
    0's (its first field), the other fields kept byte for byte."""
    key, pos = read_varint(stripe_stats, 0)
    if key != (1 << 3 | LEN):
        raise AcidFormatError("ORC stripe statistics that do not start with column 0's")
    n, pos = read_varint(stripe_stats, pos)
    end = pos + n
    added = b"".join(b"\x0a" + encode_varint(len(e)) + e for e in extra)
    return stripe_stats[:end] + added + stripe_stats[end:]


@dataclass(frozen=True, slots=True)
class _Column:
    """One event column of a stripe: its ``DATA`` stream as the stripe holds it
    (compressed when the file is), its ``ROW_INDEX`` stream (None without a row index)
    and its stripe statistics."""

    data: bytes
    index: bytes | None
    stats: bytes


@lru_cache(maxsize=256)
def _column(seqs: tuple[_Seq, ...], rows: int, stride: int, kind: int, block: int) -> _Column:
    """The streams of one event column (cached: four of the five are the same constants
    in every stripe of a write)."""
    raw, run_rows, run_offsets = _encode(list(seqs))
    # Chunk by chunk (as compress_chunks cuts them), to know where each one starts.
    pieces = [compress_chunks(raw[i : i + block], kind, block) for i in range(0, len(raw), block)]
    data = b"".join(pieces)
    index = None
    if stride:
        chunks = [0]  # compressed start of each chunk of ``block`` uncompressed bytes
        for p in pieces:
            chunks.append(chunks[-1] + len(p))
        entries: list[Field] = []
        for start in range(0, rows, stride):
            i = bisect.bisect_right(run_rows, start) - 1
            offset, pending = run_offsets[i], start - run_rows[i]
            if kind:
                k = offset // block
                positions = [chunks[k], offset - k * block, pending]
            else:
                positions = [offset, pending]
            entry: list[Field] = [
                (1, LEN, encode_packed(positions)),
                (2, LEN, _stats(seqs, start, min(start + stride, rows))),
            ]
            entries.append((1, LEN, encode_fields(entry)))
        index = compress_chunks(encode_fields(entries), kind, block)
    return _Column(data, index, _stats(seqs, 0, rows))


def _stripe(
    data: bytes | memoryview,
    info: dict[int, int | bytes],
    cols: list[list[_Seq]],
    tail: OrcTail,
    stride: int,
) -> tuple[list[bytes | memoryview], int, int, int, list[bytes]]:
    """One stripe with the event columns: its parts, index, data and footer lengths, and
    the columns' stripe statistics."""
    off, il, dl, fl = (int(info.get(k, 0)) for k in (1, 2, 3, 4))
    rows = int(info.get(5, 0))
    kind, block = tail.compression, tail.block_size
    footer = decode_fields(decompress_chunks(bytes(data[off + il + dl : off + il + dl + fl]), kind))
    raw_streams = [v for n, _, v in footer if n == 1 and isinstance(v, bytes)]
    encodings = [v for n, _, v in footer if n == 2 and isinstance(v, bytes)]
    described = [_stream_fields(v) for v in raw_streams]
    # Column 0's streams lead each section (ORC C++ writes columns in order).
    index_n = sum(1 for k, _, _ in described if k in _INDEX_KINDS)
    if any(k in _INDEX_KINDS for k, _, _ in described[index_n:]):
        raise AcidFormatError("an ORC stripe whose index streams do not come first")
    lead_index = 0
    while lead_index < index_n and described[lead_index][1] == 0:
        lead_index += 1
    lead_data = index_n
    while lead_data < len(described) and described[lead_data][1] == 0:
        lead_data += 1
    if any(c == 0 for _, c, _ in described[lead_index:index_n] + described[lead_data:]):
        raise AcidFormatError("an ORC stripe whose column 0 streams are not first")
    has_index = stride > 0 and any(k == _ROW_INDEX and c == 0 for k, c, _ in described)
    columns = [_column(tuple(seqs), rows, stride if has_index else 0, kind, block) for seqs in cols]
    new_index = [c.index for c in columns if c.index is not None]
    lead_index_len = sum(n for _, _, n in described[:lead_index])
    lead_data_len = sum(n for _, _, n in described[index_n:lead_data])
    new_streams: list[bytes] = raw_streams[:lead_index]  # column 0's, unchanged
    new_streams += [
        encode_fields([(1, VARINT, _ROW_INDEX), (2, VARINT, c), (3, VARINT, len(b))])
        for c, b in enumerate(new_index, 1)
    ]
    new_streams += [_renumber_stream(s) for s in raw_streams[lead_index:index_n]]
    new_streams += [_renumber_stream(s) for s in raw_streams[index_n:lead_data]]
    new_streams += [
        encode_fields([(1, VARINT, _DATA), (2, VARINT, c), (3, VARINT, len(o.data))])
        for c, o in enumerate(columns, 1)
    ]
    new_streams += [_renumber_stream(s) for s in raw_streams[lead_data:]]
    fields: list[Field] = [(1, LEN, s) for s in new_streams]
    fields += [(2, LEN, encodings[0]), *((2, LEN, _DIRECT_V2) for _ in range(_EVENT_COLUMNS))]
    fields += [(2, LEN, e) for e in encodings[1:]]
    fields += [(n, w, v) for n, w, v in footer if n not in (1, 2)]
    new_footer = compress_chunks(encode_fields(fields), kind, block)
    index_start, data_start = off, off + il
    parts: list[bytes | memoryview] = [
        data[index_start : index_start + lead_index_len],
        *new_index,
        data[index_start + lead_index_len : data_start],
        data[data_start : data_start + lead_data_len],
        *(o.data for o in columns),
        data[data_start + lead_data_len : data_start + dl],
        new_footer,
    ]
    added_index = sum(map(len, new_index))
    added_data = sum(len(o.data) for o in columns)
    stats = [c.stats for c in columns]
    return parts, il + added_index, dl + added_data, len(new_footer), stats


@lru_cache(maxsize=64)
def _event_types(types: tuple[bytes, ...]) -> tuple[bytes, ...]:
    """The piece's ``Type`` messages as the event file's: a root of six fields, the five
    event columns, then the row's types with their children renumbered."""
    root: list[Field] = []
    names_done = False
    for n, w, v in decode_fields(types[0]):
        if n == 2:
            root.append((2, LEN, encode_packed(range(1, _EVENT_COLUMNS + 2))))
        elif n == 3:
            if not names_done:
                root += [(3, LEN, name) for name in (*_NAMES, b"row")]
                names_done = True
        else:
            root.append((n, w, v))
    out = [encode_fields(root), *_TYPES]
    for t in types[1:]:
        out.append(
            encode_fields(
                [
                    (2, LEN, encode_packed([c + _EVENT_COLUMNS for c in decode_packed(v)]))
                    if n == 2 and isinstance(v, bytes)
                    else (n, w, v)
                    for n, w, v in decode_fields(t)
                ]
            )
        )
    return tuple(out)


def splice_insert_events(
    piece: bytes | memoryview, tail: OrcTail, runs: Sequence[InsertRun], bucket: int
) -> tuple[list[bytes | memoryview], OrcTail]:
    """The ORC file ``piece`` (written by pyarrow from ``struct<row:...>``, its tail
    ``tail``) as the file of insert events ``runs`` in bucket property ``bucket``.

    Returns the stripes (buffers to write in order after the file's ``ORC`` header) and
    the tail that describes them (its stripe offsets count the header, as in any ORC
    file; ``tail_length`` is left at the piece's, the caller has the stripes' length).
    """
    if sum(r.count for r in runs) != sum(tail.stripe_rows):
        raise AcidFormatError("insert runs do not cover the piece's rows")
    footer = tail.footer_fields
    stride = next((int(v) for n, _, v in footer if n == 8 and isinstance(v, int)), 0)
    cols = _columns(runs, bucket)
    whole = cols
    body: list[bytes | memoryview] = []
    stripes: list[bytes] = []
    stripe_stats: list[list[bytes]] = []
    position = 3  # after the "ORC" header
    for n, _, v in footer:
        if n != 3 or not isinstance(v, bytes):
            continue
        info_fields = decode_fields(v)
        info = fields_dict(info_fields)
        rows = int(info.get(5, 0))
        here = []
        rest = []
        for c in cols:
            h, r = _take(c, rows)
            here.append(h)
            rest.append(r)
        cols = rest
        parts, il, dl, fl, stats = _stripe(piece, info, here, tail, stride)
        body += parts
        new = {1: position, 2: il, 3: dl, 4: fl}
        stripes.append(
            encode_fields([(k, w, new.get(k, x) if w == VARINT else x) for k, w, x in info_fields])
        )
        stripe_stats.append(stats)
        position += il + dl + fl
    total = sum(tail.stripe_rows)
    if len(stripe_stats) == 1:
        file_stats = stripe_stats[0]
    else:
        file_stats = [_stats(c, 0, total) for c in whole]
    # Stripe statistics: each StripeStatistics gets the event columns after column 0.
    kind, block = tail.compression, tail.block_size
    meta = decode_fields(decompress_chunks(tail.metadata_section, kind))
    if len(meta) != len(stripe_stats):
        raise AcidFormatError("ORC metadata and stripes disagree")
    new_meta: list[Field] = []
    for (n, w, v), extra in zip(meta, stripe_stats, strict=True):
        assert isinstance(v, bytes)
        new_meta.append((n, w, _with_event_stats(v, extra)))
    types = _event_types(tuple(v for n, _, v in footer if n == 4 and isinstance(v, bytes)))
    fields: list[Field] = []
    types_done = stats_done = stripes_done = False
    for n, w, v in footer:
        if n == 2 and w == VARINT:
            fields.append((2, VARINT, position - 3))
        elif n == 3:
            if not stripes_done:
                fields += [(3, LEN, s) for s in stripes]
                stripes_done = True
        elif n == 4:
            if not types_done:
                fields += [(4, LEN, t) for t in types]
                types_done = True
        elif n == 7:
            if not stats_done:
                old = [v2 for n2, _, v2 in footer if n2 == 7]
                fields += [(7, LEN, old[0]), *((7, LEN, s) for s in file_stats)]
                fields += [(7, LEN, s) for s in old[1:]]
                stats_done = True
        else:
            fields.append((n, w, v))
    metadata = compress_chunks(encode_fields(new_meta), kind, block)
    return body, replace(tail, metadata_section=metadata, footer_fields=fields)
