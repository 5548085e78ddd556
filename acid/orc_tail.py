"""Minimal ORC file-tail codec: read and rewrite the footer's user metadata.

The C++ ORC writer behind pyorc appends a metadata item on every
``addUserMetadata`` call and writes user metadata only when asked, so it cannot
produce Hive's footers by itself: Hive writes ``hive.acid.key.index`` (one entry
per stripe), ``hive.acid.stats`` and ``hive.acid.version`` exactly once into
every footer, intermediate ones included. This module rewrites a freshly written
tail (``[metadata][footer][postscript][psLen]``) with the exact metadata items,
keeping every other footer field byte for byte, and shifts stripe offsets when
earlier tails in the same file changed length.

Only the protobuf framing is decoded (field numbers from ``orc_proto.proto``:
Footer.stripes=3, Footer.metadata=5, StripeInformation.offset=1 and
numberOfRows=5, PostScript.footerLength=1, compression=2,
compressionBlockSize=3, metadataLength=5).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from acid.errors import AcidFormatError

__all__ = ["OrcTail", "encode_varint", "parse_tail", "rewrite_tail"]

_NONE, _ZLIB = 0, 1
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise AcidFormatError("truncated varint in ORC tail")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def encode_varint(value: int) -> bytes:
    """Protobuf base-128 varint."""
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


# One protobuf field: (number, wire type, value); value is an int for varints and
# the raw payload bytes otherwise.
_Field = tuple[int, int, int | bytes]


def _fields(buf: bytes) -> list[_Field]:
    out: list[_Field] = []
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == _VARINT:
            v, pos = _read_varint(buf, pos)
            out.append((num, wt, v))
        elif wt == _LEN:
            n, pos = _read_varint(buf, pos)
            out.append((num, wt, buf[pos : pos + n]))
            pos += n
        elif wt == _I64:
            out.append((num, wt, buf[pos : pos + 8]))
            pos += 8
        elif wt == _I32:
            out.append((num, wt, buf[pos : pos + 4]))
            pos += 4
        else:
            raise AcidFormatError(f"unsupported protobuf wire type {wt} in ORC tail")
    return out


def _encode(fields: list[_Field]) -> bytes:
    out = bytearray()
    for num, wt, v in fields:
        out += encode_varint((num << 3) | wt)
        if wt == _VARINT:
            assert isinstance(v, int)
            out += encode_varint(v)
        else:
            assert isinstance(v, bytes)
            if wt == _LEN:
                out += encode_varint(len(v))
            out += v
    return bytes(out)


def _decompress(data: bytes, kind: int) -> bytes:
    if kind == _NONE:
        return data
    if kind != _ZLIB:
        raise AcidFormatError(f"ORC compression kind {kind} is not supported for tail rewriting")
    out = bytearray()
    pos = 0
    while pos < len(data):
        if pos + 3 > len(data):
            raise AcidFormatError("truncated ORC compression chunk header")
        header = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
        pos += 3
        n, original = header >> 1, header & 1
        chunk = data[pos : pos + n]
        pos += n
        out += chunk if original else zlib.decompress(chunk, -15)
    return bytes(out)


def _compress(data: bytes, kind: int, block_size: int) -> bytes:
    if kind == _NONE:
        return data
    out = bytearray()
    for start in range(0, len(data), block_size):
        piece = data[start : start + block_size]
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        packed = c.compress(piece) + c.flush()
        if len(packed) >= len(piece):
            header, body = (len(piece) << 1) | 1, piece
        else:
            header, body = len(packed) << 1, packed
        out += bytes((header & 0xFF, (header >> 8) & 0xFF, (header >> 16) & 0xFF)) + body
    return bytes(out)


@dataclass(frozen=True)
class OrcTail:
    """The decoded end of an ORC file (or of a prefix ending at a footer)."""

    tail_length: int  # metadata + footer + postscript + 1
    compression: int
    block_size: int
    metadata_section: bytes
    footer_fields: list[_Field]
    postscript_fields: list[_Field]

    @property
    def stripe_rows(self) -> list[int]:
        """Rows of each stripe, in file order."""
        rows = []
        for num, _, v in self.footer_fields:
            if num == 3:
                assert isinstance(v, bytes)
                n = 0
                for sn, _, sv in _fields(v):
                    if sn == 5:
                        assert isinstance(sv, int)
                        n = sv
                rows.append(n)
        return rows

    @property
    def user_metadata(self) -> dict[str, bytes]:
        """User metadata; for a repeated name the last item wins."""
        out: dict[str, bytes] = {}
        for num, _, v in self.footer_fields:
            if num == 5:
                assert isinstance(v, bytes)
                name, value = "", b""
                for fn, _, fv in _fields(v):
                    if fn == 1:
                        assert isinstance(fv, bytes)
                        name = fv.decode()
                    elif fn == 2:
                        assert isinstance(fv, bytes)
                        value = fv
                out[name] = value
        return out


def parse_tail(buf: bytes) -> OrcTail:
    """Decode the tail at the end of ``buf`` (which must end where a footer ends)."""
    if len(buf) < 4:
        raise AcidFormatError("too short to hold an ORC tail")
    ps_len = buf[-1]
    ps = buf[-1 - ps_len : -1]
    ps_fields = _fields(ps)
    vals = {num: v for num, wt, v in ps_fields if wt == _VARINT}
    footer_len = int(vals.get(1, 0))
    compression = int(vals.get(2, 0))
    block = int(vals.get(3, 256 * 1024))
    meta_len = int(vals.get(5, 0))
    tail_len = 1 + ps_len + footer_len + meta_len
    if tail_len > len(buf):
        raise AcidFormatError("ORC tail is longer than the bytes given")
    footer_start = len(buf) - 1 - ps_len - footer_len
    footer = _decompress(buf[footer_start : len(buf) - 1 - ps_len], compression)
    return OrcTail(
        tail_length=tail_len,
        compression=compression,
        block_size=block,
        metadata_section=buf[footer_start - meta_len : footer_start],
        footer_fields=_fields(footer),
        postscript_fields=ps_fields,
    )


def rewrite_tail(
    tail: OrcTail,
    *,
    metadata: Mapping[str, bytes],
    physical_offset: Callable[[int], int],
    types: list[bytes] | None = None,
) -> bytes:
    """The tail re-encoded with exactly ``metadata`` as user metadata.

    Every stripe offset (and the footer's content length) goes through
    ``physical_offset``, which maps the writer's logical offsets to positions in
    the file as it really is on disk. ``types``, when given, replaces the
    footer's ``Type`` messages (same column numbering, Hive's exact types).
    """
    if types is not None:
        have = sum(1 for num, _, _ in tail.footer_fields if num == 4)
        if have != len(types):
            raise AcidFormatError(f"footer has {have} column types, schema has {len(types)}")
    types_done = False
    new_fields: list[_Field] = []
    meta_done = False
    for num, wt, v in tail.footer_fields:
        if num == 3 and wt == _LEN:
            assert isinstance(v, bytes)
            sfs = [
                (sn, swt, physical_offset(sv) if sn == 1 and isinstance(sv, int) else sv)
                for sn, swt, sv in _fields(v)
            ]
            new_fields.append((num, wt, _encode(sfs)))
        elif num == 4 and types is not None:
            if not types_done:
                new_fields.extend((4, _LEN, t) for t in types)
                types_done = True
        elif num == 2 and wt == _VARINT:
            assert isinstance(v, int)
            new_fields.append((num, wt, physical_offset(v)))
        elif num == 5:
            if not meta_done:
                new_fields.extend(_metadata_items(metadata))
                meta_done = True
        elif num > 5 and not meta_done:
            new_fields.extend(_metadata_items(metadata))
            meta_done = True
            new_fields.append((num, wt, v))
        else:
            new_fields.append((num, wt, v))
    if not meta_done:
        new_fields.extend(_metadata_items(metadata))
    footer = _compress(_encode(new_fields), tail.compression, tail.block_size)
    ps = _encode([(n, w, len(footer) if n == 1 else v) for n, w, v in tail.postscript_fields])
    if len(ps) > 255:
        raise AcidFormatError("ORC postscript longer than 255 bytes")
    return tail.metadata_section + footer + ps + bytes((len(ps),))


def _metadata_items(metadata: Mapping[str, bytes]) -> list[_Field]:
    return [
        (5, _LEN, _encode([(1, _LEN, k.encode()), (2, _LEN, val)])) for k, val in metadata.items()
    ]
