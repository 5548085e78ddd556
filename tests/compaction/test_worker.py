"""The worker: every table shape compacts (major and minor) to exactly the rows of the snapshot
before compaction, in Hive's directory names and file contents."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as orc
import pytest

from acidstream.acid import faults, layout
from acidstream.acid.orc_inspect import inspect_orc
from acidstream.acid.storage import Storage
from acidstream.compaction import Cleaner, Worker
from acidstream.compaction.worker import CompactionOutcome
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.store import TxnState, TxnStore
from tests.compaction.conftest import MakeTbl, Tbl, b0, rows
from tests.plugins.store_fixture import FakeClock

Shape = Callable[[Tbl], str | None]  # builds the table; returns the partition to compact


def _plain(t: Tbl) -> None:
    w1 = t.insert(rows(0, 50))
    w2 = t.insert(rows(50, 100))
    t.insert(rows(100, 150), outcome="abort")
    t.delete([(w1, b0(), 3), (w1, b0(), 7), (w2, b0(), 0)])
    t.delete([(w2, b0(), 10)], outcome="abort")
    t.insert(rows(150, 160))


def shape_deltas_and_deletes(t: Tbl) -> str | None:
    _plain(t)
    return None


def shape_streaming_side_files(t: Tbl) -> str | None:
    # A batch of 4 txns in one file: commit, abort, commit, commit; then a batch whose
    # second txn is still open: only its first txn is below the compactor's hwm, but the
    # whole delta reaches above it, so it is left out (Hive's compactor rule).
    t.streaming_batch(["commit", "abort", "commit", "commit"], 20, start=0)
    t.delete([(1, b0(-1), 5), (3, b0(-1), 0)])
    t.streaming_batch(["commit", "open"], 10, start=1000)
    return None


def shape_open_txn_above(t: Tbl) -> str | None:
    t.insert(rows(0, 10))
    t.insert(rows(40, 50))
    t.insert(rows(10, 20), outcome="open")  # its delta stays out of every compaction
    t.insert(rows(20, 30))
    t.insert(rows(30, 40))
    return None


def shape_multi_statement(t: Tbl) -> str | None:
    from acidstream.txn.locks import DataOperationType

    w1 = t.insert(rows(0, 20))
    txn, w2 = t.begin(DataOperationType.UPDATE)
    t.insert(rows(20, 30), statement=0, txn_wid=(txn, w2))
    t.delete([(w1, b0(), 1), (w1, b0(), 2)], statement=1, txn_wid=(txn, w2))
    t.insert(rows(30, 35), statement=2, txn_wid=(txn, w2))
    t.end(txn, "commit")
    t.insert(rows(35, 40))
    return None


def shape_bucketed(t: Tbl) -> str | None:
    ws = [t.insert(rows(b * 100, b * 100 + 30), bucket=b) for b in (0, 1, 2)]
    ws.append(t.insert(rows(500, 510), bucket=1))
    t.delete([(ws[0], b0(0, 0), 4), (ws[1], b0(0, 1), 0), (ws[2], b0(0, 2), 29)])
    return None


def shape_partitioned(t: Tbl) -> str | None:
    w = t.insert(rows(0, 20), partition="ds=a")
    t.insert(rows(100, 120), partition="ds=b")
    t.insert(rows(20, 40), partition="ds=a")
    t.delete([(w, b0(), 0)], partition="ds=a")
    t.insert(rows(40, 45), partition="ds=a", outcome="abort")
    return "ds=a"


def shape_base_then_deltas(t: Tbl) -> str | None:
    _plain(t)
    _run(t.store, "default", "t", None, major=True)
    w = t.insert(rows(200, 230))
    t.delete([(1, b0(), 1), (w, b0(), 2)])
    t.insert(rows(230, 240))
    return None


def shape_original_files(t: Tbl) -> str | None:
    # A table converted to ACID: pre-ACID files at the root, with synthetic ROW__IDs.
    d = Path(t.dir())
    d.mkdir(parents=True, exist_ok=True)
    for name, lo in (("000000_0", 0), ("000000_0_copy_1", 10), ("000001_0", 20)):
        data = rows(lo, lo + 10)
        orc.write_table(
            pa.table(
                {
                    "id": pa.array([r[0] for r in data], pa.int64()),
                    "name": [r[1] for r in data],
                    "salary": pa.array([r[2] for r in data], pa.int32()),
                }
            ),
            str(d / name),
        )
    t.insert(rows(100, 110))
    t.delete([(0, b0(0, 0), 1), (0, b0(0, 0), 12), (0, b0(0, 1), 0)])
    return None


SHAPES: dict[str, Shape] = {
    "deltas_and_deletes": shape_deltas_and_deletes,
    "streaming_side_files": shape_streaming_side_files,
    "open_txn_above": shape_open_txn_above,
    "multi_statement": shape_multi_statement,
    "bucketed": shape_bucketed,
    "partitioned": shape_partitioned,
    "base_then_deltas": shape_base_then_deltas,
    "original_files": shape_original_files,
}


def _run(
    store: TxnStore, db: str, table: str, partition: str | None, *, major: bool
) -> CompactionOutcome:
    q = CompactionQueue(store)
    cq_id, accepted = q.request(db, table, partition, major=major)
    assert accepted
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.id == cq_id
    return out


def _rows_above(t: Tbl, hwm: int) -> int:
    """Visible rows the compaction could not take (deltas reaching above its hwm)."""
    rid = t.read().column("row__id").combine_chunks().field(0)
    return sum(1 for w in rid.to_pylist() if w > hwm)


def _events(path: str) -> pa.Table:
    return orc.ORCFile(path).read()


def _check_output_file(path: str, *, major: bool, delete: bool) -> None:
    """Hive's file contract: ACID metadata, one key-index entry per stripe, ROW__ID order."""
    st, p = Storage.for_path(path)
    _, info = inspect_orc(st, p)
    assert info.is_acid and info.acid_version == 2
    assert info.key_index is not None and len(info.key_index) == info.nstripes
    assert info.compression.upper().endswith("ZLIB")
    assert info.row_index_stride > 0  # column statistics for readers
    ev = _events(path)
    keys = list(
        zip(
            ev.column("originalTransaction").to_pylist(),
            ev.column("bucket").to_pylist(),
            ev.column("rowId").to_pylist(),
            strict=True,
        )
    )
    assert keys == sorted(keys)
    assert info.key_index[-1] == keys[-1]
    bucket = layout.parse_bucket_file(Path(path).name)
    assert bucket is not None
    assert {(b >> 16) & 0xFFF for _, b, _ in keys} == {bucket[0]}
    ops = set(ev.column("operation").to_pylist())
    assert ops == ({2} if delete else {0})
    if major:
        # MajorQueryCompactor: currentTransaction = ROW__ID.writeId.
        assert ev.column("currentTransaction").equals(ev.column("originalTransaction"))
    assert info.acid_stats == ((0, 0, len(keys)) if delete else (len(keys), 0, 0))


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_major_compaction_reads_back_the_snapshot(
    shape: str, store: TxnStore, make_tbl: MakeTbl
) -> None:
    t = make_tbl("t", partitioned=shape == "partitioned", buckets=3 if shape == "bucketed" else 0)
    part = SHAPES[shape](t)
    before = t.read()
    other = t.read(partition="ds=b") if part else None
    out = _run(store, "default", "t", part, major=True)
    assert out.state == "r", out.message
    assert out.txn_id is not None and out.highest_write_id is not None
    name = Path(out.output_dirs[0]).name
    assert name == layout.base_dir_name(out.highest_write_id, visibility_txn_id=out.txn_id)
    assert (Path(out.output_dirs[0]) / "_orc_acid_version").read_bytes() == b"2"
    assert store.txn_state(out.txn_id) is TxnState.COMMITTED
    for f in sorted(Path(out.output_dirs[0]).glob("bucket_*")):
        _check_output_file(str(f), major=True, delete=False)
    assert t.read().equals(before)
    assert out.inserts == (t.read(partition=part).num_rows if part else before.num_rows) - (
        _rows_above(t, out.highest_write_id) if part is None else 0
    )
    Cleaner(store).run_once()
    assert t.read().equals(before)
    if other is not None:
        assert t.read(partition="ds=b").equals(other)
    # Only the new base (and deltas the compaction could not take) are left.
    left = {p.name for p in Path(t.dir(part)).iterdir()}
    assert name in left
    assert not any(n.startswith("base_") and n != name for n in left)
    t.finish_open("commit")  # a txn open during compaction commits later: its rows appear
    assert t.read().num_rows >= before.num_rows


