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

import pyarrow as pa

from acidstream.acid.errors import AcidFormatError
from acidstream.acid.protobuf import LEN, VARINT, Field, decode_fields, encode_fields, read_varint

__all__ = [
    "PROLEPTIC_GREGORIAN",
    "OrcTail",
    "compress_chunks",
    "declare_block_size",
    "decompress_chunk",
    "decompress_chunks",
    "metadata_items",
    "parse_tail",
    "rewrite_tail",
    "tail_bytes",
    "with_proleptic_calendar",
]

# Footer.calendar (field 11) = CalendarKind.PROLEPTIC_GREGORIAN.
PROLEPTIC_GREGORIAN = 2
# PostScript.compression (orc_proto.proto CompressionKind).
_NONE, _ZLIB, _SNAPPY, _LZO, _LZ4, _ZSTD = 0, 1, 2, 3, 4, 5
_KIND_NAMES = {
    _NONE: "NONE",
    _ZLIB: "ZLIB",
    _SNAPPY: "SNAPPY",
    _LZO: "LZO",
    _LZ4: "LZ4",
    _ZSTD: "ZSTD",
}


def _zstd_content_size(frame: bytes) -> int:
    """The Frame_Content_Size of a zstd frame (RFC 8878 §3.1.1.1); ORC C++ writes it."""
    if len(frame) < 6 or frame[:4] != b"\x28\xb5\x2f\xfd":
        raise AcidFormatError("not a zstd frame")
    desc = frame[4]
    fcs_flag, single = desc >> 6, (desc >> 5) & 1
    pos = 5 + (0 if single else 1) + (0, 1, 2, 4)[desc & 3]
    size = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if size == 0:
        raise AcidFormatError("zstd frame without its content size")
    value = int.from_bytes(frame[pos : pos + size], "little")
    return value + 256 if size == 2 else value


# The pyarrow codec of each ORC kind written here besides ZLIB (raw snappy, zstd frames).
_ARROW_CODEC = {_SNAPPY: "snappy", _ZSTD: "zstd"}


def _unsupported(kind: int) -> AcidFormatError:
    return AcidFormatError(
        f"ORC compression {_KIND_NAMES.get(kind, kind)} is not supported for tail rewriting"
    )


def _decompress(kind: int, chunk: bytes) -> bytes:
    """One compressed chunk; a corrupt one is an ``AcidFormatError``, whatever the codec."""
    try:
        if kind == _ZLIB:
            return zlib.decompress(chunk, -15)
        if kind not in _ARROW_CODEC:
            raise _unsupported(kind)
        # pyarrow needs the decompressed length: snappy's varint preamble, zstd's header.
        size = read_varint(chunk, 0)[0] if kind == _SNAPPY else _zstd_content_size(chunk)
        return pa.Codec(_ARROW_CODEC[kind]).decompress(chunk, decompressed_size=size, asbytes=True)
    except (zlib.error, pa.ArrowException, OSError) as e:  # pyarrow: OSError or ArrowInvalid
        raise AcidFormatError(f"corrupt {_KIND_NAMES[kind]} chunk in an ORC tail: {e}") from e


def _compress(kind: int, piece: bytes) -> bytes:
    if kind == _ZLIB:
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return c.compress(piece) + c.flush()
    if kind not in _ARROW_CODEC:
        raise _unsupported(kind)
    return pa.Codec(_ARROW_CODEC[kind]).compress(piece, asbytes=True)


def decompress_chunks(data: bytes, kind: int) -> bytes:
    """Undo ORC's chunked compression (``kind``: the PostScript's; NONE, ZLIB, SNAPPY or
    ZSTD, the codecs this project writes)."""
    if kind == _NONE:
        return data
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
        out += chunk if original else _decompress(kind, chunk)
    return bytes(out)


def compress_chunks(data: bytes, kind: int, block_size: int) -> bytes:
    """ORC's chunked compression of ``data`` in ``block_size`` chunks (a chunk that does
    not shrink is stored as it is, flagged "original", as ORC's writers do)."""
    if kind == _NONE:
        return data
    out = bytearray()
    for start in range(0, len(data), block_size):
        piece = data[start : start + block_size]
        packed = _compress(kind, piece)
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
    footer_fields: list[Field]
    postscript_fields: list[Field]

    @property
    def stripe_rows(self) -> list[int]:
        """Rows of each stripe, in file order."""
        rows = []
        for num, _, v in self.footer_fields:
            if num == 3:
                assert isinstance(v, bytes)
                n = 0
                for sn, _, sv in decode_fields(v):
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
                for fn, _, fv in decode_fields(v):
                    if fn == 1:
                        assert isinstance(fv, bytes)
                        name = fv.decode()
                    elif fn == 2:
                        assert isinstance(fv, bytes)
                        value = fv
                out[name] = value
        return out


