"""Read snapshots built by the store: exact Hive string forms (spec §1.7, §6.4)."""

from __future__ import annotations

from acidstream.acid.snapshot import LONG_MAX, ValidTxnList
from acidstream.txn import TxnStore


def test_valid_txn_list_with_open_and_aborted(store: TxnStore) -> None:
    a, b, c, d = store.open_txns(4, user="u", host="h")
    store.commit_txn(a)
    store.abort_txn(b)
    vt = store.get_valid_txns()
    assert vt.to_string() == f"{d}:{c}:{c},{d}:{b}"
    assert vt.is_txn_valid(a) and not vt.is_txn_valid(b) and vt.is_txn_aborted(b)


def test_valid_txn_list_for_a_current_txn_excludes_it(store: TxnStore) -> None:
    a, b, c, d = store.open_txns(4, user="u", host="h")
    store.abort_txn(a)
    vt = store.get_valid_txns(current_txn=c)
    # hwm capped at the current txn; only exceptions below it; minOpen = first open one
    assert vt.to_string() == f"{c}:{b}:{b}:{a}"
    assert not vt.is_txn_valid(d)


def test_valid_txn_list_when_nothing_is_open(store: TxnStore) -> None:
    (a,) = store.open_txns(1, user="u", host="h")
    store.commit_txn(a)
    assert store.get_valid_txns().to_string() == f"{a}:{LONG_MAX}::"


def test_empty_table_write_id_list(store: TxnStore) -> None:
    wl = store.get_valid_write_ids("default", "t", store.get_valid_txns())
    assert wl.to_string() == f"default.t:0:{LONG_MAX}::"


def test_write_id_list_with_open_and_aborted(store: TxnStore) -> None:
    ids = store.open_txns(5, user="u", host="h")
    store.allocate_write_ids(ids, "default", "t")
    store.commit_txn(ids[0])
    store.abort_txn(ids[1])
    store.commit_txn(ids[2])
    store.commit_txn(ids[4])
    wl = store.get_valid_write_ids("default", "t", store.get_valid_txns())
    assert wl.to_string() == "default.t:5:4:4:2"
    assert wl.is_write_id_valid(5) and not wl.is_write_id_valid(4)


def test_write_id_list_seen_from_an_older_snapshot(store: TxnStore) -> None:
    a, b = store.open_txns(2, user="u", host="h")
    store.allocate_write_ids([a, b], "default", "t")
    store.commit_txn(a)
    snap = store.get_valid_txns()
    store.commit_txn(b)  # committed after the snapshot: still invalid in it
    (c,) = store.open_txns(1, user="u", host="h")
    store.allocate_write_ids([c], "default", "t")
    store.commit_txn(c)  # txn above the snapshot hwm
    wl = store.get_valid_write_ids("default", "t", snap)
    assert wl.to_string() == "default.t:2:2:2:"


def test_write_ids_allocated_out_of_txn_order_across_batches(store: TxnStore) -> None:
    a, b = store.open_txns(2, user="u", host="h")
    store.allocate_write_ids([b], "default", "t")  # b gets write id 1
    store.allocate_write_ids([a], "default", "t")  # a gets write id 2
    store.commit_txn(b)
    wl = store.get_valid_write_ids("default", "t", store.get_valid_txns())
    assert wl.to_string() == "default.t:2:2:2:"


def test_step3_no_valid_write_keeps_only_lowest_invalid(store: TxnStore) -> None:
    a, b = store.open_txns(2, user="u", host="h")
    store.allocate_write_ids([a, b], "default", "t")
    wl = store.get_valid_write_ids("default", "t", store.get_valid_txns())
    assert wl.to_string() == "default.t:1:1:1:"  # lowest invalid is the min open: stays open
    store.abort_txn(a)
    wl = store.get_valid_write_ids("default", "t", store.get_valid_txns())
    assert wl.to_string() == "default.t:1:2::1"  # lowest invalid is aborted


def test_current_txn_sees_its_own_write_id(store: TxnStore) -> None:
    a, b = store.open_txns(2, user="u", host="h")
    store.allocate_write_ids([a, b], "default", "t")
    store.commit_txn(a)
    vt = store.get_valid_txns(current_txn=b)
    wl = store.get_valid_write_ids("default", "t", vt)
    assert wl.to_string() == f"default.t:2:{LONG_MAX}::"
    assert wl.is_write_id_valid(2)


def test_compactor_list_stops_below_the_lowest_open(store: TxnStore) -> None:
    ids = store.open_txns(4, user="u", host="h")
    store.allocate_write_ids(ids, "default", "t")
    store.commit_txn(ids[0])
    store.abort_txn(ids[1])
    store.commit_txn(ids[3])
    cl = store.get_valid_compactor_write_ids("default", "t", store.get_valid_txns())
    assert cl.is_compactor()
    assert cl.to_string() == "default.t:2:9223372036854775807::2"
    assert cl.is_write_id_aborted(2)


def test_strings_round_trip(store: TxnStore) -> None:
    ids = store.open_txns(3, user="u", host="h")
    store.allocate_write_ids(ids, "default", "t")
    store.commit_txn(ids[0])
    store.abort_txn(ids[1])
    vt = store.get_valid_txns()
    assert ValidTxnList.from_string(vt.to_string()) == vt