@pytest.mark.parametrize("shape", sorted(set(SHAPES) - {"original_files"}))
def test_minor_compaction_reads_back_the_snapshot(
    shape: str, store: TxnStore, make_tbl: MakeTbl
) -> None:
    t = make_tbl("t", partitioned=shape == "partitioned", buckets=3 if shape == "bucketed" else 0)
    part = SHAPES[shape](t)
    before = t.read()
    out = _run(store, "default", "t", part, major=False)
    assert out.state == "r", out.message
    assert out.txn_id is not None and out.highest_write_id is not None
    names = [Path(d).name for d in out.output_dirs]
    parsed = [layout.parse_dir_name(n) for n in names]
    assert all(isinstance(p, layout.ParsedDelta) for p in parsed)
    for p in parsed:
        assert isinstance(p, layout.ParsedDelta)
        assert p.max_write_id == out.highest_write_id
        assert p.visibility_txn_id == out.txn_id and p.statement_id == -1
    assert next(p.is_delete for p in parsed if isinstance(p, layout.ParsedDelta)) is False
    for d in out.output_dirs:
        for f in sorted(Path(d).glob("bucket_*")):
            _check_output_file(str(f), major=False, delete=Path(d).name.startswith("delete_"))
    assert t.read().equals(before)
    Cleaner(store).run_once()
    assert t.read().equals(before)


