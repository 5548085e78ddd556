"""Stitch complete ORC files into one streaming ORC file with a footer per piece.

pyarrow's columnar ORC writer is several times faster than pyorc's row writer but
cannot write intermediate footers. A streaming ACID file needs one at every
transaction boundary, so the rows of each transaction are written by pyarrow as a
complete ORC file (a "piece") whose stripes go straight into the real file, and
this module replaces the piece's own tail by one describing every stripe so far: ORC stripes are
self-contained (stream offsets are relative to the stripe), which is what ORC's
own ``mergeFiles`` and Hive's ``CONCATENATE`` rely on. The result is exactly the
layout ORC Java's ``writeIntermediateFooter`` produces:
``ORC [stripes₁][tail₁][stripes₂][tail₂]...``, where tail *k* lists the stripes of
pieces 1..k with their file-level statistics merged and their stripe statistics
concatenated.

Field numbers are those of ``orc_proto.proto`` (Footer, PostScript, Metadata,
ColumnStatistics and its typed sub-messages).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from acidstream.acid.errors import AcidFormatError
from acidstream.acid.orc_tail import (
    OrcTail,
    compress_chunks,
    declare_block_size,
    decompress_chunks,
    metadata_items,
    with_proleptic_calendar,
)
from acidstream.acid.protobuf import (
    LEN,
    VARINT,
    Field,
    decode_fields,
    decode_packed,
    encode_fields,
    encode_packed,
    fields_dict,
    zigzag_decode,
    zigzag_encode,
)

__all__ = ["StripeStitcher", "merge_column_statistics"]

_HEADER = b"ORC"
_NONE = 0  # PostScript.compression: uncompressed
_I64_MAX = (1 << 63) - 1


def _int(d: Mapping[int, int | bytes], key: int) -> int | None:
    v = d.get(key)
    return v if isinstance(v, int) else None


def _bytes(d: Mapping[int, int | bytes], key: int) -> bytes | None:
    v = d.get(key)
    return v if isinstance(v, bytes) else None


def _double(d: Mapping[int, int | bytes], key: int) -> float | None:
    v = _bytes(d, key)
    return None if v is None else float(struct.unpack("<d", v)[0])


# --------------------------------------------------------------- typed statistics
def _merge_int(a: dict[int, int | bytes], b: dict[int, int | bytes]) -> list[Field]:
    out: list[Field] = []
    mins = [zigzag_decode(v) for v in (_int(a, 1), _int(b, 1)) if v is not None]
    maxs = [zigzag_decode(v) for v in (_int(a, 2), _int(b, 2)) if v is not None]
    if mins:
        out.append((1, VARINT, zigzag_encode(min(mins))))
    if maxs:
        out.append((2, VARINT, zigzag_encode(max(maxs))))
    sa, sb = _int(a, 3), _int(b, 3)
    if sa is not None and sb is not None:
        total = zigzag_decode(sa) + zigzag_decode(sb)
        # ORC drops the sum once it overflows a long.
        if -_I64_MAX - 1 <= total <= _I64_MAX:
            out.append((3, VARINT, zigzag_encode(total)))
    return out


def _merge_double(a: dict[int, int | bytes], b: dict[int, int | bytes]) -> list[Field]:
    out: list[Field] = []
    for num, pick in ((1, min), (2, max)):
        vals = [v for v in (_double(a, num), _double(b, num)) if v is not None]
        if vals:
            out.append((num, 1, struct.pack("<d", pick(vals))))
    sa, sb = _double(a, 3), _double(b, 3)
    if sa is not None and sb is not None:
        out.append((3, 1, struct.pack("<d", sa + sb)))
    return out


def _merge_bounds(
    a: dict[int, int | bytes],
    b: dict[int, int | bytes],
    *,
    exact: tuple[int, int],
    bound: tuple[int, int] | None,
    key: Callable[[bytes], Any],
) -> list[Field]:
    """Min/max of string-like statistics: the exact value, or (strings over ORC's length
    limit) a lower/upper bound. The winner keeps whichever field it came in."""
    out: list[Field] = []
    for i, pick in ((0, min), (1, max)):
        cands: list[tuple[Any, int, bytes]] = []
        for d in (a, b):
            for num in (exact[i],) + ((bound[i],) if bound else ()):
                v = _bytes(d, num)
                if v is not None:
                    cands.append((key(v), num, v))
                    break
        if cands:
            _, num, v = pick(cands, key=lambda c: c[0])
            out.append((num, LEN, v))
    return out


def _merge_string(a: dict[int, int | bytes], b: dict[int, int | bytes]) -> list[Field]:
    # UTF-8 byte order is ORC's string order (Java compares Text bytes unsigned).
    out = _merge_bounds(a, b, exact=(1, 2), bound=(4, 5), key=lambda v: v)
    sa, sb = _int(a, 3), _int(b, 3)
    if sa is not None and sb is not None:
        out.append((3, VARINT, zigzag_encode(zigzag_decode(sa) + zigzag_decode(sb))))
    return sorted(out, key=lambda f: f[0])


def _decimal(v: bytes) -> Decimal:
    try:
        return Decimal(v.decode())
    except (InvalidOperation, UnicodeDecodeError) as e:
        raise AcidFormatError(f"bad decimal statistic {v!r}") from e


def _merge_decimal(a: dict[int, int | bytes], b: dict[int, int | bytes]) -> list[Field]:
    out = _merge_bounds(a, b, exact=(1, 2), bound=None, key=_decimal)
    sa, sb = _bytes(a, 3), _bytes(b, 3)
    if sa is not None and sb is not None:
        total = _decimal(sa) + _decimal(sb)
        # Hive decimals hold 38 digits; ORC drops a sum that no longer fits.
        if len(total.as_tuple().digits) <= 38:
            out.append((3, LEN, format(total, "f").encode()))
    return sorted(out, key=lambda f: f[0])


def _merge_date(a: dict[int, int | bytes], b: dict[int, int | bytes]) -> list[Field]:
    out: list[Field] = []
    for num, pick in ((1, min), (2, max)):
        vals = [zigzag_decode(v) for v in (_int(a, num), _int(b, num)) if v is not None]
        if vals:
            out.append((num, VARINT, zigzag_encode(pick(vals))))
    return out


def _merge_binary(a: dict[int, int | bytes], b: dict[int, int | bytes]) -> list[Field]:
    sa, sb = _int(a, 1), _int(b, 1)
    if sa is None or sb is None:
        return []
    return [(1, VARINT, zigzag_encode(zigzag_decode(sa) + zigzag_decode(sb)))]


def _merge_timestamp(a: dict[int, int | bytes], b: dict[int, int | bytes]) -> list[Field]:
    """minimum/maximum (local millis), minimumUtc/maximumUtc and the sub-millisecond
    nanos (+1, 0 = none) travel together: the side that wins keeps all three."""
    out: list[Field] = []
    for local, utc, nanos, pick in ((1, 3, 5, min), (2, 4, 6, max)):
        cands = []
        for d in (a, b):
            ms = _int(d, utc) if _int(d, utc) is not None else _int(d, local)
            if ms is None:
                continue
            n = _int(d, nanos)
            cands.append(((zigzag_decode(ms), (n or 1) - 1), d))
        if not cands:
            continue
        _, win = pick(cands, key=lambda c: c[0])
        out.extend(
            (num, VARINT, v) for num in (local, utc, nanos) if (v := _int(win, num)) is not None
        )
    return sorted(out, key=lambda f: f[0])


def _merge_bucket(a: dict[int, int | bytes], b: dict[int, int | bytes]) -> list[Field]:
    def counts(d: dict[int, int | bytes]) -> list[int]:
        raw = _bytes(d, 1)
        if raw is None:
            v = _int(d, 1)  # an unpacked single count
            return [] if v is None else [v]
        return decode_packed(raw)

    ca, cb = counts(a), counts(b)
    n = max(len(ca), len(cb))
    total = [(ca[i] if i < len(ca) else 0) + (cb[i] if i < len(cb) else 0) for i in range(n)]
    if not total:
        return []
    return [(1, LEN, encode_packed(total))]


def _merge_collection(a: dict[int, int | bytes], b: dict[int, int | bytes]) -> list[Field]:
    out: list[Field] = []
    for num, pick in ((1, min), (2, max)):
        vals = [v for v in (_int(a, num), _int(b, num)) if v is not None]
        if vals:
            out.append((num, VARINT, pick(vals)))
    ta, tb = _int(a, 3), _int(b, 3)
    if ta is not None and tb is not None:
        out.append((3, VARINT, ta + tb))
    return out


_TYPED: dict[int, Callable[[dict[int, int | bytes], dict[int, int | bytes]], list[Field]]] = {
    2: _merge_int,
    3: _merge_double,
    4: _merge_string,
    5: _merge_bucket,
    6: _merge_decimal,
    7: _merge_date,
    8: _merge_binary,
    9: _merge_timestamp,
    12: _merge_collection,
}


class _Stats:
    """One column's encoded ``ColumnStatistics`` and its decoded fields (the typed
    sub-messages decoded when first needed). The stitcher keeps its running merge in this
    form, so each piece costs one decode (the piece's), not two."""

    __slots__ = ("blob", "top", "typed")

    def __init__(
        self,
        blob: bytes,
        top: dict[int, int | bytes] | None = None,
        typed: dict[int, dict[int, int | bytes]] | None = None,
    ) -> None:
        self.blob = blob
        self.top = fields_dict(decode_fields(blob)) if top is None else top
        self.typed = typed if typed is not None else {}

    def sub(self, num: int) -> dict[int, int | bytes]:
        """The typed sub-message ``num``, decoded ({} when absent)."""
        d = self.typed.get(num)
        if d is None:
            raw = _bytes(self.top, num)
            d = self.typed[num] = {} if raw is None else fields_dict(decode_fields(raw))
        return d


def merge_column_statistics(a: bytes, b: bytes) -> bytes:
    """Two encoded ``ColumnStatistics`` of one column as one (ORC's ``merge``).

    A side with no values contributes only its counts; a sum one side lacks (it
    overflowed) is dropped, as ORC does.
    """
    return _merge_stats(_Stats(a), _Stats(b)).blob


def _merge_stats(a: _Stats, b: _Stats) -> _Stats:
    da, db = a.top, b.top
    na, nb = _int(da, 1) or 0, _int(db, 1) or 0
    out: list[Field] = [(1, VARINT, na + nb)]
    typed: dict[int, dict[int, int | bytes]] = {}
    # Only the typed sub-messages either side has (one, for most columns), in field order.
    for num in sorted(k for k in (da.keys() | db.keys()) if k in _TYPED):
        merge = _TYPED[num]
        sa, sb = _bytes(da, num), _bytes(db, num)
        if sa is None and sb is None:
            continue
        fa = a.sub(num) if sa is not None and na else {}
        fb = b.sub(num) if sb is not None and nb else {}
        if not fa and not fb:
            # No values on either side: keep the (empty) typed message so readers see the type.
            out.append((num, LEN, sa if sa is not None else sb or b""))
            continue
        if not fa or not fb:
            one = sa if fa else sb
            assert one is not None
            fields = sorted(decode_fields(one), key=lambda f: f[0])
        else:
            fields = merge(fa, fb)
        typed[num] = fields_dict(fields)
        out.append((num, LEN, encode_fields(fields)))
    if 10 in da or 10 in db:
        out.append((10, VARINT, int(bool(_int(da, 10)) or bool(_int(db, 10)))))
    if 11 in da or 11 in db:
        out.append((11, VARINT, (_int(da, 11) or 0) + (_int(db, 11) or 0)))
    out.sort(key=lambda f: f[0])
    return _Stats(encode_fields(out), fields_dict(out), typed)


# --------------------------------------------------------------------- stitcher
class StripeStitcher:
    """Builds one ORC file from complete ORC files written with the same schema and
    settings, whose stripes the caller writes to the output (after the file's ``ORC``
    header): ``add_piece`` registers each one, ``tail`` returns the footer that
    describes every stripe so far."""

    def __init__(self, *, declared_block_size: int | None = None) -> None:
        #: The compression block the tails declare when the file is uncompressed (its
        #: pieces' encoders may use a larger one: ``orc_tail.declare_block_size``).
        self.declared_block_size = declared_block_size
        self.position = 0  # bytes handed out so far (= where the next write lands)
        self.stripe_rows: list[int] = []
        self._stripes: list[bytes] = []
        self._stats: list[_Stats] | None = None
        self._stripe_stats = bytearray()
        self._rows = 0
        self._template: OrcTail | None = None

    @property
    def rows(self) -> int:
        return self._rows

    @property
    def next_body_start(self) -> int:
        """Where the next piece's stripes land (after the file header for the first)."""
        return self.position or len(_HEADER)

    def add_piece(self, tail: OrcTail, *, body_start: int, body_length: int) -> None:
        """Register a piece whose stripes (its bytes after its own ``ORC`` header) the
        caller wrote at ``body_start``, ``body_length`` bytes long (the file header, for
        the first piece, is the caller's too)."""
        footer = fields_dict(tail.footer_fields)
        header = _int(footer, 1) or len(_HEADER)
        shift = body_start - header
        if self._template is not None:
            t = self._template
            # (The block size of an uncompressed piece shapes no byte of its stripes.)
            same_block = t.compression == _NONE or t.block_size == tail.block_size
            if t.compression != tail.compression or not same_block:
                raise AcidFormatError("pieces of one ORC file must share their compression")
        else:
            self._template = tail
        for num, _, v in tail.footer_fields:
            if num == 3:
                assert isinstance(v, bytes)
                sf = decode_fields(v)
                self._stripes.append(
                    encode_fields(
                        [
                            (n, w, x + shift if n == 1 and isinstance(x, int) else x)
                            for n, w, x in sf
                        ]
                    )
                )
                self.stripe_rows.append(int(fields_dict(sf).get(5, 0)))
        stats = [_Stats(v) for num, _, v in tail.footer_fields if num == 7 and isinstance(v, bytes)]
        if self._stats is None:
            self._stats = stats
        else:
            if len(stats) != len(self._stats):
                raise AcidFormatError("pieces of one ORC file must share their schema")
            self._stats = [_merge_stats(a, b) for a, b in zip(self._stats, stats, strict=True)]
        self._stripe_stats += decompress_chunks(tail.metadata_section, tail.compression)
        self._rows += _int(footer, 6) or 0
        self.position = body_start + body_length

    def tail(self, *, metadata: Mapping[str, bytes], types: list[bytes] | None = None) -> bytes:
        """The tail (metadata section, footer, postscript, length byte) for everything
        appended so far, with ``metadata`` as the user metadata and ``types`` (when
        given) replacing the footer's types. Counts towards ``position``."""
        t = self._template
        if t is None:
            raise AcidFormatError("no stripes to describe yet")
        fields: list[Field] = []
        done: set[int] = set()
        for num, wt, v in t.footer_fields:
            if num >= 5 and 5 not in done:
                # Exactly our metadata items (pyarrow writes none), in field order.
                fields.extend(metadata_items(metadata))
                done.add(5)
            if num in done:
                continue
            if num == 2:
                # The C++ writer's convention (pyorc's and pyarrow's): header excluded.
                fields.append((2, VARINT, self.position - len(_HEADER)))
            elif num == 3:
                fields.extend((3, LEN, s) for s in self._stripes)
                done.add(3)
            elif num == 4 and types is not None:
                fields.extend((4, LEN, ty) for ty in types)
                done.add(4)
            elif num == 6:
                fields.append((6, VARINT, self._rows))
            elif num == 7:
                fields.extend((7, LEN, s.blob) for s in self._stats or [])
                done.add(7)
            else:
                fields.append((num, wt, v))
        if 5 not in done:
            fields.extend(metadata_items(metadata))
        fields = with_proleptic_calendar(fields)
        footer = compress_chunks(encode_fields(fields), t.compression, t.block_size)
        meta = compress_chunks(bytes(self._stripe_stats), t.compression, t.block_size)
        ps_fields = [
            (n, w, len(footer) if n == 1 else len(meta) if n == 5 else v)
            for n, w, v in declare_block_size(t, self.declared_block_size)
        ]
        if not any(n == 5 for n, _, _ in ps_fields):
            ps_fields.append((5, VARINT, len(meta)))
            ps_fields.sort(key=lambda f: f[0])
        ps = encode_fields(ps_fields)
        if len(ps) > 255:
            raise AcidFormatError("ORC postscript longer than 255 bytes")
        out = meta + footer + ps + bytes((len(ps),))
        self.position += len(out)
        return out