def tail_bytes(buf: bytes | memoryview) -> bytes:
    """The tail at the end of ``buf`` (any buffer that ends where a footer ends), as
    bytes for :func:`parse_tail`: only the tail is copied, not the stripes before it."""
    if len(buf) < 4:
        raise AcidFormatError("too short to hold an ORC tail")
    ps_len = buf[-1]
    vals = {num: v for num, wt, v in decode_fields(bytes(buf[-1 - ps_len : -1])) if wt == VARINT}
    tail_len = 1 + ps_len + int(vals.get(1, 0)) + int(vals.get(5, 0))
    if tail_len > len(buf):
        raise AcidFormatError("ORC tail is longer than the bytes given")
    return bytes(buf[len(buf) - tail_len :])


def parse_tail(buf: bytes) -> OrcTail:
    """Decode the tail at the end of ``buf`` (which must end where a footer ends)."""
    if len(buf) < 4:
        raise AcidFormatError("too short to hold an ORC tail")
    ps_len = buf[-1]
    ps = buf[-1 - ps_len : -1]
    ps_fields = decode_fields(ps)
    vals = {num: v for num, wt, v in ps_fields if wt == VARINT}
    footer_len = int(vals.get(1, 0))
    compression = int(vals.get(2, 0))
    block = int(vals.get(3, 256 * 1024))
    meta_len = int(vals.get(5, 0))
    tail_len = 1 + ps_len + footer_len + meta_len
    if tail_len > len(buf):
        raise AcidFormatError("ORC tail is longer than the bytes given")
    footer_start = len(buf) - 1 - ps_len - footer_len
    footer = decompress_chunks(buf[footer_start : len(buf) - 1 - ps_len], compression)
    return OrcTail(
        tail_length=tail_len,
        compression=compression,
        block_size=block,
        metadata_section=buf[footer_start - meta_len : footer_start],
        footer_fields=decode_fields(footer),
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
    new_fields: list[Field] = []
    meta_done = False
    for num, wt, v in tail.footer_fields:
        if num == 3 and wt == LEN:
            assert isinstance(v, bytes)
            sfs = [
                (sn, swt, physical_offset(sv) if sn == 1 and isinstance(sv, int) else sv)
                for sn, swt, sv in decode_fields(v)
            ]
            new_fields.append((num, wt, encode_fields(sfs)))
        elif num == 4 and types is not None:
            if not types_done:
                new_fields.extend((4, LEN, t) for t in types)
                types_done = True
        elif num == 2 and wt == VARINT:
            assert isinstance(v, int)
            new_fields.append((num, wt, physical_offset(v)))
        elif num == 5:
            if not meta_done:
                new_fields.extend(metadata_items(metadata))
                meta_done = True
        elif num > 5 and not meta_done:
            new_fields.extend(metadata_items(metadata))
            meta_done = True
            new_fields.append((num, wt, v))
        else:
            new_fields.append((num, wt, v))
    if not meta_done:
        new_fields.extend(metadata_items(metadata))
    new_fields = with_proleptic_calendar(new_fields)
    footer = compress_chunks(encode_fields(new_fields), tail.compression, tail.block_size)
    ps = encode_fields([(n, w, len(footer) if n == 1 else v) for n, w, v in tail.postscript_fields])
    if len(ps) > 255:
        raise AcidFormatError("ORC postscript longer than 255 bytes")
    return tail.metadata_section + footer + ps + bytes((len(ps),))


def declare_block_size(tail: OrcTail, block_size: int | None) -> list[Field]:
    """``tail``'s postscript fields, declaring ``block_size`` as the compression block of
    an uncompressed file (its encoder may have used a larger one: the block size changes
    no other byte of an uncompressed file). Unchanged when compressed or ``None``."""
    if block_size is None or tail.compression != _NONE:
        return tail.postscript_fields
    return [
        (n, w, block_size if n == 3 and w == VARINT else v) for n, w, v in tail.postscript_fields
    ]


def metadata_items(metadata: Mapping[str, bytes]) -> list[Field]:
    """Footer ``UserMetadataItem`` fields (number 5) for ``metadata``, in its order."""
    return [
        (5, LEN, encode_fields([(1, LEN, k.encode()), (2, LEN, val)]))
        for k, val in metadata.items()
    ]


def with_proleptic_calendar(footer_fields: list[Field]) -> list[Field]:
    """Footer fields declaring ``calendar = PROLEPTIC_GREGORIAN`` (field 11).

    ORC's C++ writers (pyorc's and pyarrow's) store proleptic Gregorian values, as
    Python's ``datetime`` and Hive 3.1+/4 use, but leave the calendar unset; ORC
    Java then assumes the hybrid Julian calendar and shifts dates and timestamps
    before 1582-10-15 by days when a reader asks for proleptic values, as Hive 4's do.
    """
    out = [f for f in footer_fields if f[0] != 11]
    at = next((i for i, f in enumerate(out) if f[0] > 11), len(out))
    out.insert(at, (11, VARINT, PROLEPTIC_GREGORIAN))
    return out


def decompress_chunk(kind: int, chunk: bytes | memoryview) -> bytes:
    """One compressed chunk's bytes (the body after ORC's 3-byte chunk header), for the
    readers of stripe streams (``acidstream.acid.orc_row_groups``); ``AcidFormatError``
    for a corrupt chunk or a codec not handled here (LZO, LZ4)."""
    return _decompress(kind, bytes(chunk))