def test_minor_keeps_every_valid_event_and_drops_aborted_ones(
    store: TxnStore, make_tbl: MakeTbl
) -> None:
    t = make_tbl()
    w1 = t.insert(rows(0, 5))
    w2 = t.insert(rows(5, 10), outcome="abort")
    w3 = t.delete([(w1, b0(), 0)])
    t.delete([(w1, b0(), 1)], outcome="abort")
    out = _run(store, "default", "t", None, major=False)
    ins = _events(str(Path(out.output_dirs[0]) / "bucket_00000"))
    dels = _events(str(Path(out.output_dirs[1]) / "bucket_00000"))
    assert ins.column("originalTransaction").to_pylist() == [w1] * 5
    assert ins.column("currentTransaction").to_pylist() == [w1] * 5
    assert w2 not in ins.column("currentTransaction").to_pylist()
    assert dels.column("originalTransaction").to_pylist() == [w1]
    assert dels.column("rowId").to_pylist() == [0]
    assert dels.column("currentTransaction").to_pylist() == [w3]


def test_minor_with_original_files_is_refused(store: TxnStore, make_tbl: MakeTbl) -> None:
    t = make_tbl()
    shape_original_files(t)
    t.insert(rows(200, 210))
    out = _run(store, "default", "t", None, major=False)
    assert out.state == "c"
    assert "raw format" in (out.message or "")
    rec = CompactionQueue(store).get(out.id)
    assert rec is not None and rec.state == "c"


def test_failed_compaction_leaves_no_visible_trace(
    store: TxnStore, make_tbl: MakeTbl, clock: FakeClock
) -> None:
    t = make_tbl()
    _plain(t)
    before = t.read()
    snapshot_before = str(store.get_valid_write_ids("default", "t", store.get_valid_txns()))

    def boom(step: str) -> None:
        if step == "compaction.after_files":
            raise OSError("disk on fire")

    faults.set_hook(boom)
    try:
        out = _run(store, "default", "t", None, major=True)
    finally:
        faults.set_hook(None)
    assert out.state == "f" and "disk on fire" in (out.message or "")
    assert out.txn_id is not None
    assert store.txn_state(out.txn_id) is TxnState.ABORTED
    rec = CompactionQueue(store).get(out.id)
    assert rec is not None and rec.state == "f" and "disk on fire" in (rec.error_message or "")
    leftover = layout.base_dir_name(out.highest_write_id or 0, visibility_txn_id=out.txn_id)
    assert (Path(t.dir()) / leftover).is_dir()  # written, but its txn aborted: invisible
    assert t.read().equals(before)
    assert str(store.get_valid_write_ids("default", "t", store.get_valid_txns())) == snapshot_before
    clock.advance(301)  # aborted txns are forgotten once their writers surely noticed
    Cleaner(store, clock=clock).run_once()
    assert not (Path(t.dir()) / leftover).exists()
    # The aborted compactor txn is forgotten: snapshots no longer list it.
    assert out.txn_id not in store.get_valid_txns().aborted_txns
    assert t.read().equals(before)
    again = _run(store, "default", "t", None, major=True)
    assert again.state == "r"
    assert t.read().equals(before)


