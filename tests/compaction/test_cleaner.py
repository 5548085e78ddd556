"""The cleaner: obsolete files go only when no reader can still need them; aborted data and
aborted txns go, so snapshots shrink; NO_CLEANUP is honoured."""

from __future__ import annotations

from pathlib import Path

from acidstream.acid.reader import read_path
from acidstream.compaction import Cleaner, Worker
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.store import TxnStore
from tests.compaction.conftest import MakeTbl, b0, rows, sort_rows
from tests.plugins.store_fixture import FakeClock


def _dirs(path: str) -> set[str]:
    return {p.name for p in Path(path).iterdir() if p.is_dir()}


def test_slow_reader_keeps_its_files_until_its_txn_ends(store: TxnStore, make_tbl: MakeTbl) -> None:
    t = make_tbl()
    w1 = t.insert(rows(0, 100))
    t.insert(rows(100, 200))
    t.delete([(w1, b0(), 5)])
    # The slow reader: opens its txn and takes its snapshot before the compaction.
    reader_txn = store.open_txns(1, user="reader", host="h")[0]
    txns = store.get_valid_txns(reader_txn)
    wids = store.get_valid_write_ids("default", "t", txns)
    expected = sort_rows(read_path(t.dir(), write_ids=wids, txns=txns, include_row_id=True))
    old_dirs = _dirs(t.dir())

    q = CompactionQueue(store)
    q.request("default", "t", major=True)
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.state == "r"
    cleaner = Cleaner(store, queue=q)
    assert cleaner.run_once() == []  # the reader's txn predates the compaction's commit
    assert old_dirs <= _dirs(t.dir())
    rec = q.get(out.id)
    assert rec is not None and rec.state == "r"

    # The reader reads now, after the cleaner ran: same rows, from the old files (the new
    # base is invisible to it: its visibility txn was open in the reader's snapshot).
    got = sort_rows(read_path(t.dir(), write_ids=wids, txns=txns, include_row_id=True))
    assert got.equals(expected)

    store.commit_txn(reader_txn)
    done = cleaner.run_once()
    assert [c.id for c in done] == [out.id]
    assert _dirs(t.dir()) == {Path(out.output_dirs[0]).name}
    assert t.read().equals(expected)
    rec = q.get(out.id)
    assert rec is not None and rec.state == "s"


def test_reader_that_began_after_the_commit_does_not_hold_the_cleaner(
    store: TxnStore, make_tbl: MakeTbl
) -> None:
    t = make_tbl()
    t.insert(rows(0, 10))
    t.insert(rows(10, 20))
    q = CompactionQueue(store)
    q.request("default", "t", major=True)
    out = Worker(store, queue=q).run_once()
    assert out is not None
    later = store.open_txns(1, user="reader", host="h")[0]  # sees the new base
    assert [c.id for c in Cleaner(store, queue=q).run_once()] == [out.id]
    txns = store.get_valid_txns(later)
    wids = store.get_valid_write_ids("default", "t", txns)
    assert read_path(t.dir(), write_ids=wids, txns=txns).num_rows == 20


def test_no_cleanup_table_is_refused_and_left_alone(store: TxnStore, make_tbl: MakeTbl) -> None:
    t = make_tbl(params={"NO_CLEANUP": "true"})
    t.insert(rows(0, 10))
    t.insert(rows(10, 20))
    q = CompactionQueue(store)
    q.request("default", "t", major=False)
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.state == "r"
    before = _dirs(t.dir())
    Cleaner(store, queue=q).run_once()
    assert _dirs(t.dir()) == before
    rec = q.get(out.id)
    assert rec is not None and rec.state == "c" and "no_cleanup" in (rec.error_message or "")


def test_aborted_dirs_and_txns_are_cleaned_so_snapshots_shrink(
    store: TxnStore, make_tbl: MakeTbl, clock: FakeClock
) -> None:
    t = make_tbl()
    t.insert(rows(0, 10))
    aborted = [t.insert(rows(100 + i, 101 + i), outcome="abort") for i in range(5)]
    t.insert(rows(10, 20))
    before = t.read()
    wl = store.get_valid_write_ids("default", "t", store.get_valid_txns())
    assert set(aborted) <= set(wl.aborted_write_ids)
    cleaner = Cleaner(store, clock=clock)
    cleaner.run_once()
    # The aborted deltas are gone at once (no snapshot can see them)...
    assert not [d for d in _dirs(t.dir()) if any(f"_{w:07d}_{w:07d}" in d for w in aborted)]
    # ...but the txns are forgotten only after the txn timeout.
    assert store.get_valid_txns().aborted_txns
    clock.advance(301)
    cleaner.run_once()
    txns = store.get_valid_txns()
    assert txns.aborted_txns == ()
    wl = store.get_valid_write_ids("default", "t", txns)
    assert wl.aborted_write_ids == ()
    assert str(wl) == f"default.t:{wl.high_watermark}:9223372036854775807::"
    assert t.read().equals(before)


def test_aborted_txn_inside_a_streaming_delta_stays_until_compacted(
    store: TxnStore, make_tbl: MakeTbl, clock: FakeClock
) -> None:
    t = make_tbl()
    t.streaming_batch(["commit", "abort", "commit"], 10, start=0)
    t.insert(rows(100, 110))
    before = t.read()
    cleaner = Cleaner(store, clock=clock)
    clock.advance(301)
    cleaner.run_once()
    # Write id 2's rows are still in delta_1_3: the txn must stay aborted.
    wl = store.get_valid_write_ids("default", "t", store.get_valid_txns())
    assert wl.aborted_write_ids == (2,)
    assert t.read().equals(before)
    q = CompactionQueue(store)
    q.request("default", "t", major=False)
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.state == "r"
    cleaner.run_once()
    wl = store.get_valid_write_ids("default", "t", store.get_valid_txns())
    assert wl.aborted_write_ids == ()
    assert t.read().equals(before)
    assert _dirs(t.dir()) == {Path(d).name for d in out.output_dirs}
