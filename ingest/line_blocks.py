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
    """
    pos = start  # offset of buf[0] in the input
    buf = b""
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
        buf += chunk
        i = 0
        while True:
            cut = _first_delim(buf, i)
            if cut < 0:
                break
            if cut > i:
                if cut - i > max_record_bytes:
                    block.oversize.append(
                        Oversize(pos + i, pos + cut + 1, cut - i, buf[i : i + _KEEP])
                    )
                else:
                    block.records.append(buf[i:cut])
                    block.starts.append(pos + i)
                    block.ends.append(pos + cut + 1)
                    if len(block.records) >= block_records:
                        yield block
                        block = Block()
            i = cut + 1
        buf = buf[i:]
        pos += i
        if len(buf) > max_record_bytes:
            skipping = (pos, buf[:_KEEP])
            pos += len(buf)
            buf = b""
    if skipping is not None:
        rec_start, head = skipping
        block.oversize.append(Oversize(rec_start, pos, pos - rec_start, head))
    elif buf:
        if len(buf) > max_record_bytes:
            block.oversize.append(Oversize(pos, pos + len(buf), len(buf), buf[:_KEEP]))
        else:
            block.records.append(buf)
            block.starts.append(pos)
            block.ends.append(pos + len(buf))
    if block.records or block.oversize:
        yield block


def _first_delim(data: bytes, start: int = 0) -> int:
    n = data.find(b"\n", start)
    r = data.find(b"\r", start, n if n >= 0 else len(data))
    return r if r >= 0 else n
