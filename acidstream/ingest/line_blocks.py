"""Line-delimited input read in blocks, with the byte offset where each record ends.

``acidstream ingest`` (and anything else that streams a file or a pipe) reads its input
through :func:`read_blocks`: bounded memory whatever the file size, records split as
Hive's streaming writers split them (``[\\r\\n]``: empty lines skipped), and the offset
after each record, so a commit can record exactly how far it got and a re-run can resume
there. A record longer than ``max_record_bytes`` is never held in memory: it is reported
as oversize (its first bytes kept for the dead letter) and skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

__all__ = ["Block", "Oversize", "read_blocks"]

_CHUNK = 1 << 20
_KEEP = 1024  # bytes of an oversize record kept for its dead letter


@dataclass(frozen=True)
class Oversize:
    """A record over the size limit: where it starts and ends, its size, its first bytes."""

    start: int
    end: int
    size: int
    head: bytes


@dataclass
class Block:
    """Records in input order, each with the offset where it starts and the offset just past
    its line delimiter (where a reader resumes after it)."""

    records: list[bytes] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    oversize: list[Oversize] = field(default_factory=list)

    @property
    def end(self) -> int:
        """The offset up to which this block consumed the input."""
        return max(self.ends[-1] if self.ends else 0, self.oversize[-1].end if self.oversize else 0)

    def __len__(self) -> int:
        return len(self.records)


def read_blocks(
    f: BinaryIO,
    *,
    start: int = 0,
    block_records: int = 10_000,
    max_record_bytes: int = 16 << 20,
) -> Iterator[Block]:
    """Blocks of up to ``block_records`` records from ``f``, which is positioned at ``start``.

    Memory stays below about ``max_record_bytes`` plus one read chunk, whatever the input.
    Each chunk's delimiters are found in one vectorized pass (numpy); only the slicing of
    the records themselves is per record.
    """
    pos = start  # offset of the first unconsumed byte (the start of ``tail``)
    # The bytes of a record not yet ended, one piece per read: a long record is joined
    # once, when its delimiter comes (appending to one bytes object, and scanning it
    # again, on every read made a record of N chunks cost N^2 chunk copies).
    tail: list[bytes] = []
    tail_len = 0
    block = Block()
    skipping: tuple[int, bytes] | None = None  # (start, head) of an oversize record
    while True:
        chunk = f.read(_CHUNK)
        if not chunk:
            break
        if skipping is not None:
            cut = _first_delim(chunk)
            if cut < 0:
                pos += len(chunk)
                continue
            rec_start, head = skipping
            end = pos + cut + 1
            block.oversize.append(Oversize(rec_start, end, end - 1 - rec_start, head))
            skipping = None
            pos = end
            chunk = chunk[cut + 1 :]
        delims = _delims(chunk)  # only the new bytes are scanned
        if not len(delims):
            if chunk:
                tail.append(chunk)
                tail_len += len(chunk)
        else:
            buf = b"".join([*tail, chunk]) if tail else chunk
            delims += tail_len
            tail, tail_len = [], 0
            starts = np.concatenate(([0], delims[:-1] + 1))
            lengths = delims - starts
            keep = lengths > 0  # not empty lines (nor "\r\n"'s second half)
            firsts, lasts = starts[keep], delims[keep]
            if len(firsts) and int(lengths[keep].max()) > max_record_bytes:
                segments = _slow_segments(buf, pos, firsts, lasts, max_record_bytes)
            else:
                a_list, b_list = firsts.tolist(), lasts.tolist()
                segments = (
                    [buf[a:b] for a, b in zip(a_list, b_list, strict=True)],
                    (firsts + pos).tolist(),
                    (lasts + (pos + 1)).tolist(),
                    [],
                )
            yield from _fill(block, segments, block_records)
            i = int(delims[-1]) + 1
            if i < len(buf):
                tail, tail_len = [buf[i:]], len(buf) - i
            pos += i
        if tail_len > max_record_bytes:
            skipping = (pos, _head(tail))
            pos += tail_len
            tail, tail_len = [], 0
    if skipping is not None:
        rec_start, head = skipping
        block.oversize.append(Oversize(rec_start, pos, pos - rec_start, head))
    elif tail:
        if tail_len > max_record_bytes:
            block.oversize.append(Oversize(pos, pos + tail_len, tail_len, _head(tail)))
        else:
            block.records.append(b"".join(tail))
            block.starts.append(pos)
            block.ends.append(pos + tail_len)
    if block.records or block.oversize:
        yield block


_Segments = tuple[list[bytes], list[int], list[int], list[tuple[int, Oversize]]]


def _slow_segments(
    buf: bytes, pos: int, starts: np.ndarray, ends: np.ndarray, limit: int
) -> _Segments:
    """The chunk's records when some are over ``limit``: those become :class:`Oversize`
    entries, placed (by how many records precede them) where they came in the input."""
    records: list[bytes] = []
    rs: list[int] = []
    re_: list[int] = []
    big: list[tuple[int, Oversize]] = []
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        if b - a > limit:
            big.append((len(records), Oversize(pos + a, pos + b + 1, b - a, buf[a : a + _KEEP])))
        else:
            records.append(buf[a:b])
            rs.append(pos + a)
            re_.append(pos + b + 1)
    return records, rs, re_, big


def _fill(block: Block, segments: _Segments, block_records: int) -> Iterator[Block]:
    """Append a chunk's records (and oversize entries) to ``block`` in input order,
    yielding each block that fills up; the last, partly filled, stays in ``block``."""
    records, starts, ends, big = segments
    k = 0
    b = 0
    while True:
        # Oversize entries go to the block being filled when the input reaches them.
        while b < len(big) and big[b][0] <= k:
            block.oversize.append(big[b][1])
            b += 1
        if k >= len(records):
            break
        room = block_records - len(block.records)
        stop = min(len(records), k + room, big[b][0] if b < len(big) else len(records))
        block.records += records[k:stop]
        block.starts += starts[k:stop]
        block.ends += ends[k:stop]
        k = stop
        if len(block.records) >= block_records:
            full = Block(block.records, block.starts, block.ends, block.oversize)
            block.records, block.starts, block.ends, block.oversize = [], [], [], []
            yield full


def _delims(data: bytes) -> np.ndarray:
    """The positions of every ``\r`` and ``\n`` in ``data``."""
    arr = np.frombuffer(data, dtype=np.uint8)
    return np.flatnonzero((arr == 10) | (arr == 13))


def _head(pieces: list[bytes]) -> bytes:
    """The first ``_KEEP`` bytes of a record held in pieces (not joining the rest)."""
    out = b""
    for p in pieces:
        out += p[: _KEEP - len(out)]
        if len(out) >= _KEEP:
            break
    return out


def _first_delim(data: bytes, start: int = 0) -> int:
    n = data.find(b"\n", start)
    r = data.find(b"\r", start, n if n >= 0 else len(data))
    return r if r >= 0 else n