def test_nothing_to_compact_is_refused(store: TxnStore, make_tbl: MakeTbl) -> None:
    t = make_tbl()
    t.insert(rows(0, 5))
    out = _run(store, "default", "t", None, major=False)
    assert out.state == "c" and "thresholds" in (out.message or "")


@pytest.mark.parametrize("shape", sorted(set(SHAPES) - {"original_files", "partitioned"}))
def test_direct_event_merge_agrees_with_the_reader_path(
    shape: str, store: TxnStore, make_tbl: MakeTbl
) -> None:
    """Major compaction merges event files directly; the reader path (used with original
    files) must produce exactly the same events for the same snapshot."""
    from acidstream.acid.directory import get_acid_state
    from acidstream.compaction.rewrite import (
        CompactorSnapshot,
        is_event_only,
        merged_events,
        reader_events,
        sort_events,
    )

    t = make_tbl("t", buckets=3 if shape == "bucketed" else 0)
    SHAPES[shape](t)
    txns = store.get_valid_txns()
    snap = CompactorSnapshot.of(store.get_valid_compactor_write_ids("default", "t", txns))
    st, path = Storage.for_path(t.dir())
    state = get_acid_state(path, write_ids=snap, txns=txns, storage=st)
    assert is_event_only(state)
    direct = merged_events(state, snap, st, t.schema)
    via_reader = reader_events(path, t.schema, snap, txns, st)
    assert direct is not None and via_reader is not None
    assert sort_events(direct).equals(sort_events(via_reader))


def test_successive_minor_and_major_compactions_keep_the_rows(
    store: TxnStore, make_tbl: MakeTbl
) -> None:
    t = make_tbl()
    _plain(t)
    steps = [False, None, False, True, None, True]  # minor, more writes, minor, major, ...
    extra = 1000
    for major in steps:
        if major is None:
            w = t.insert(rows(extra, extra + 25))
            t.delete([(w, b0(), 3)])
            t.insert(rows(extra + 25, extra + 30), outcome="abort")
            extra += 100
            continue
        before = t.read()
        out = _run(store, "default", "t", None, major=major)
        assert out.state == "r", out.message
        assert t.read().equals(before)
        Cleaner(store).run_once()
        assert t.read().equals(before)
    names = [p.name for p in Path(t.dir()).iterdir()]
    assert len(names) == 1 and names[0].startswith("base_")


def test_two_workers_never_take_the_same_request(
    store_factory: Callable[[], TxnStore], make_tbl: MakeTbl
) -> None:
    t = make_tbl()
    _plain(t)
    a, b = store_factory(), store_factory()
    qa, qb = CompactionQueue(a), CompactionQueue(b)
    cq_id, _ = qa.request("default", "t", major=True)
    assert qa.request("default", "t", major=False) == (cq_id, False)  # one per target
    first = qa.claim_next("worker-a")
    second = qb.claim_next("worker-b")
    assert first is not None and first.id == cq_id and first.state == "w"
    assert second is None


def test_the_compactor_txn_is_opened_as_a_compaction_txn(
    store: TxnStore, make_tbl: MakeTbl
) -> None:
    """``TXN_TYPE`` is 3 (COMPACTION) from the moment the compactor txn exists, not set later."""
    t = make_tbl("t")
    _plain(t)
    seen: list[tuple[int, int]] = []

    def look(step: str) -> None:
        if step == "compaction.after_files":
            seen.extend(
                store.database.run(
                    "test_txn_type",
                    lambda tx: tx.q("SELECT TXN_ID, TXN_TYPE FROM TXNS WHERE TXN_STATE = 'o'"),
                    write=False,
                )
            )

    faults.set_hook(look)
    try:
        out = _run(store, "default", "t", None, major=True)
    finally:
        faults.set_hook(None)
    assert out.state == "r" and out.txn_id is not None
    assert seen == [(out.txn_id, 3)]
    others = store.open_txns(2, user="u", host="h")
    typed = store.open_txns(2, user="u", host="h", txn_type=3)
    got = dict(
        store.database.run(
            "test_txn_type",
            lambda tx: tx.q(
                "SELECT TXN_ID, TXN_TYPE FROM TXNS WHERE TXN_ID IN (?, ?, ?, ?)", *others, *typed
            ),
            write=False,
        )
    )
    assert got == {others[0]: 0, others[1]: 0, typed[0]: 3, typed[1]: 3}
