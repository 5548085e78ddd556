"""Directory and file names: Hive's exact forms, and parsing that accepts wider numbers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acidstream.acid import layout
from acidstream.acid.layout import ParsedBase, ParsedDelta

ids = st.integers(min_value=0, max_value=10**12)
stmts = st.integers(min_value=-1, max_value=9999)


def test_names_match_hive_examples() -> None:
    assert layout.base_dir_name(10) == "base_0000010"
    assert layout.base_dir_name(10, visibility_txn_id=123) == "base_0000010_v0000123"
    assert layout.base_dir_name(10, visibility_txn_id=0) == "base_0000010"  # _v0 is never written
    assert layout.delta_dir_name(5, 5, statement_id=0) == "delta_0000005_0000005_0000"
    assert layout.delta_dir_name(1, 2) == "delta_0000001_0000002"
    assert (
        layout.delta_dir_name(3, 9, delete=True, visibility_txn_id=44)
        == "delete_delta_0000003_0000009_v0000044"
    )
    assert (
        layout.delta_dir_name(1, 1, statement_id=2, visibility_txn_id=7)
        == "delta_0000001_0000001_0002_v0000007"
    )
    assert layout.bucket_file_name(3) == "bucket_00003"
    assert layout.bucket_file_name(3, attempt_id=1) == "bucket_00003_1"
    assert layout.side_file_name("d/bucket_00000") == "d/bucket_00000_flush_length"


@given(ids, ids, stmts, ids, st.booleans())
def test_delta_names_round_trip(lo: int, span: int, stmt: int, vis: int, delete: bool) -> None:
    hi = lo + span
    name = layout.delta_dir_name(lo, hi, statement_id=stmt, visibility_txn_id=vis, delete=delete)
    assert layout.parse_dir_name(name) == ParsedDelta(lo, hi, stmt, vis, delete)


@given(ids, ids)
def test_base_names_round_trip(w: int, vis: int) -> None:
    assert layout.parse_dir_name(layout.base_dir_name(w, visibility_txn_id=vis)) == ParsedBase(
        w, vis
    )


@given(st.integers(0, 10**7), st.one_of(st.none(), st.integers(0, 10**6)))
def test_bucket_names_round_trip(b: int, attempt: int | None) -> None:
    assert layout.parse_bucket_file(layout.bucket_file_name(b, attempt_id=attempt)) == (b, attempt)


def test_wider_numbers_than_the_minimum_width_parse() -> None:
    assert layout.parse_dir_name("delta_10000001_10000001_0000") == ParsedDelta(
        10000001, 10000001, 0
    )
    assert layout.parse_dir_name("delta_1_2") == ParsedDelta(1, 2)
    assert layout.parse_dir_name("base_123456789012_v1") == ParsedBase(123456789012, 1)
    assert layout.parse_bucket_file("bucket_123456") == (123456, None)


@pytest.mark.parametrize(
    "name",
    ["delta_0000002_0000001", "delta_x_1", "base_", "delta_1", "deltas_1_1", "delete_delta_1_2_3_4",
     "base_1_v", "bucket_00000_flush_length", "000000_0", "_orc_acid_version"],
)  # fmt: skip
def test_non_acid_names_are_rejected(name: str) -> None:
    assert layout.parse_dir_name(name) is None


def test_original_file_names() -> None:
    assert layout.parse_original_file("000000_0") == layout.OriginalFileName(0, 0, 0)
    assert layout.parse_original_file("000002_0_copy_2") == layout.OriginalFileName(2, 0, 2)
    assert layout.parse_original_file("bucket_00000") is None
    assert layout.parse_bucket_file("bucket_00000_flush_length") is None


def test_delta_sort_order_is_hives() -> None:
    names = ["delta_0000005_0000005_0001", "delta_0000001_0000010", "delta_0000001_0000005",
             "delta_0000005_0000005_0000", "delta_0000005_0000005"]  # fmt: skip
    parsed = [layout.parse_dir_name(n) for n in names]
    deltas = [p for p in parsed if isinstance(p, ParsedDelta)]
    ordered = [d.name for d in sorted(deltas, key=ParsedDelta.sort_key)]
    assert ordered == ["delta_0000001_0000010", "delta_0000001_0000005", "delta_0000005_0000005",
                       "delta_0000005_0000005_0000", "delta_0000005_0000005_0001"]  # fmt: skip


def test_side_file_rule() -> None:
    assert ParsedDelta(1, 2).may_contain_side_file
    assert not ParsedDelta(1, 1).may_contain_side_file
    assert not ParsedDelta(1, 2, is_delete=True).may_contain_side_file
    assert not ParsedDelta(1, 2, visibility_txn_id=5).may_contain_side_file


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        layout.delta_dir_name(5, 4)
    with pytest.raises(ValueError):
        layout.delta_dir_name(1, 1, statement_id=10000)
    with pytest.raises(ValueError):
        layout.base_dir_name(-1)
