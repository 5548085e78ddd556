"""Hive's ``BucketCodec``: the encoded ``bucket`` field of every ACID event.

V1 layout, MSB to LSB: 3 bits version (``001``), 1 reserved, 12 bits writer
(bucket) id, 4 reserved, 12 bits statement id. V0 is the legacy plain bucket id.
"""

from __future__ import annotations

from acidstream.acid.errors import AcidFormatError

__all__ = ["MAX_BUCKET_ID", "MAX_STATEMENT_ID", "decode", "decode_writer_id", "encode", "version"]

MAX_BUCKET_ID = 4095
MAX_STATEMENT_ID = 4095
_VERSION_MASK = 0xE0000000
_WRITER_MASK = 0x0FFF0000
_STMT_MASK = 0x00000FFF


def _unsigned(bucket_property: int) -> int:
    # Stored as a Java int: accept both the signed and unsigned views.
    return bucket_property & 0xFFFFFFFF


def version(bucket_property: int) -> int:
    """The codec version (0 or 1) of an encoded bucket property."""
    v = (_unsigned(bucket_property) & _VERSION_MASK) >> 29
    if v not in (0, 1):
        raise AcidFormatError(f"Illegal 'bucket' format. Version={v} in {bucket_property}")
    return v


def encode(bucket_id: int, statement_id: int = 0) -> int:
    """V1-encode a writer (bucket) id and statement id; statement id -1 encodes as 0."""
    if not 0 <= bucket_id <= MAX_BUCKET_ID:
        raise ValueError(f"bucket id {bucket_id} out of range [0, {MAX_BUCKET_ID}]")
    if statement_id == -1:
        statement_id = 0
    if not 0 <= statement_id <= MAX_STATEMENT_ID:
        raise ValueError(f"statement id {statement_id} out of range [-1, {MAX_STATEMENT_ID}]")
    return (1 << 29) | (bucket_id << 16) | statement_id


def decode(bucket_property: int) -> tuple[int, int]:
    """``(writer_id, statement_id)`` of an encoded bucket property (V0 or V1)."""
    u = _unsigned(bucket_property)
    if version(u) == 0:
        return u, 0
    return (u & _WRITER_MASK) >> 16, u & _STMT_MASK


def decode_writer_id(bucket_property: int) -> int:
    """The writer (bucket) id only."""
    return decode(bucket_property)[0]
