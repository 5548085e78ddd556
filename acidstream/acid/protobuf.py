"""The protobuf wire codec ORC's file tail is written in (no schema, framing only).

ORC's tail (``PostScript``, ``Footer``, ``Metadata``, ``ColumnStatistics``...) is a set of
protobuf messages. ``acidstream.acid.orc_tail`` and ``acidstream.acid.orc_stitch`` rewrite such messages field
by field and must keep every field they do not touch byte for byte, so they work on
the wire form: a message is a list of ``(field number, wire type, value)``.
"""

from __future__ import annotations

from collections.abc import Iterable

from acidstream.acid.errors import AcidFormatError

__all__ = [
    "I32",
    "I64",
    "LEN",
    "VARINT",
    "Field",
    "decode_fields",
    "decode_packed",
    "encode_fields",
    "encode_packed",
    "encode_varint",
    "fields_dict",
    "read_varint",
    "zigzag_decode",
    "zigzag_encode",
]

VARINT, I64, LEN, I32 = 0, 1, 2, 5

# One protobuf field: (number, wire type, value); the value is an int for varints and
# the raw payload bytes otherwise.
Field = tuple[int, int, int | bytes]


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode the base-128 varint at ``buf[pos:]``; returns ``(value, position after it)``."""
    if pos < len(buf) and buf[pos] < 0x80:
        return buf[pos], pos + 1  # most ORC tail varints are one byte
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


# One-byte varints, prebuilt: field keys and small counts are most of an ORC tail.
_SMALL = tuple(bytes((i,)) for i in range(0x80))


def encode_varint(value: int) -> bytes:
    """Protobuf base-128 varint."""
    if 0 <= value < 0x80:
        return _SMALL[value]
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def zigzag_decode(value: int) -> int:
    """A ``sint64`` field's value from its zigzag-encoded varint."""
    return (value >> 1) ^ -(value & 1)


def zigzag_encode(value: int) -> int:
    """The zigzag-encoded varint of a ``sint64`` value."""
    return (value << 1) ^ (value >> 63)


def decode_fields(buf: bytes) -> list[Field]:
    """Every field of one serialized message, in wire order."""
    out: list[Field] = []
    pos = 0
    end = len(buf)
    while pos < end:
        # One-byte keys and values inline (most of an ORC tail's): no call per varint.
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = read_varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == VARINT:
            if pos < end and buf[pos] < 0x80:
                v = buf[pos]
                pos += 1
            else:
                v, pos = read_varint(buf, pos)
            out.append((num, wt, v))
        elif wt == LEN:
            if pos < end and buf[pos] < 0x80:
                n = buf[pos]
                pos += 1
            else:
                n, pos = read_varint(buf, pos)
            out.append((num, wt, buf[pos : pos + n]))
            pos += n
        elif wt == I64:
            out.append((num, wt, buf[pos : pos + 8]))
            pos += 8
        elif wt == I32:
            out.append((num, wt, buf[pos : pos + 4]))
            pos += 4
        else:
            raise AcidFormatError(f"unsupported protobuf wire type {wt} in ORC tail")
    return out


def encode_fields(fields: list[Field]) -> bytes:
    """Serialize fields (as :func:`decode_fields` returns them) into one message."""
    out = bytearray()
    small = _SMALL
    for num, wt, v in fields:
        key = (num << 3) | wt
        out += small[key] if key < 0x80 else encode_varint(key)
        if wt == VARINT:
            assert isinstance(v, int)
            out += small[v] if 0 <= v < 0x80 else encode_varint(v)
        else:
            assert isinstance(v, bytes)
            if wt == LEN:
                n = len(v)
                out += small[n] if n < 0x80 else encode_varint(n)
            out += v
    return bytes(out)


def fields_dict(fields: list[Field]) -> dict[int, int | bytes]:
    """A message's fields by number; for a repeated field the last value wins."""
    return {num: v for num, _, v in fields}


def encode_packed(values: Iterable[int]) -> bytes:
    """The payload of a packed repeated varint field (e.g. ``Type.subtypes``)."""
    return b"".join(encode_varint(v) for v in values)


def decode_packed(buf: bytes) -> list[int]:
    """The values of a packed repeated varint field."""
    out = []
    pos = 0
    while pos < len(buf):
        v, pos = read_varint(buf, pos)
        out.append(v)
    return out
