"""The one buffered table writer (``acidstream.acid.table_writer.TableWriter``): placement
into partitions, buckets and list-bucketing directories, the memory limit, delete-event
files, files readable by the reader and by ORC Java; and each of its three users
(``StreamingConnection``, the sink's tasks, the compactor) opening its files through it."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pyarrow as pa
import pyarrow.orc as pa_orc
import pytest

from acidstream.acid import bucket_codec, layout
from acidstream.acid.bucket_hash import bucket_number
from acidstream.acid.file_writer import AcidFileWriter
from acidstream.acid.list_bucketing import DEFAULT_DIR_NAME, SkewedInfo
from acidstream.acid.orc_options import OrcWriterOptions
from acidstream.acid.placement import Placement, TableLayout
from acidstream.acid.reader import read_path
from acidstream.acid.schema import TableSchema
from acidstream.acid.table_writer import TableWriter, WriteTarget
from acidstream.acid.writer import write_delete_delta, write_delta

SCHEMA = TableSchema.parse("id int, name string")
KEY_COLS = ("originalTransaction", "bucket", "rowId")


def table_layout(root: Path, **kw: Any) -> TableLayout:
    return TableLayout(location=str(root / "t"), columns=(("id", "int"), ("name", "string")), **kw)


def rows(ids: range) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int32()), "name": [f"n{i}" for i in ids]})


def events(path: str | Path) -> pa.Table:
    return pa_orc.read_table(str(path))


def keys_of(path: str | Path) -> list[tuple[int, int, int]]:
    ev = events(path)
    return list(zip(*(ev.column(c).to_pylist() for c in KEY_COLS), strict=True))


def writer(root: Path, lay: TableLayout | None = None, **kw: Any) -> TableWriter:
    target = kw.pop("target", WriteTarget(min_write_id=1, max_write_id=1))
    return TableWriter(
        Placement(lay or table_layout(root)), target=target, options=OrcWriterOptions(), **kw
    )


# ---------------------------------------------------------------------- placement
def test_rows_go_to_their_partition_and_hives_bucket(tmp_path: Path) -> None:
    lay = table_layout(tmp_path, partition_keys=("p",), bucket_cols=("id",), num_buckets=3)
    tw = writer(tmp_path, lay, target=WriteTarget(min_write_id=4, max_write_id=4, statement_id=2))
    tw.add_arrow("p=a", rows(range(0, 20)))
    tw.add_row("p=b", (100, "x"), nbytes=10)
    tw.add_row("p=b", (101, "y"), nbytes=10)
    tw.drain(4)
    tw.close()
    t = tmp_path / "t"
    got: dict[tuple[str, int], list[int]] = {}
    for f in sorted(t.glob("p=*/delta_0000004_0000004_0002/bucket_*")):
        bucket = layout.parse_bucket_file(f.name)
        assert bucket is not None
        ev = events(f)
        got[(f.parent.parent.name, bucket[0])] = [r["id"] for r in ev.column("row").to_pylist()]
        # Every event carries the file's writer id and the statement id in its bucket property.
        assert set(ev.column("bucket").to_pylist()) == {bucket_codec.encode(bucket[0], 2)}
    want: dict[tuple[str, int], list[int]] = {}
    for part, ids in (("p=a", range(0, 20)), ("p=b", range(100, 102))):
        for i in ids:
            b = bucket_number([i], [SCHEMA.columns[0][1]], 3, bucketing_version=2)
            want.setdefault((part, b), []).append(i)
    assert got == want
    assert len({b for _, b in want}) > 1  # the rows really spread over several buckets


def test_rows_go_to_their_list_bucketing_dir_with_one_row_id_numbering(tmp_path: Path) -> None:
    sk = SkewedInfo(col_names=("id",), col_values=(("6",),), stored_as_dirs=True)
    tw = writer(tmp_path, table_layout(tmp_path, skewed=sk))
    tw.add_arrow("", rows(range(4, 9)))
    tw.add_row("", (6, "again"), nbytes=1)
    tw.drain(1)
    tw.close()
    delta = tmp_path / "t" / "delta_0000001_0000001"
    lb6 = keys_of(delta / "id=6" / "bucket_00000")
    other = keys_of(delta / DEFAULT_DIR_NAME / "bucket_00000")
    assert [r["id"] for r in events(delta / "id=6" / "bucket_00000").column("row").to_pylist()] == [
        6,
        6,
    ]
    assert len(other) == 4
    # One numbering for the bucket across its directories: rowIds 0..5, none twice.
    assert sorted(r for _, _, r in lb6 + other) == list(range(6))
    assert (delta / layout.ACID_FORMAT_FILE).exists()  # the delta itself is marked


def test_row_tuples_buffered_before_a_table_are_written_first(tmp_path: Path) -> None:
    tw = writer(tmp_path)
    tw.add_row("", (1, "a"), nbytes=1)
    tw.add_arrow("", rows(range(2, 4)))
    tw.add_row("", (9, "z"), nbytes=1)
    tw.drain(1)
    tw.close()
    ev = events(tmp_path / "t" / "delta_0000001_0000001" / "bucket_00000")
    assert [r["id"] for r in ev.column("row").to_pylist()] == [1, 2, 3, 9]
    assert ev.column("rowId").to_pylist() == [0, 1, 2, 3]


# ---------------------------------------------------------------------- memory limit
def test_memory_limit_turns_over_limit_and_flush_empties_the_buffers(tmp_path: Path) -> None:
    target = WriteTarget(min_write_id=1, max_write_id=2)
    tw = writer(tmp_path, target=target, streaming=True, memory_limit_bytes=1000)
    tw.add_row("", (1, "a"), nbytes=600)
    assert not tw.over_limit and tw.buffered_bytes == 600
    tw.add_row("", (2, "b"), nbytes=400)
    assert tw.over_limit and tw.buffered_bytes == 1000
    assert tw.files == []  # nothing written before the flush
    tw.flush(1)
    assert not tw.over_limit and tw.buffered_bytes == 0
    (w,) = tw.files
    assert len(w.flush_lengths) == 1  # an intermediate footer: the rows left memory
    # Readable at that footer, before any commit or close.
    data = Path(w.path).read_bytes()[: w.flush_lengths[0]]
    assert pa_orc.ORCFile(pa.BufferReader(data)).nrows == 2
    tw.add_arrow("", rows(range(3, 5)), nbytes=0)
    assert tw.buffered_bytes == 0  # counted by the caller
    tw.count_bytes(5)
    assert tw.buffered_bytes == 5
    tw.drain(2)
    tw.close()
    assert [r[0] for r in keys_of(w.path)] == [1, 1, 2, 2]


def test_no_limit_never_over_and_bad_limit_refused(tmp_path: Path) -> None:
    tw = writer(tmp_path)
    tw.add_arrow("", rows(range(10_000)))
    assert not tw.over_limit and tw.buffered_bytes > 0
    with pytest.raises(ValueError, match="memory_limit_bytes"):
        writer(tmp_path, memory_limit_bytes=0)


# ---------------------------------------------------------------------- deletes
def test_delete_events_one_file_per_writer_id_sorted_with_statement_ids(tmp_path: Path) -> None:
    target = WriteTarget(min_write_id=7, max_write_id=7, statement_id=3)
    lay = table_layout(tmp_path, partition_keys=("p",))
    tw = writer(tmp_path, lay, target=target)
    b0, b1 = bucket_codec.encode(0, 1), bucket_codec.encode(1, 0)
    tw.add_deletes("p=a", [(5, b1, 2), (2, b0, 9), (5, b0, 1), (2, b0, 3), (5, b1, 2)])
    tw.add_deletes("p=b", [(1, b0, 0)])
    assert tw.buffered_bytes == 6 * 24
    paths = tw.write_deletes(7)
    assert tw.buffered_bytes == 0
    d = "delete_delta_0000007_0000007_0003"
    t = tmp_path / "t"
    assert paths == [
        str(t / "p=a" / d / "bucket_00000"),
        str(t / "p=a" / d / "bucket_00001"),
        str(t / "p=b" / d / "bucket_00000"),
    ]
    # Sorted by (originalTransaction, bucket, rowId), duplicates dropped.
    assert keys_of(paths[0]) == [(2, b0, 3), (2, b0, 9), (5, b0, 1)]
    assert keys_of(paths[1]) == [(5, b1, 2)]
    ev = events(paths[0])
    assert set(ev.column("currentTransaction").to_pylist()) == {7}
    assert set(ev.column("operation").to_pylist()) == {2}
    # The same bytes as the one-shot writer (acid.writer.write_delete_delta) writes.
    ref = write_delete_delta(
        str(tmp_path / "ref"),
        SCHEMA,
        7,
        [(5, b1, 2), (2, b0, 9), (5, b0, 1), (2, b0, 3)],
        statement_id=3,
    )
    assert [Path(p).read_bytes() for p in ref] == [Path(p).read_bytes() for p in paths[:2]]


def test_inserts_and_deletes_of_one_statement_read_back(tmp_path: Path) -> None:
    """An UPDATE's shape: a write id's delete events and new row versions, both under a
    statement id, read back by the reader with the deleted rows gone."""
    t = str(tmp_path / "t")
    write_delta(t, SCHEMA, 1, rows(range(5)), statement_id=0)
    b = bucket_codec.encode(0, 0)
    tw = writer(tmp_path, target=WriteTarget(min_write_id=2, max_write_id=2, statement_id=1))
    tw.add_deletes("", [(1, b, 1), (1, b, 3)])
    tw.add_arrow("", pa.table({"id": pa.array([1, 3], pa.int32()), "name": ["new1", "new3"]}))
    tw.drain(2)
    tw.close()
    tw.write_deletes(2)
    assert (tmp_path / "t" / "delta_0000002_0000002_0001" / "bucket_00000").exists()
    got = read_path(t, schema=SCHEMA).sort_by("id").to_pylist()
    assert got == [
        {"id": 0, "name": "n0"},
        {"id": 1, "name": "new1"},
        {"id": 2, "name": "n2"},
        {"id": 3, "name": "new3"},
        {"id": 4, "name": "n4"},
    ]


# ---------------------------------------------------------------------- read back
def _streaming_file(tmp_path: Path) -> tuple[str, TableWriter]:
    """Three txns of one batch in one streaming file, footers recorded in the side file."""
    target = WriteTarget(min_write_id=1, max_write_id=3)
    tw = writer(tmp_path, target=target, streaming=True)
    for wid in (1, 2, 3):
        tw.add_arrow("", rows(range(wid * 10, wid * 10 + 3)))
        for w, length in tw.write_footers(wid):
            w.sync_data()
            w.record_footer(length)
    (w,) = tw.files
    return w.path, tw


def test_streaming_file_is_read_back_by_read_path_at_its_side_file_length(tmp_path: Path) -> None:
    path, tw = _streaming_file(tmp_path)
    assert Path(layout.side_file_name(path)).exists()  # the file is still open
    ids = sorted(r["id"] for r in read_path(str(tmp_path / "t"), schema=SCHEMA).to_pylist())
    assert ids == [10, 11, 12, 20, 21, 22, 30, 31, 32]
    tw.close()
    assert not Path(layout.side_file_name(path)).exists()
    assert read_path(str(tmp_path / "t"), schema=SCHEMA).num_rows == 9


@pytest.mark.spark
def test_files_written_through_it_are_read_by_orc_java(tmp_path: Path, jvm_orc: Any) -> None:
    path, tw = _streaming_file(tmp_path)
    lengths = list(tw.files[0].flush_lengths)
    for i, length in enumerate(lengths):  # every txn boundary of the open file
        got = jvm_orc.read(path, max_length=length)
        assert got["rows"] == got["rows_read"] == 3 * (i + 1)
        assert got["schema"] == SCHEMA.orc_event_schema()
    tw.close()
    got = jvm_orc.read(path)
    assert got["rows"] == 9 and got["metadata"]["hive.acid.version"] == "2"
    b = bucket_codec.encode(0, 0)
    dw = writer(tmp_path, target=WriteTarget(min_write_id=4, max_write_id=4))
    dw.add_deletes("", [(1, b, 2), (1, b, 0)])
    (dpath,) = dw.write_deletes(4)
    got = jvm_orc.read(dpath)
    assert got["rows"] == 2 and got["metadata"]["hive.acid.key.index"] == "1,536870912,2;"


# ---------------------------------------------------------------------- its three users
@pytest.fixture
def opened_by() -> Iterator[list[bool]]:
    """Per AcidFileWriter opened while the fixture is active: whether a TableWriter
    method is on the stack (i.e. the file was opened through the table writer)."""
    seen: list[bool] = []
    real = AcidFileWriter.__init__

    def spy(self: AcidFileWriter, *a: Any, **kw: Any) -> None:
        f: FrameType | None = sys._getframe(1)
        through = False
        while f is not None:
            if f.f_code.co_filename.endswith("acid/table_writer.py"):
                through = True
                break
            f = f.f_back
        seen.append(through)
        real(self, *a, **kw)

    AcidFileWriter.__init__ = spy  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        AcidFileWriter.__init__ = real  # type: ignore[method-assign]


def test_streaming_connection_writes_through_it(store: Any, opened_by: list[bool]) -> None:
    from acidstream.ingest.connection import StreamingConnection, StreamingOptions
    from acidstream.ingest.record_writers import StrictJsonWriter
    from acidstream.txn.catalog import TableDef

    store.create_table(
        TableDef(
            db="default",
            name="t",
            columns=(("id", "int"), ("name", "string")),
            partition_keys=(("p", "string"),),
            bucket_cols=("id",),
            num_buckets=2,
            parameters={"transactional": "true"},
        )
    )
    opts = StreamingOptions(txns_per_batch=2, memory_limit_bytes=30)
    with StreamingConnection(
        "default.t", record_writer=StrictJsonWriter(), store=store, options=opts
    ) as conn:
        conn.begin_transaction()
        conn.write(json.dumps({"id": 1, "name": "a", "p": "x"}).encode())
        conn.write_block([json.dumps({"id": i, "name": "b", "p": "y"}).encode() for i in range(4)])
        conn.commit_transaction()
        conn.begin_transaction()
        conn.write_arrow(rows(range(2)), partition=["x"])
        conn.commit_transaction()
        assert conn.stats().auto_flushes >= 1
    assert len(opened_by) >= 3 and all(opened_by), opened_by


def test_sink_task_writes_through_it(tmp_path: Path, opened_by: list[bool]) -> None:
    pytest.importorskip("pyspark", reason="the sink's task imports pyspark's TaskContext")
    from acidstream.sinks.foreach_batch import SinkOptions, _TaskPlan, _write_task

    plan = _TaskPlan(
        table=table_layout(tmp_path, partition_keys=("p",)),
        source="default.t",
        write_ids=(3, 4),
        options=SinkOptions(),
        has_offsets=False,
    )
    values = [json.dumps({"id": i, "name": "s", "p": f"q{i % 2}"}).encode() for i in range(6)]
    batch = pa.RecordBatch.from_pydict({"value": pa.array(values, pa.binary())})
    (meta,) = list(_write_task(plan, iter([batch])))
    files = [r for r in meta.to_pylist() if r["path"]]
    assert len(files) == 2 and sum(r["rows"] for r in files) == 6
    assert len(opened_by) == 2 and all(opened_by), opened_by
    for r in files:  # each file spread over the batch's two write ids
        assert sorted({k[0] for k in keys_of(r["path"])}) == [3, 4]


def test_compactor_writes_through_it(tmp_path: Path, opened_by: list[bool]) -> None:
    from acidstream.acid.directory import get_acid_state
    from acidstream.acid.snapshot import ValidCompactorWriteIdList, ValidTxnList
    from acidstream.acid.storage import Storage
    from acidstream.compaction.rewrite import CompactorSnapshot, major, minor

    t = str(tmp_path / "t")
    write_delta(t, SCHEMA, 1, rows(range(3)))
    write_delta(t, SCHEMA, 2, rows(range(3, 6)))
    write_delete_delta(t, SCHEMA, 3, [(1, bucket_codec.encode(0), 1)])
    n_before = len(opened_by)
    wids = ValidCompactorWriteIdList("default.t", 3, (), ())
    txns = ValidTxnList()
    st, path = Storage.for_path(t)
    snap = CompactorSnapshot.of(wids)
    state = get_acid_state(path, write_ids=snap, txns=txns, storage=st)
    out = minor(
        path, state, schema=SCHEMA, write_ids=wids, compactor_txn_id=10, storage=st,
        options=OrcWriterOptions(),
    )  # fmt: skip
    assert (out.inserts, out.deletes) == (6, 1)
    res = major(
        path, state, schema=SCHEMA, write_ids=wids, txns=txns, compactor_txn_id=11, storage=st,
        options=OrcWriterOptions(),
    )  # fmt: skip
    assert res.inserts == 5
    mine = opened_by[n_before:]
    assert len(mine) == 3 and all(mine), mine  # minor: insert + delete file; major: base
    assert (tmp_path / "t" / "base_0000003_v0000011" / "bucket_00000").exists()
