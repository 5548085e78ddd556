"""File objects the ORC engines write through, so that each tail can be rewritten.

``TailCapture`` passes pyorc's bytes through and holds a footer while it is being
written; ``PieceCapture`` does the same for one stitched piece of pyarrow's output
(``acidstream.acid.orc_stitch``). ``AcidFileWriter`` rewrites what they hold (``acidstream.acid.orc_tail``).
"""

from __future__ import annotations

import io
from typing import IO, Any

__all__ = ["PieceCapture", "TailCapture"]


class TailCapture(io.RawIOBase):
    """The file object pyorc writes to.

    Bytes pass straight through, except while a footer is being written: then
    they are held so the tail can be rewritten before it reaches storage. The
    C++ writer counts offsets itself (``logical``); ``AcidFileWriter`` maps them
    to the physical file.
    """

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__()
        self.raw = raw
        self.logical = 0
        self.holding = False
        self.held = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        n = len(b)
        self.logical += n
        if self.holding:
            self.held += b
        else:
            self.raw.write(b)
        return n

    def flush(self) -> None:
        # Durability is decided by AcidFileWriter at commit points, not by pyorc.
        pass

    def close(self) -> None:
        # pyorc must not close the underlying file: the tail is still to be rewritten.
        pass


class PieceCapture(TailCapture):
    """The file object one stitched piece's pyarrow writer writes to.

    Stripes go straight to the real file as pyarrow emits them (memory stays at one
    stripe), minus the piece's own ``ORC`` header unless it is the file's first piece;
    while the piece is closed the bytes (last stripe + the piece's tail) are held so the
    tail can be replaced by one covering the whole file.
    """

    def __init__(self, raw: IO[bytes], *, first: bool) -> None:
        super().__init__(raw)
        self.header_left = 3  # len(b"ORC"): the file's header if first, else dropped
        self.first = first
        self.passed = 0  # body bytes written through (header excluded)

    def write(self, b: Any) -> int:
        n = len(b)
        data = bytes(b)
        if self.header_left:
            cut = min(self.header_left, len(data))
            self.header_left -= cut
            if self.first:
                self.raw.write(data[:cut])
            data = data[cut:]
        if self.holding:
            self.held += data
        elif data:
            self.raw.write(data)
            self.passed += len(data)
        return n
