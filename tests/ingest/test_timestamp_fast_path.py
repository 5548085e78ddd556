"""The bulk timestamp converter's one-kernel path (Arrow's cast, taken when every value of
a column has a shape Hive reads) gives exactly what the field-by-field path gives: the
same values, the same suspect rows, for whole columns of good values and for columns
holding one impossible date, time or year among them."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.acid.schema import parse_hive_type
from acidstream.ingest.record_bulk import _TS_GATE, _gate, _timestamps_by_field, convert_text

TS = parse_hive_type("timestamp")


def _by_field(values: list[str | None]) -> tuple[list[object], list[bool]]:
    arr = pa.array(values, pa.string())
    nonempty = pc.not_equal(arr, "")  # as convert_text makes it
    suspect = np.zeros(len(arr), dtype=bool)
    if values:
        suspect |= np.asarray(
            pc.fill_null(pc.equal(arr, ""), False).to_numpy(zero_copy_only=False), dtype=bool
        )
    out, sus = _timestamps_by_field(arr, _gate(arr, _TS_GATE), nonempty, suspect)
    return out.to_pylist(), sus.tolist()


def _bulk(values: list[str | None]) -> tuple[list[object], list[bool]]:
    out, sus = convert_text(pa.array(values, pa.string()), TS, empty_is_null=False)
    return out.to_pylist(), sus.tolist()


GOOD = [
    "2026-11-27 12:34:56",
    "2026-11-27T12:34:56",
    "2024-02-29 23:59:59.999999",
    "1969-12-31 23:59:59.5",
    "0001-01-01 00:00:00",
    "9999-12-31 23:59:59.999999",
    "2026-11-27",
    "1900-03-01 00:00:00.000001",
]
# Shapes Hive reads, values it does not: each sends its column down the other path.
ODD = [
    "2023-02-29 00:00:00",  # no 29th in February 2023
    "2026-04-31 10:00:00",
    "2026-11-27 24:00:00",
    "2026-11-27 12:60:00",
    "2026-11-27 12:00:60",  # Arrow's parser and Hive both refuse a leap second
    "0000-01-01 00:00:00",  # Arrow reads year 0; Hive's range starts at year 1
    "2026-13-01 00:00:00",
]


def test_good_columns_match_the_field_path() -> None:
    values: list[str | None] = [*GOOD, None, *GOOD]
    assert _bulk(values) == _by_field(values)
    got, sus = _bulk(values)
    assert not any(sus)
    assert got[0] == dt.datetime(2026, 11, 27, 12, 34, 56)
    assert got[4] == dt.datetime(1, 1, 1)


@pytest.mark.parametrize("odd", ODD)
def test_one_odd_value_gives_the_field_paths_answer(odd: str) -> None:
    values: list[str | None] = [*GOOD, odd, None]
    got, sus = _bulk(values)
    assert (got, sus) == _by_field(values)
    assert sus[len(GOOD)] and got[len(GOOD)] is None  # the odd one is suspect
    assert not any(sus[: len(GOOD)])


_fields = st.tuples(
    st.integers(0, 10_000),  # year (0 and 10000 out of range or shape)
    st.integers(0, 13),
    st.integers(0, 32),
    st.integers(0, 25),
    st.integers(0, 61),
    st.integers(0, 61),
    st.one_of(st.none(), st.text("0123456789", min_size=1, max_size=8)),
    st.sampled_from([" ", "T", "", "  "]),
)


@st.composite
def _timestamp_text(draw: st.DrawFn) -> str | None:
    if draw(st.integers(0, 30)) == 0:
        return draw(st.sampled_from([None, "", " 2026-01-01", "x", "2026-1-1 1:2:3"]))
    y, mo, d, h, mi, s, frac, sep = draw(_fields)
    date = f"{y:04d}-{mo:02d}-{d:02d}"
    if sep == "":
        return date
    text = f"{date}{sep}{h:02d}:{mi:02d}:{s:02d}"
    return text if frac is None else f"{text}.{frac}"


@settings(max_examples=300, deadline=None)
@given(st.lists(_timestamp_text(), max_size=12))
def test_any_column_matches_the_field_path(values: list[str | None]) -> None:
    assert _bulk(values) == _by_field(values)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)), min_size=1, max_size=12), st.booleans())  # fmt: skip
def test_valid_columns_match_the_field_path(stamps: list[dt.datetime], t_sep: bool) -> None:
    values: list[str | None] = [s.isoformat(sep="T" if t_sep else " ") for s in stamps]
    got, sus = _bulk(values)
    assert (got, sus) == _by_field(values)
    assert got == stamps and not any(sus)


def test_a_good_column_takes_one_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    import acidstream.ingest.record_bulk as rb

    def refuse(*args: object) -> None:
        raise AssertionError("the field-by-field path ran for a column of good values")

    monkeypatch.setattr(rb, "_timestamps_by_field", refuse)
    got, sus = _bulk([*GOOD, None])
    assert got[:2] == [dt.datetime(2026, 11, 27, 12, 34, 56)] * 2 and not any(sus)
    with pytest.raises(AssertionError, match="field-by-field"):
        _bulk([*GOOD, ODD[0]])  # an impossible date: the other path decides
