"""The number gates of the bulk converters, checked on the text's bytes with numpy.

The bulk path converts a text column with an Arrow cast only where each value has a shape
whose cast equals the per-record rule (``acidstream.ingest.record_bulk``'s gates). For integer and
floating point columns the gate was one RE2 match per value, the costliest step of a
delimited block (about 1.6 ms of 5.8 ms per 10,000 lines, two columns). Here the same
question is answered with a few numpy passes over the column's data buffer, none per
value:

- :func:`int_gate` is exactly ``^[+-]?[0-9]{1,18}$``;
- :func:`float_gate` decides the plain decimal shapes (a sign, ASCII digits, at most one
  ``.``) itself and asks RE2 only about the rest (exponents, odd text), so its answer is
  exactly ``record_bulk``'s float pattern.

Runs wherever the record writer parses (the writer's thread or its parse-ahead thread).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "FLOAT_PATTERN",
    "INT_PATTERN",
    "float_gate",
    "int_gate",
    "plain_float_cast",
    "plain_int_cast",
]

INT_PATTERN = r"^[+-]?[0-9]{1,18}$"
FLOAT_PATTERN = r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?$"

_PLUS, _MINUS, _DOT = 43, 45, 46
_COMMA, _SLASH = 44, 47


def _text(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A string/binary array's value offsets (int64, relative to its first value) and the
    bytes of its values end to end (no copy of the bytes)."""
    large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    bufs = arr.buffers()
    width = 8 if large else 4
    offsets = np.frombuffer(
        bufs[1], np.int64 if large else np.int32, len(arr) + 1, arr.offset * width
    ).astype(np.int64)
    lo, hi = int(offsets[0]), int(offsets[-1])
    if bufs[2] is None or hi <= lo:
        return offsets - lo, np.zeros(0, np.uint8)
    return offsets - lo, np.frombuffer(bufs[2], np.uint8, hi - lo, lo)


class _Shape:
    """Per value of a string/binary array: validity, length, first byte, and how many of
    its bytes are not ASCII digits and how many are dots."""

    __slots__ = ("dots", "first", "lengths", "non_digits", "valid")

    def __init__(self, arr: pa.Array, *, dots: bool) -> None:
        n = len(arr)
        offsets, data = _text(arr)
        if not len(data):
            data = np.zeros(1, np.uint8)  # something for the first-byte look-up below
        starts, ends = offsets[:-1], offsets[1:]
        self.lengths = ends - starts
        self.valid = (
            np.ones(n, dtype=bool)
            if arr.null_count == 0
            else np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        )
        # (An empty value's "first byte" is whatever lies there; only signs of non-empty
        # values are looked at.)
        self.first = data[np.minimum(starts, len(data) - 1)]
        # Counts per value from running sums (empty values count none). uint8
        # arithmetic wraps: every byte outside '0'..'9' lands at 10 or above.
        self.non_digits = _counts((data - np.uint8(48)) >= 10, starts, ends)
        self.dots = _counts(data == _DOT, starts, ends) if dots else np.zeros(n, np.int64)


def _counts(mask: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    dtype = np.int32 if len(mask) < 1 << 31 else np.int64
    running = np.empty(len(mask) + 1, dtype)
    running[0] = 0
    # add.accumulate from and into one dtype runs without the GIL; np.cumsum of the bool
    # mask casts inside its loop and holds it (2.4x slower beside a writing thread).
    np.add.accumulate(mask.astype(dtype), out=running[1:])
    return (running[ends] - running[starts]).astype(np.int64)


def _signed(shape: _Shape) -> np.ndarray:
    """Values that start with a sign."""
    return (shape.lengths > 0) & ((shape.first == _PLUS) | (shape.first == _MINUS))


def int_gate(arr: pa.Array) -> tuple[np.ndarray, bool]:
    """Rows of a string array matching ``INT_PATTERN`` (a null row does not), and whether
    any matching row has a leading ``+`` (Arrow's integer cast wants it removed)."""
    shape = _Shape(arr, dots=False)
    signed = _signed(shape)
    digits = shape.lengths - signed
    # Every byte a digit but a leading sign, and 1..18 digits.
    ok = shape.valid & (shape.non_digits == signed) & (digits >= 1) & (digits <= 18)
    return ok, bool((ok & (shape.first == _PLUS)).any())


def plain_int_cast(arr: pa.Array, to: pa.DataType) -> pa.Array | None:
    """``arr`` (strings, no NULL) cast to the integer type ``to`` when all of its bytes
    are ASCII digits and ``-`` and Arrow's cast takes every value; None otherwise, for
    :func:`int_gate` to decide row by row.

    Over those bytes Arrow's cast accepts exactly an optional leading ``-`` and at least
    one digit (no ``+``, blank or ``0x`` can occur), that is ``INT_PATTERN`` without its
    18-digit cap, and refuses a value outside ``to``'s range: the per-record rule, which
    reads any number of digits (leading zeros too) and refuses what does not fit. One
    vector pass over the bytes instead of the gate's per-value counts.
    ``tests/ingest/test_number_gate.py`` checks the equivalence on random text.
    """
    if not len(arr) or arr.null_count:
        return None
    data = _text(arr)[1]
    if not bool((((data - np.uint8(48)) < 10) | (data == _MINUS)).all()):
        return None
    try:
        return pc.cast(arr, to)
    except pa.ArrowInvalid:  # "", "-", "5-", out of range...: the gate decides
        return None


def plain_float_cast(arr: pa.Array) -> pa.Array | None:
    """``arr`` (strings, no NULL) cast to double when all of its bytes are plain decimal
    text (ASCII digits, ``.``, ``+``, ``-``) and Arrow's cast takes every value; None
    otherwise, for :func:`float_gate` to decide row by row.

    Over those bytes Arrow's cast accepts exactly what ``FLOAT_PATTERN`` matches (at
    most one leading sign, at most one dot, at least one digit; no exponent can occur),
    so every row passes the gate and the cast is the whole rule: three vector compares
    over the bytes instead of the gate's per-value counts (about 1 ms per 10,000 values,
    holding the GIL).
    ``tests/ingest/test_number_gate.py`` checks the equivalence on random text.
    """
    if not len(arr) or arr.null_count:
        return None
    data = _text(arr)[1]
    # '+' (43) .. '9' (57) but ',' and '/': three vector compares, no per-byte lookup.
    if not (
        bool(((data - np.uint8(_PLUS)) <= 57 - _PLUS).all())
        and not (data == _COMMA).any()
        and not (data == _SLASH).any()
    ):
        return None
    try:
        return pc.cast(arr, pa.float64())
    except pa.ArrowInvalid:  # "", ".", "1.2.3", "5-"...: the gate decides
        return None


def float_gate(arr: pa.Array) -> np.ndarray:
    """Rows of a string array matching ``FLOAT_PATTERN`` (a null row does not)."""
    shape = _Shape(arr, dots=True)
    signed = _signed(shape)
    # A leading sign, digits and at most one '.', with at least one digit: always a match.
    plain = (
        shape.valid
        & (shape.non_digits == shape.dots + signed)
        & (shape.dots <= 1)
        & (shape.lengths - shape.non_digits >= 1)
    )
    rest = np.flatnonzero(shape.valid & ~plain)
    if len(rest):
        # Exponents and odd text: RE2 decides, on those rows only.
        matched = pc.match_substring_regex(arr.take(pa.array(rest)), FLOAT_PATTERN)
        plain[rest] = np.asarray(
            pc.fill_null(matched, False).to_numpy(zero_copy_only=False), dtype=bool
        )
    return plain
