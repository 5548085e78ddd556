"""ValidTxnList / ValidWriteIdList: Hive's string forms and range semantics."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from acidstream.acid.snapshot import (
    LONG_MAX,
    RangeResponse,
    ValidCompactorWriteIdList,
    ValidTxnList,
    ValidTxnWriteIdList,
    ValidWriteIdList,
)


def test_write_id_list_string_forms() -> None:
    assert ValidWriteIdList("default.t", 10).to_string() == "default.t:10:9223372036854775807::"
    w = ValidWriteIdList.from_string("default.t:10:5:5:7")
    assert (w.open_write_ids, w.aborted_write_ids, w.min_open_write_id) == ((5,), (7,), 5)
    assert w.to_string() == "default.t:10:5:5:7"
    # minOpenWriteId is ignored when there are no exceptions, as Hive's constructor does.
    assert ValidWriteIdList("t", 3, min_open_write_id=2).to_string() == "t:3:9223372036854775807::"
    assert ValidWriteIdList(None, 3).to_string() == "null:3:9223372036854775807::"
    assert ValidWriteIdList.from_string("null:3:9223372036854775807::").table_name is None


def test_empty_string_means_everything_valid() -> None:
    for w in (ValidWriteIdList.from_string(""), ValidWriteIdList.from_string(None)):
        assert w.high_watermark == LONG_MAX and w.is_write_id_valid(10**15)
    assert ValidTxnList.from_string("").is_txn_valid(42)


def test_txn_list_string_form() -> None:
    t = ValidTxnList.from_string("20:4:4,9:6")
    assert t.to_string() == "20:4:4,9:6"
    assert not t.is_txn_valid(4) and not t.is_txn_valid(6) and t.is_txn_valid(5)
    assert t.is_txn_aborted(6) and not t.is_txn_aborted(4)
    assert not t.is_txn_valid(21)
    assert ValidTxnList(5).to_string() == "5:9223372036854775807::"


def test_semantics() -> None:
    w = ValidWriteIdList.from_string("db.t:10:5:5:7")
    assert w.is_write_id_valid(4) and not w.is_write_id_valid(5) and not w.is_write_id_valid(11)
    assert w.is_valid_base(4) and not w.is_valid_base(5)
    assert w.is_write_id_range_valid(1, 4) is RangeResponse.ALL
    assert w.is_write_id_range_valid(5, 5) is RangeResponse.NONE
    assert w.is_write_id_range_valid(4, 6) is RangeResponse.SOME
    assert w.is_write_id_range_valid(11, 12) is RangeResponse.NONE
    assert w.is_write_id_range_aborted(7, 7) is RangeResponse.ALL
    assert w.is_write_id_range_aborted(5, 7) is RangeResponse.SOME
    assert w.is_write_id_range_aborted(5, 5) is RangeResponse.NONE


def test_compactor_list() -> None:
    c = ValidCompactorWriteIdList.from_table_state(
        "db.t", 20, open_write_ids=[12, 15], aborted_write_ids=[3, 13]
    )
    assert c.high_watermark == 11  # lowest open - 1
    assert c.aborted_write_ids == (3,)  # exceptions above the hwm are dropped
    assert c.is_write_id_range_valid(1, 11) is RangeResponse.ALL
    assert (
        c.is_write_id_range_valid(11, 20) is RangeResponse.NONE
    )  # a half-resolved streaming delta
    assert c.is_write_id_aborted(3)
    assert c.to_string() == "db.t:11:9223372036854775807::3"


def test_txn_write_id_list() -> None:
    s = "7$db.a:5:9223372036854775807::$db.b:3:2:2:"
    v = ValidTxnWriteIdList.from_string(s)
    assert v.to_string() == s
    b = v.table("db.b")
    assert b is not None and not b.is_write_id_valid(2)


ids = st.integers(1, 60)


@given(st.integers(0, 60), st.sets(ids), st.sets(ids), st.integers(1, 60), st.integers(0, 10))
def test_range_answers_match_a_brute_force_model(
    hwm: int, opens: set[int], aborted: set[int], lo: int, span: int
) -> None:
    opens = {o for o in opens if o <= hwm}
    aborted = {a for a in aborted if a <= hwm} - opens
    w = ValidWriteIdList("t", hwm, tuple(opens), tuple(aborted), min(opens) if opens else LONG_MAX)
    w2 = ValidWriteIdList.from_string(w.to_string())
    assert w2 == w
    hi = lo + span
    valid = [x for x in range(lo, hi + 1) if w.is_write_id_valid(x)]
    assert all(
        (x <= hwm and x not in opens | aborted) == w.is_write_id_valid(x) for x in range(lo, hi + 1)
    )
    expect = (
        RangeResponse.NONE
        if lo > hwm
        else (
            RangeResponse.ALL
            if len(valid) == hi - lo + 1
            else RangeResponse.NONE
            if not valid
            else RangeResponse.SOME
        )
    )
    assert w.is_write_id_range_valid(lo, hi) is expect
    ab = [x for x in range(lo, hi + 1) if x in aborted]
    expect_ab = (
        RangeResponse.NONE
        if lo > hwm or not ab
        else (RangeResponse.ALL if len(ab) == hi - lo + 1 else RangeResponse.SOME)
    )
    assert w.is_write_id_range_aborted(lo, hi) is expect_ab


def test_capped_write_ids_are_the_list_as_of_an_older_write_id() -> None:
    w = ValidWriteIdList.from_string("db.t:10:3:3,8:5,9")
    c = w.capped(6)
    assert c.to_string() == "db.t:6:3:3:5"
    assert [c.is_write_id_valid(x) for x in range(1, 9)] == [
        True, True, False, True, False, True, False, False
    ]  # fmt: skip
    assert w.capped(None) is w and w.capped(10) is w and w.capped(12) is w
    assert w.capped(2).to_string() == "db.t:2:9223372036854775807::"
