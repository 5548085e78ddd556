"""The ``<bucket file>_flush_length`` side file of streaming deltas.

A sequence of 8-byte big-endian signed longs (Java ``DataOutputStream.writeLong``);
each is a file length at which a complete intermediate ORC footer ends, and
readers use the last one. Sources: ``OrcRecordUpdater`` and
``AcidUtils.getLastFlushLength`` / ``OrcAcidUtils.getLastFlushLength``.
"""

from __future__ import annotations

import struct

from acidstream.acid.errors import AcidFormatError, SideFileError

__all__ = ["decode_flush_lengths", "encode_flush_length", "last_flush_length"]

_LONG = struct.Struct(">q")


def encode_flush_length(length: int) -> bytes:
    """One side-file entry."""
    return _LONG.pack(length)


def decode_flush_lengths(data: bytes, *, path: str = "<side file>") -> list[int]:
    """Every complete length in a side file's bytes.

    A trailing partial long is the mark of a torn write; Hive surfaces it as an
    ``EOFException`` and so do we, with a typed error naming the file.
    """
    if len(data) % 8:
        raise SideFileError(
            f"{path}: side file has {len(data)} bytes, not a whole number of 8-byte lengths "
            "(torn write?); consider waiting, or recover the file"
        )
    return [v for (v,) in _LONG.iter_unpack(data)]


def last_flush_length(
    data: bytes, *, path: str = "<side file>", file_length: int | None = None
) -> int:
    """The logical length a reader must use, as ``AcidUtils.getLastFlushLength``.

    An empty side file is "found but is not readable"; a length beyond the real
    file size or negative is corrupt.
    """
    lengths = decode_flush_lengths(data, path=path)
    if not lengths:
        raise SideFileError(
            f"{path}: side file found but is not readable (no complete length); "
            "consider waiting, or recover the file"
        )
    last = lengths[-1]
    if last < 0 or (file_length is not None and last > file_length):
        raise AcidFormatError(
            f"{path}: flush length {last} is outside the data file (size {file_length})"
        )
    return last
