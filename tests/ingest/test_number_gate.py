"""The numpy number gates answer exactly as the RE2 patterns they replace.

Random and adversarial text (signs anywhere, several dots, exponents, non-ASCII and
invalid UTF-8 bytes, empty values, NULLs, sliced arrays, large offsets) goes through
both; every row must get the same answer.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.acid.schema import HiveType
from acidstream.ingest.number_gate import (
    FLOAT_PATTERN,
    INT_PATTERN,
    float_gate,
    int_gate,
    plain_float_cast,
    plain_int_cast,
)
from acidstream.ingest.record_convert import ConvError, primitive_text_conv

_pieces = st.sampled_from(
    ["0", "1", "9", "12", "123456789", "+", "-", ".", "e", "E", "x", " ", "é", "٣", "\x00"]
)
_values = st.one_of(
    st.none(),
    st.lists(_pieces, max_size=12).map("".join),
    st.from_regex(r"[+-]?[0-9]{0,20}(\.[0-9]{0,4})?([eE][+-]?[0-9]{0,4})?", fullmatch=True),
    st.binary(max_size=6),
)


def _reference(arr: pa.Array, pattern: str) -> np.ndarray:
    if pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type):
        # RE2 over bytes that are not UTF-8: decide per value, as the row path would.
        import re

        rx = re.compile(pattern.replace("$", r"\Z").encode())
        return np.array([v is not None and rx.match(v) is not None for v in arr.to_pylist()])
    return np.asarray(
        pc.fill_null(pc.match_substring_regex(arr, pattern), False).to_numpy(zero_copy_only=False),
        dtype=bool,
    )


def _array(values: list[str | bytes | None], large: bool) -> pa.Array:
    if any(isinstance(v, bytes) for v in values):
        raw = [v if isinstance(v, bytes) or v is None else v.encode() for v in values]
        return pa.array(raw, pa.large_binary() if large else pa.binary())
    return pa.array(values, pa.large_string() if large else pa.string())


@settings(max_examples=400, deadline=None)
@given(st.lists(_values, min_size=1, max_size=30), st.booleans(), st.integers(0, 3))
def test_number_gates_match_their_patterns(
    values: list[str | bytes | None], large: bool, cut: int
) -> None:
    arr = _array(values, large)
    if cut and len(arr) > 2 * cut:
        arr = arr.slice(cut, len(arr) - 2 * cut)  # offsets that do not start at 0
    ints, plus = int_gate(arr)
    assert ints.tolist() == _reference(arr, INT_PATTERN).tolist()
    starts_plus = [
        v is not None and v[:1] in ("+", b"+") and ok
        for v, ok in zip(arr.to_pylist(), ints, strict=True)
    ]
    assert plus == any(starts_plus)
    if not pa.types.is_binary(arr.type) and not pa.types.is_large_binary(arr.type):
        assert float_gate(arr).tolist() == _reference(arr, FLOAT_PATTERN).tolist()


def test_invalid_utf8_never_passes_a_gate() -> None:
    arr = pa.array([b"1\xff", b"\xff", b"12", b"-\xc3\xa9"], pa.binary()).view(pa.string())
    assert int_gate(arr)[0].tolist() == [False, False, True, False]
    assert float_gate(arr).tolist() == [False, False, True, False]


def _text_array(values: list[str | bytes | None], large: bool, cut: int) -> pa.Array | None:
    """A string array of ``values`` (None when some value is bytes), sliced by ``cut`` on
    both ends when long enough (offsets that do not start at 0)."""
    if any(isinstance(v, bytes) for v in values):
        return None
    arr = _array(values, large)
    if cut and len(arr) > 2 * cut:
        arr = arr.slice(cut, len(arr) - 2 * cut)
    return arr


_plain = st.lists(st.sampled_from(["0", "7", "42", "+", "-", "."]), max_size=8).map("".join)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.one_of(_plain, _values), min_size=1, max_size=30),
    st.booleans(),
    st.integers(0, 3),
)
def test_plain_float_cast_is_the_gate_and_cast(
    values: list[str | bytes | None], large: bool, cut: int
) -> None:
    """When the fast path answers, the gate passes every row and its cast is the same;
    it answers for every NULL-free block of plain decimal text the gate passes whole."""
    arr = _text_array(values, large, cut)
    if arr is None:
        return
    got = plain_float_cast(arr)
    gate = _reference(arr, FLOAT_PATTERN)
    plain_bytes = all(set(v) <= set("0123456789.+-") for v in arr.to_pylist() if v is not None)
    if got is None:
        assert arr.null_count or not plain_bytes or not gate.all()
        return
    assert arr.null_count == 0 and gate.all()
    assert got.equals(pc.cast(arr, pa.float64()))
    assert got.to_pylist() == [float(v) for v in arr.to_pylist()]


def test_plain_float_cast_leaves_odd_text_to_the_gate() -> None:
    for values in (["1.5", "+-5"], ["1.5", ""], ["1e5"], ["1.5", None], ["inf"], ["1..2"]):
        assert plain_float_cast(pa.array(values, pa.string())) is None
    got = plain_float_cast(pa.array(["-.5", "+2", "5.", "007.25"], pa.string()))
    assert got is not None and got.to_pylist() == [-0.5, 2.0, 5.0, 7.25]


_digits = st.one_of(
    st.lists(st.sampled_from(["0", "7", "9", "42", "-", "00"]), max_size=12).map("".join),
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(["127", "128", "-128", "-129", "32767", "32768", "2147483647",
                     "2147483648", "-2147483648", "-2147483649", "9223372036854775807",
                     "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
                     "0" * 25 + "5", "-0", "", "-", "5-", "--5", "+5", " 5", "0x10"]),
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.one_of(_digits, _values), min_size=1, max_size=30),
    st.sampled_from(["tinyint", "smallint", "int", "bigint"]),
    st.booleans(),
    st.integers(0, 3),
)
def test_plain_int_cast_is_the_row_rule(
    values: list[str | bytes | None], kind: str, large: bool, cut: int
) -> None:
    """When the fast path answers, the per-record rule takes every value to the same
    integer (19 digits and more, leading zeros, ``-0``); it answers for every NULL-free
    block of digits and ``-`` whose values the rule takes."""
    arr = _text_array(values, large, cut)
    if arr is None:
        return
    t = HiveType(kind)
    rule = primitive_text_conv(t)
    expected: list[int | None] = []
    for v in arr.to_pylist():
        try:
            value = None if v is None or v == "" else rule(v)
        except ConvError:
            value = None
        assert value is None or isinstance(value, int)
        expected.append(value)
    got = plain_int_cast(arr, t.to_arrow())
    plain = all(v is not None and set(v) <= set("0123456789-") for v in arr.to_pylist())
    if got is None:
        assert not plain or None in expected
        return
    assert plain and got.type == t.to_arrow()
    assert got.to_pylist() == expected


def test_plain_int_cast_leaves_odd_text_to_the_gate() -> None:
    for values in (["1", "+5"], ["1", ""], ["1", " 2"], ["0x10"], ["1", None], ["-"], ["1.0"]):
        assert plain_int_cast(pa.array(values, pa.string()), pa.int32()) is None
    assert plain_int_cast(pa.array(["2147483648"], pa.string()), pa.int32()) is None
    got = plain_int_cast(pa.array(["-0", "007", "-2147483648", "0" * 30 + "9"]), pa.int32())
    assert got is not None and got.to_pylist() == [0, 7, -2147483648, 9]
