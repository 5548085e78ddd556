"""ORC's run-length encodings, decoded with numpy: integer RLE v1 and v2, byte RLE and
booleans (the PRESENT streams).

A key lookup (``acidstream.acid.orc_row_groups``) decodes a few row groups of a stripe
itself, because pyarrow's ORC reader can only decode whole stripes. Each decoder
starts at a byte position of a :class:`ByteSource` (where a row group's run begins,
from the row index), skips the values of that run before the row group, and returns
``count`` values. Runs are parsed in Python (at most 512 values each); the values of a
run are produced by numpy (bit unpacking, cumulative sums), so the cost per value is
that of numpy.

Reference: the ORC specification, "Run Length Encoding" (v1 and v2) and "Byte Run
Length Encoding".
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from acidstream.acid.errors import AcidFormatError

__all__ = [
    "ByteSource",
    "decode_booleans",
    "decode_byte_rle",
    "decode_int_rle_v1",
    "decode_int_rle_v2",
    "unpack_bits",
]

# RLE v2's 5-bit width codes (FixedBitSizes): 0..23 -> 1..24, then 26, 28, 30, 32, 40,
# 48, 56, 64.
_WIDTHS = (*range(1, 25), 26, 28, 30, 32, 40, 48, 56, 64)
# A patch list's entries are packed at the closest of these widths (getClosestFixedBits).
_CLOSEST = [0] + [next(w for w in _WIDTHS if w >= n) for n in range(1, 65)]

_MASK64 = (1 << 64) - 1


class ByteSource:
    """The decompressed bytes of one ORC stream from some position on, produced on demand.

    ``more`` returns the next piece (decompressed chunk) or ``b""`` at the stream's end;
    ``pos`` is where decoding stands in :attr:`buf`.
    """

    def __init__(self, first: bytes, more: Callable[[], bytes], pos: int = 0) -> None:
        self.buf = bytearray(first)
        self._more = more
        self._done = False
        self.pos = pos

    def need(self, n: int) -> None:
        """Make ``n`` bytes from :attr:`pos` available (fewer only at the stream's end)."""
        while len(self.buf) - self.pos < n and not self._done:
            piece = self._more()
            if not piece:
                self._done = True
                break
            self.buf += piece

    def take(self, n: int) -> bytes:
        """The next ``n`` bytes (an ``AcidFormatError`` past the stream's end)."""
        self.need(n)
        if len(self.buf) - self.pos < n:
            raise AcidFormatError("ORC stream ends inside a run")
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out

    def byte(self) -> int:
        self.need(1)
        if self.pos >= len(self.buf):
            raise AcidFormatError("ORC stream ends inside a run")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        """An unsigned base-128 varint."""
        result = shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise AcidFormatError("ORC varint longer than 10 bytes")

    def varints(self, n: int) -> np.ndarray:
        """``n`` unsigned varints as uint64 (vectorized: one pass over the bytes)."""
        if n == 0:
            return np.zeros(0, dtype=np.uint64)
        self.need(10 * n)
        raw = np.frombuffer(self.buf, dtype=np.uint8, offset=self.pos)[: 10 * n]
        ends = np.flatnonzero(raw < 0x80)
        if len(ends) < n:
            raise AcidFormatError("ORC stream ends inside a run of varints")
        ends = ends[:n]
        used = int(ends[-1]) + 1
        b = raw[:used].astype(np.uint64)
        starts = np.concatenate(([0], ends[:-1] + 1))
        group = np.repeat(np.arange(n), np.diff(np.concatenate((starts, [used]))))
        k = np.arange(used) - starts[group]
        if k.max(initial=0) > 9:
            raise AcidFormatError("ORC varint longer than 10 bytes")
        parts = (b & np.uint64(0x7F)) << (k.astype(np.uint64) * np.uint64(7))
        self.pos += used
        return np.add.reduceat(parts, starts).astype(np.uint64)


def _zigzag(u: np.ndarray) -> np.ndarray:
    u = u.astype(np.uint64, copy=False)
    return ((u >> np.uint64(1)) ^ (np.uint64(0) - (u & np.uint64(1)))).view(np.int64)


def _zigzag_int(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def unpack_bits(data: bytes, n: int, width: int) -> np.ndarray:
    """``n`` big-endian bit-packed unsigned values of ``width`` bits (1..64) as uint64."""
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    raw = np.frombuffer(data, dtype=np.uint8)
    if width == 8:
        return raw[:n].astype(np.uint64)
    if width in (16, 32, 64):
        return np.frombuffer(data, dtype=f">u{width // 8}", count=n).astype(np.uint64)
    bits = np.unpackbits(raw)[: n * width].reshape(n, width)
    padded = np.zeros((n, 64), dtype=np.uint8)
    padded[:, 64 - width :] = bits
    return np.packbits(padded, axis=1).view(">u8").ravel().astype(np.uint64)


def _signed_int(raw: bytes) -> int:
    """A big-endian integer whose top bit is a sign (PATCHED_BASE's base value)."""
    v = int.from_bytes(raw, "big")
    top = 1 << (len(raw) * 8 - 1)
    return -(v & ~top) if v & top else v


def _run_v2(src: ByteSource, signed: bool) -> np.ndarray:
    """One RLE v2 run as int64 (uint64 values reinterpreted for unsigned streams)."""
    first = src.byte()
    kind = first >> 6
    if kind == 0:  # SHORT_REPEAT
        width = ((first >> 3) & 7) + 1
        count = (first & 7) + 3
        v = int.from_bytes(src.take(width), "big")
        if signed:
            v = _zigzag_int(v)
        return np.full(count, v if v < 1 << 63 else v - (1 << 64), dtype=np.int64)
    second = src.byte()
    code = (first >> 1) & 0x1F
    count = (((first & 1) << 8) | second) + 1
    if kind == 1:  # DIRECT
        width = _WIDTHS[code]
        u = unpack_bits(src.take((count * width + 7) // 8), count, width)
        return _zigzag(u) if signed else u.view(np.int64)
    if kind == 3:  # DELTA
        width = _WIDTHS[code] if code else 0
        base = src.varint()
        if signed:
            base = _zigzag_int(base)
        delta = _zigzag_int(src.varint())
        if width == 0 or count <= 2:
            # A fixed delta (or a run too short for packed deltas): an arithmetic series.
            return (base + delta * np.arange(count, dtype=np.int64)).astype(np.int64)
        d = unpack_bits(src.take(((count - 2) * width + 7) // 8), count - 2, width).view(np.int64)
        steps = np.empty(count, dtype=np.int64)
        steps[0] = base
        steps[1] = delta
        steps[2:] = -d if delta < 0 else d
        return np.cumsum(steps, dtype=np.int64)
    # PATCHED_BASE
    width = _WIDTHS[code]
    third, fourth = src.byte(), src.byte()
    base_bytes = ((third >> 5) & 7) + 1
    patch_width = _WIDTHS[third & 0x1F]
    gap_width = ((fourth >> 5) & 7) + 1
    patches = fourth & 0x1F
    base = _signed_int(src.take(base_bytes))
    data = unpack_bits(src.take((count * width + 7) // 8), count, width)
    if patches:
        pw = _CLOSEST[patch_width + gap_width]
        if pw > 64:
            raise AcidFormatError("ORC patched-base run with a patch wider than 64 bits")
        entries = unpack_bits(src.take((patches * pw + 7) // 8), patches, pw)
        at = 0
        high = data.astype(object) if width + patch_width > 64 else None
        for e in entries.tolist():
            at += e >> patch_width
            patch = e & ((1 << patch_width) - 1)
            if patch == 0:
                continue  # a filler entry (gap longer than the gap width allows)
            if at >= count:
                raise AcidFormatError("ORC patched-base patch past the run")
            if high is not None:
                high[at] |= patch << width
            else:
                data[at] |= np.uint64(patch << width)
        if high is not None:
            data = np.array([int(v) & _MASK64 for v in high], dtype=np.uint64)
    return (data.view(np.int64) + np.int64(base)).astype(np.int64)


def _run_v1(src: ByteSource, signed: bool) -> np.ndarray:
    control = src.byte()
    if control < 128:
        count = control + 3
        delta = src.byte()
        delta = delta - 256 if delta >= 128 else delta
        base = src.varint()
        if signed:
            base = _zigzag_int(base)
        return base + delta * np.arange(count, dtype=np.int64)
    u = src.varints(256 - control)
    return _zigzag(u) if signed else u.view(np.int64)


def _trim(parts: list[np.ndarray], count: int) -> np.ndarray:
    if not parts:
        return np.zeros(0, dtype=np.int64)
    allv = np.concatenate(parts) if len(parts) > 1 else parts[0]
    if len(allv) < count:
        raise AcidFormatError("ORC stream ends before the row group's values")
    return allv[:count]


def _decode_runs(
    run: Callable[[ByteSource, bool], np.ndarray],
    src: ByteSource,
    *,
    signed: bool,
    count: int,
    skip: int,
) -> np.ndarray:
    """``count`` values after skipping ``skip`` values, run by run."""
    out: list[np.ndarray] = []
    to_skip = skip
    have = 0
    while have < count:
        vals = run(src, signed)
        if to_skip:
            dropped = min(to_skip, len(vals))
            vals = vals[dropped:]
            to_skip -= dropped
        out.append(vals)
        have += len(vals)
    return _trim(out, count)


def decode_int_rle_v2(src: ByteSource, *, signed: bool, count: int, skip: int = 0) -> np.ndarray:
    """``count`` int64 values of an RLE v2 integer stream (``signed``: zigzag-encoded).

    SHORT_REPEAT and DELTA runs (constants, counters, sorted keys: most runs of ACID
    columns) are parsed inline into one preallocated array; DIRECT and PATCHED_BASE runs
    go through :func:`_run_v2`."""
    total = skip + count
    buf = src.buf
    pos = src.pos
    end = len(buf)
    out = np.empty(total + 512, dtype=np.int64)
    have = 0
    try:
        while have < total:
            if end - pos < 32:
                # An inline run takes at most 22 bytes: decompress only the chunks the
                # row groups' runs are in (the stream's end may come first).
                src.pos = pos
                src.need(4096)
                end = len(buf)
            first = buf[pos]
            kind = first >> 6
            if kind == 0:  # SHORT_REPEAT
                w = ((first >> 3) & 7) + 1
                c = (first & 7) + 3
                if pos + 1 + w > end:
                    raise IndexError
                v = int.from_bytes(buf[pos + 1 : pos + 1 + w], "big")
                pos += 1 + w
                if signed:
                    v = (v >> 1) ^ -(v & 1)
                elif v >= 1 << 63:
                    v -= 1 << 64
                out[have : have + c] = v
                have += c
                continue
            if kind == 3 and not (first >> 1) & 0x1F:  # DELTA with a fixed delta
                c = (((first & 1) << 8) | buf[pos + 1]) + 1
                pos += 2
                base = shift = 0
                while True:
                    b = buf[pos]
                    pos += 1
                    base |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
                delta = shift = 0
                while True:
                    b = buf[pos]
                    pos += 1
                    delta |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
                if signed:
                    base = (base >> 1) ^ -(base & 1)
                delta = (delta >> 1) ^ -(delta & 1)
                if delta == 0:
                    out[have : have + c] = base
                else:
                    out[have : have + c] = np.arange(c, dtype=np.int64) * delta + base
                have += c
                continue
            src.pos = pos
            vals = _run_v2(src, signed)
            pos = src.pos
            buf = src.buf
            end = len(buf)
            if have + len(vals) > len(out):
                out = np.concatenate((out, np.empty(len(vals) + 512, dtype=np.int64)))
            out[have : have + len(vals)] = vals
            have += len(vals)
    except IndexError:
        raise AcidFormatError("ORC stream ends before the row group's values") from None
    src.pos = pos
    return out[skip:total]


def decode_int_rle_v1(src: ByteSource, *, signed: bool, count: int, skip: int = 0) -> np.ndarray:
    """``count`` int64 values of an RLE v1 integer stream (``signed``: zigzag-encoded)."""
    return _decode_runs(_run_v1, src, signed=signed, count=count, skip=skip)


def _run_bytes(src: ByteSource, signed: bool) -> np.ndarray:
    control = src.byte()
    if control < 128:
        return np.full(control + 3, src.byte(), dtype=np.uint8)
    n = 256 - control
    return np.frombuffer(src.take(n), dtype=np.uint8).copy()


def decode_byte_rle(src: ByteSource, *, count: int, skip: int = 0) -> np.ndarray:
    """``count`` uint8 values of a byte-RLE stream."""
    out: list[np.ndarray] = []
    to_skip = skip
    have = 0
    while have < count:
        vals = _run_bytes(src, False)
        if to_skip:
            dropped = min(to_skip, len(vals))
            vals = vals[dropped:]
            to_skip -= dropped
        out.append(vals)
        have += len(vals)
    if not out:
        return np.zeros(0, dtype=np.uint8)
    allv = np.concatenate(out)
    if len(allv) < count:
        raise AcidFormatError("ORC byte stream ends before the row group's values")
    return allv[:count]


def decode_booleans(
    src: ByteSource, *, count: int, skip_bytes: int = 0, skip_bits: int = 0
) -> np.ndarray:
    """``count`` booleans of a boolean stream (byte RLE of MSB-first bit sets), starting
    ``skip_bytes`` bytes into the run at :attr:`ByteSource.pos` and ``skip_bits`` into
    that byte (a row index's two RLE positions)."""
    nbytes = (skip_bits + count + 7) // 8
    raw = decode_byte_rle(src, count=nbytes, skip=skip_bytes)
    return np.unpackbits(raw)[skip_bits : skip_bits + count].astype(bool)
