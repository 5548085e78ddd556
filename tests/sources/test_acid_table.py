"""The ``acidtable`` Spark source against real tables (SQLite and PostgreSQL metastores),
local Spark, the compactor, the AcidSink, and the Hive-written corpus."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from acidstream.acid import faults
from acidstream.acid.errors import AcidStreamError, ConfigError
from acidstream.acid.reader import read_path
from acidstream.compaction.cleaner import Cleaner
from acidstream.compaction.worker import Worker
from acidstream.sources.acid_table import AcidReadTxn, AcidTableSource, AcidTableStreamReader
from acidstream.sources.acid_table_options import AcidTableOptions
from acidstream.sources.acid_table_plan import AcidTablePartition
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.store import TxnState, TxnStore, open_store
from tests.ingest.conftest import snapshot_read
from tests.sources.acid_table_helpers import (
    arrow_rows,
    create_table,
    delete_keys,
    insert_txns,
    spark_rows,
)

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(store_url: str, tmp_path: Path) -> Any:
    """A metastore (both backends), its warehouse, and an open store on it."""
    wh = str(tmp_path / "wh")
    store = open_store(store_url, warehouse=wh)
    yield store_url, wh, store
    store.close()


@pytest.fixture(scope="module")
def sp(spark: Any) -> Any:
    spark.dataSource.register(AcidTableSource)
    return spark


def _read(sp: Any, env: Any, table: str = "default.t", **opts: Any) -> Any:
    url, wh, _ = env
    r = sp.read.format("acidtable").option("metastore", url).option("warehouse", wh)
    for k, v in opts.items():
        r = r.option(k, str(v))
    return r.load(table)


def _open_txns(store: TxnStore) -> list[int]:
    return [t.txn_id for t in store.show_txns() if t.state == TxnState.OPEN]


def _reap_finished_leases(store: TxnStore) -> list[int]:
    """What the housekeeper's reaper does one txn timeout after a batch read's last
    heartbeat: abort its lease txn (here at once, judging from one hour ahead)."""
    import time

    leases = [
        t.txn_id
        for t in store.show_txns()
        if t.state == TxnState.OPEN and t.agent_info.startswith("acidtable-read:")
    ]
    assert leases == _open_txns(store)  # nothing else is open: no writer is reaped
    return store.reap_timed_out(now=time.time() + 3600)


# ------------------------------------------------------------------------- batch reads


def test_reads_the_python_readers_rows_with_typed_partitions_and_row_ids(sp: Any, env: Any) -> None:
    _, _, store = env
    t = create_table(store, "t", partitioned_by=[("ds", "date"), ("h", "int")])
    insert_txns(store, "default.t", [(0, 50), (50, 80)], partition=["2026-11-18", "7"])
    insert_txns(store, "default.t", [(80, 100)], partition=["2026-11-19", "8"])
    # id 3: first txn, bucket 0, rowId 3
    delete_keys(store, t, [(1, 536870912, 3)], partition="ds=2026-11-18/h=7")
    df = _read(sp, env, includeRowId="true")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("row__id", "struct<writeid:bigint,bucketid:int,rowid:bigint>"),
        ("id", "bigint"),
        ("name", "string"),
        ("amount", "decimal(10,2)"),
        ("ds", "date"),
        ("h", "int"),
    ]
    got = spark_rows(df)
    py = arrow_rows(snapshot_read(store, t, include_row_id=True))
    assert len(got) == 99 and 3 not in {r["id"] for r in got}
    import datetime

    for g, p in zip(got, py, strict=True):
        assert g["row__id"] == p["row__id"]
        assert (g["id"], g["name"], g["amount"]) == (p["id"], p["name"], p["amount"])
        # Partition values typed as declared (the Python reader gives strings).
        assert g["ds"] == datetime.date.fromisoformat(p["ds"]) and g["h"] == int(p["h"])
    # Column pruning: by option and by a user schema.
    pruned = _read(sp, env, columns="h,id")
    assert pruned.columns == ["h", "id"]
    assert sorted(r["id"] for r in pruned.collect()) == [r["id"] for r in py]
    by_schema = (
        sp.read.format("acidtable")
        .schema("id bigint")
        .option("metastore", env[0])
        .option("warehouse", env[1])
        .load("default.t")
    )
    assert sorted(r.id for r in by_schema.collect()) == [r["id"] for r in py]


def test_pushed_filters_prune_partitions_and_rows(sp: Any, env: Any) -> None:
    _, _, store = env
    create_table(store, "t", partitioned_by=[("ds", "date")])
    for k, day in enumerate(["2026-11-18", "2026-11-19", "2026-11-20", None]):
        insert_txns(store, "default.t", [(k * 100, k * 100 + 100)], partition=[day])
    sp.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        every = _read(sp, env, filterPushdown="true")
        assert every.rdd.getNumPartitions() == 4  # one file group per partition
        cases = {
            "ds = date'2026-11-19'": (1, set(range(100, 200))),
            "ds in (date'2026-11-18', date'2026-11-20')": (2, set(range(0, 100)) | set(range(200, 300))),
            "ds >= date'2026-11-19' and ds < date'2026-11-20'": (1, set(range(100, 200))),
            "ds is null": (1, set(range(300, 400))),
            "ds = date'2026-11-19' and id >= 150 and id < 160": (1, set(range(150, 160))),
        }  # fmt: skip
        for where, (nparts, ids) in cases.items():
            df = every.where(where)
            assert {r.id for r in df.collect()} == ids, where
            assert _read(sp, env, filterPushdown="true").where(where).rdd.getNumPartitions() == (
                nparts
            ), where
    finally:
        sp.conf.unset("spark.sql.python.filterPushdown.enabled")


def test_a_large_file_group_is_split_by_file_and_stripe(sp: Any, env: Any) -> None:
    _, _, store = env
    t = create_table(store, "t")
    insert_txns(store, "default.t", [(i * 2000, i * 2000 + 2000) for i in range(4)])
    df = _read(sp, env, maxPartitionBytes=1)  # every piece its own input partition
    assert df.rdd.getNumPartitions() >= 4
    assert spark_rows(df) == arrow_rows(snapshot_read(store, t))


def test_stripe_pieces_apply_validity_and_deletes_like_the_python_reader(env: Any) -> None:
    """A streaming file of a 4-txn batch (one stripe per txn, one txn aborted) with a
    delete, cut into one-stripe pieces: the pieces' rows are the Python reader's."""
    import pyarrow as pa

    from acidstream.ingest.connection import StreamingConnection, StreamingOptions
    from acidstream.ingest.record_json import StrictJsonWriter
    from tests.sources.acid_table_helpers import rows

    url, wh, store = env
    t = create_table(store, "t")
    with StreamingConnection(
        "default.t",
        record_writer=StrictJsonWriter(),
        store=store,
        options=StreamingOptions(txns_per_batch=4),
    ) as c:
        for k in range(4):
            c.begin_transaction()
            c.write_rows(rows(k * 500, k * 500 + 500))
            if k == 2:
                c.abort_transaction()
            else:
                c.commit_transaction()
    delete_keys(store, t, [(1, 536870912, 7), (4, 536870912, 0)])
    source = AcidTableSource(
        {"path": "default.t", "metastore": url, "warehouse": wh, "maxPartitionBytes": "1",
         "includeRowId": "true"}
    )  # fmt: skip
    reader = source.reader(source.schema())
    parts = reader.partitions()
    assert all(isinstance(p, AcidTablePartition) for p in parts)
    pieces = [pc for p in parts if isinstance(p, AcidTablePartition) for pc in p.pieces]
    assert len(pieces) >= 3 and all(pc.stripes is not None for pc in pieces)
    got = pa.Table.from_batches([b for p in parts for b in reader.read(p)])
    want = snapshot_read(store, t, include_row_id=True)
    assert arrow_rows(got) == arrow_rows(want)
    ids = {r["id"] for r in arrow_rows(got)}
    assert len(ids) == 1498 and not ids & ({7, 1500} | set(range(1000, 1500)))
    assert reader.spec.lease is not None
    store.commit_txn(reader.spec.lease.txn_id)  # the read is over


def test_unknown_options_and_columns_are_refused(sp: Any, env: Any) -> None:
    _, _, store = env
    create_table(store, "t")
    with pytest.raises(Exception, match="unknown acidtable option 'bogus'"):
        _read(sp, env, bogus=1)
    with pytest.raises(Exception, match="unknown column 'nope'"):
        _read(sp, env, columns="id,nope")
    with pytest.raises(ConfigError, match="cannot be used together"):
        AcidTableOptions.parse({"path": "default.t", "asOfWriteId": "1", "asOfTxn": "2"})


# -------------------------------------------------------------- snapshot isolation


def _compact_and_clean(store: TxnStore) -> tuple[Any, Cleaner]:
    q = CompactionQueue(store)
    q.request("default", "t", major=True)
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.state == "r", out
    return out, Cleaner(store, queue=q)


def _dirs(location: str) -> set[str]:
    return {p.name for p in Path(location).iterdir() if p.is_dir()}


def test_lease_keeps_the_cleaner_off_the_snapshot_until_the_read_ends(env: Any) -> None:
    """The planner's lease txn: a writer commits and the compactor runs between planning
    and the executors' reads; they still read the planned snapshot's files."""
    url, wh, store = env
    t = create_table(store, "t")
    assert t.location is not None
    insert_txns(store, "default.t", [(0, 100), (100, 200)])
    expected = arrow_rows(snapshot_read(store, t))
    source = AcidTableSource({"path": "default.t", "metastore": url, "warehouse": wh})
    reader = source.reader(source.schema())  # the planning worker's steps
    parts = reader.partitions()
    old = _dirs(t.location)
    insert_txns(store, "default.t", [(200, 300)])
    out, cleaner = _compact_and_clean(store)
    assert cleaner.run_once() == []  # the lease predates the compaction's commit
    assert old <= _dirs(t.location)
    import pyarrow as pa

    got = pa.Table.from_batches([b for p in parts for b in reader.read(p)])
    assert arrow_rows(got) == expected
    # The lease is the only open txn; once it ends the cleaner proceeds.
    assert reader.spec.lease is not None
    assert _open_txns(store) == [reader.spec.lease.txn_id]
    store.commit_txn(reader.spec.lease.txn_id)
    assert [c.id for c in cleaner.run_once()] == [out.id]
    assert not old & _dirs(t.location)  # the planned snapshot's deltas are gone now


def test_lost_lease_fails_the_read_instead_of_reading_a_cleaned_snapshot(env: Any) -> None:
    url, wh, store = env
    create_table(store, "t")
    insert_txns(store, "default.t", [(0, 10)])
    source = AcidTableSource({"path": "default.t", "metastore": url, "warehouse": wh})
    reader = source.reader(source.schema())
    parts = reader.partitions()
    assert reader.spec.lease is not None
    store.abort_txn(reader.spec.lease.txn_id)  # as the reaper does after the txn timeout
    with pytest.raises(AcidStreamError, match=r"lease txn \d+ was aborted"):
        list(reader.read(parts[0]))


def test_spark_reads_are_snapshots_while_a_writer_commits(sp: Any, env: Any) -> None:
    """Every read, taken while txns of 100 rows commit, sees whole txns only."""
    url, wh, store = env
    create_table(store, "t")
    insert_txns(store, "default.t", [(0, 100)])
    read_done = threading.Semaphore(0)

    def writer() -> None:
        w = open_store(url, warehouse=wh)
        try:
            # Chunks of 5 txns; each chunk starts after a read ended, so the next read
            # overlaps the chunk's commits whatever the machine's speed.
            for chunk in range(6):
                read_done.acquire()
                first = 1 + chunk * 5
                insert_txns(
                    w, "default.t", [(i * 100, i * 100 + 100) for i in range(first, first + 5)]
                )
        finally:
            w.close()

    th = threading.Thread(target=writer)
    th.start()
    seen: list[int] = []
    try:
        while th.is_alive():
            ids = sorted(r.id for r in _read(sp, env, columns="id").collect())
            assert ids == list(range(len(ids))) and len(ids) % 100 == 0
            seen.append(len(ids))
            read_done.release()
    finally:
        for _ in range(6):
            read_done.release()  # never leave the writer waiting if a read failed
        th.join()
    assert len(seen) >= 6 and seen == sorted(seen)
    assert sorted(r.id for r in _read(sp, env, columns="id").collect()) == list(range(3100))


def test_read_txn_holds_one_snapshot_across_commits_compaction_and_actions(
    sp: Any, env: Any
) -> None:
    url, wh, store = env
    t = create_table(store, "t")
    assert t.location is not None
    insert_txns(store, "default.t", [(0, 100), (100, 200)])
    with AcidReadTxn(metastore=url, warehouse=wh) as rt:
        df = sp.read.format("acidtable").options(**rt.options()).load("default.t")
        first = spark_rows(df)
        insert_txns(store, "default.t", [(200, 300)])
        out, cleaner = _compact_and_clean(store)
        assert cleaner.run_once() == []
        assert spark_rows(df) == first  # second action, after compaction: same snapshot
        assert df.count() == 200
        assert not [x for x in _open_txns(store) if x != rt.txn_id]  # no lease of its own
    assert [c.id for c in cleaner.run_once()] == [out.id]  # AcidReadTxn ended: cleaned at once
    assert sorted(r.id for r in _read(sp, env).collect()) == list(range(300))


# --------------------------------------------------------------------------- time travel


def test_time_travel_before_and_after_compaction(sp: Any, env: Any) -> None:
    store = env[2]
    t = create_table(store, "t")
    insert_txns(store, "default.t", [(0, 10), (10, 20), (20, 30)])
    delete_keys(store, t, [(1, 536870912, 0)])  # write id 4 deletes id 0
    txn_of_2 = store.txn_for_write_id("default", "t", 2)
    assert txn_of_2 is not None

    def ids(**o: Any) -> list[int]:
        return sorted(r.id for r in _read(sp, env, **o).collect())

    assert ids(asOfWriteId=2) == list(range(20))
    assert ids(asOfTxn=txn_of_2) == list(range(20))
    assert ids(asOfWriteId=3) == list(range(30))
    assert ids() == list(range(1, 30))
    out, cleaner = _compact_and_clean(store)
    # Compacted: its base (write id 4) now answers for every version up to 4, and, as in
    # Hive, an older version is refused from the compaction's commit on (before the
    # Cleaner removes the deltas, so it never depends on the cleaning race).
    for stage in ("compacted", "cleaned"):
        assert ids() == list(range(1, 30)), stage
        assert ids(asOfWriteId=4) == list(range(1, 30)), stage
        for opt in ({"asOfWriteId": 2}, {"asOfTxn": txn_of_2}):
            with pytest.raises(Exception, match="not enough history for asOf"):
                ids(**opt)
        if stage == "compacted":
            # The batch reads' leases hold the Cleaner until the reaper ends them.
            assert cleaner.run_once() == []
            assert _reap_finished_leases(store)
            assert [c.id for c in cleaner.run_once()] == [out.id]
    with pytest.raises(Exception, match="in the future"):
        ids(asOfWriteId=99)


# ----------------------------------------------------------------------------- streaming


def test_stream_refuses_delete_events_unless_told_to_skip_them(env: Any) -> None:
    url, wh, store = env
    t = create_table(store, "t")
    insert_txns(store, "default.t", [(0, 10), (10, 20)])
    delete_keys(store, t, [(1, 536870912, 0)])
    insert_txns(store, "default.t", [(20, 30)])
    opts = {"path": "default.t", "metastore": url, "warehouse": wh}
    source = AcidTableSource(opts)
    r = source.streamReader(source.schema())
    start = r.initialOffset()
    assert start == {"writeId": -1}
    end = r.latestOffset(start, r.getDefaultReadLimit())
    assert end == {"writeId": 4}
    with pytest.raises(AcidStreamError, match="inserts only"):
        r.partitions({"writeId": 2}, end)
    assert r.partitions(start, {"writeId": 2})  # before the delete: fine
    r.stop()
    lenient = AcidTableSource({**opts, "onDeletes": "ignore"})
    r2 = lenient.streamReader(lenient.schema())
    import pyarrow as pa

    got = pa.Table.from_batches([b for p in r2.partitions({"writeId": 2}, end) for b in r2.read(p)])
    assert sorted(got.column("id").to_pylist()) == list(range(20, 30))
    r2.stop()
    assert _open_txns(store) == []  # every micro-batch lease ended


def test_stream_frontier_waits_for_an_open_writer(env: Any) -> None:
    url, wh, store = env
    t = create_table(store, "t")
    insert_txns(store, "default.t", [(0, 10)])
    open_txn = store.open_txns(1, user="w", host="h")[0]
    store.allocate_write_ids([open_txn], t.db, t.name)  # write id 2, still open
    insert_txns(store, "default.t", [(10, 20)])  # write id 3 commits first
    source = AcidTableSource({"path": "default.t", "metastore": url, "warehouse": wh})
    r: AcidTableStreamReader = source.streamReader(source.schema())
    assert r.latestOffset({"writeId": -1}, r.getDefaultReadLimit()) == {"writeId": 1}
    store.abort_txn(open_txn)
    assert r.latestOffset({"writeId": 1}, r.getDefaultReadLimit()) == {"writeId": 3}
    r.stop()
    # maxWriteIdsPerTrigger: one write id per batch, each batch exactly its rows.
    one = AcidTableSource(
        {"path": "default.t", "metastore": url, "warehouse": wh, "maxWriteIdsPerTrigger": "1"}
    )
    r1 = one.streamReader(one.schema())
    import pyarrow as pa

    start, batches = r1.initialOffset(), []
    while True:
        end = r1.latestOffset(start, r1.getDefaultReadLimit())
        if end == start:
            break
        parts = r1.partitions(start, end)
        got = [b for p in parts for b in r1.read(p)]
        batches.append(sorted(pa.Table.from_batches(got).column("id").to_pylist()) if got else [])
        r1.commit(end)
        start = end
    assert batches == [list(range(10)), [], list(range(10, 20))]  # write id 2 aborted
    r1.stop()


_DRIVER = """
import json, sys
from pyspark.sql import SparkSession, functions as F
from acidstream.sinks.foreach_batch import AcidSink
from acidstream.sources.acid_table import AcidTableSource
a = json.loads(sys.argv[1])
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
spark.dataSource.register(AcidTableSource)
src = (spark.readStream.format("acidtable").option("metastore", a["url"]).option("warehouse", a["wh"])
       .option("maxWriteIdsPerTrigger", "3").load("default.src"))
sink = AcidSink(table="default.dst", metastore=a["url"], warehouse=a["wh"], lineage="t2t")
def batch(df, batch_id):
    sink(df.select(F.to_json(F.struct(*df.columns)).alias("value")), batch_id)
q = (src.writeStream.foreachBatch(batch).option("checkpointLocation", a["ckpt"])
     .trigger(availableNow=True).start())
q.awaitTermination()
print("RESULT", json.dumps({"committed": sink.batches_committed, "skipped": sink.batches_skipped}))
"""


def _driver(args: dict[str, str], crash: str | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    env.pop(faults.ENV, None)
    if crash:
        env[faults.ENV] = crash
    return subprocess.run(
        [sys.executable, "-c", _DRIVER, json.dumps(args)],
        capture_output=True, text=True, timeout=300, env=env, cwd=str(ROOT),
    )  # fmt: skip


@pytest.mark.slow
def test_table_to_table_stream_exactly_once_across_a_driver_kill(env: Any, tmp_path: Path) -> None:
    url, wh, store = env
    create_table(store, "src")
    create_table(store, "dst")
    insert_txns(store, "default.src", [(i * 50, i * 50 + 50) for i in range(5)])  # write ids 1-5
    args = {"url": url, "wh": wh, "ckpt": str(tmp_path / "ckpt")}
    first = _driver(args, "sink.after_commit")  # killed after the sink committed batch 0
    assert first.returncode == -signal.SIGKILL, first.stderr[-3000:]
    dst = store.get_table("default", "dst")
    after_kill = sorted(snapshot_read(store, dst, columns=["id"]).column("id").to_pylist())
    assert after_kill == list(range(150))  # batch 0: write ids 1-3, once
    insert_txns(store, "default.src", [(250, 300)])  # more arrives while the driver is down
    second = _driver(args, None)
    assert second.returncode == 0, second.stderr[-3000:]
    result = json.loads(second.stdout.split("RESULT", 1)[1])
    assert result["skipped"] == 1  # Spark replayed batch 0; the sink skipped it
    got = snapshot_read(store, dst, columns=["id", "name", "amount"])
    src = snapshot_read(store, store.get_table("default", "src"), columns=["id", "name", "amount"])
    assert arrow_rows(got) == arrow_rows(src)  # every source row exactly once
    assert [t for t in store.show_txns() if t.state == TxnState.OPEN] == [] or all(
        t.agent_info.startswith("acidtable-read:")
        for t in store.show_txns()
        if t.state == TxnState.OPEN
    )


# -------------------------------------------------------------------------------- corpus


def _corpus_cases(corpus: Path, tmp: Path) -> list[tuple[str, Path, str | None, dict[str, Any]]]:
    """(name, table dir, valid write ids, expected facts) of the corpus cases, laid out as
    ``tests/acid/test_corpus.py`` lays them out."""
    from tests.acid.orc_builders import place

    def exp(case: str, sid: str) -> dict[str, Any]:
        doc = json.loads((corpus / case / "expected.json").read_text())
        return next(s for s in doc["scenarios"] if s["id"] == sid)

    out: list[tuple[str, Path, str | None, dict[str, Any]]] = []
    case = "apache-impala/streaming"
    for sid in ("hwm0", "hwm1", "hwm2"):
        s = exp(case, sid)
        table = tmp / f"streaming_{sid}"
        place(corpus / case / "delta_1_2/streaming.orc", table / "delta_1_2/streaming.orc")
        out.append((f"{case}:{sid}", table, s["valid_write_ids"], s))
    case = "apache-impala/full_acid_original_file"
    table = tmp / "alltypes"
    place(corpus / case / "000000_0", table / "000000_0")
    out.append((case, table, None, exp(case, "original_file_row_ids")))
    case = "apache-impala/full_acid_schema_but_no_acid_version"
    s = exp(case, "count")
    table = tmp / "noversion"
    place(corpus / case / s["file"], table / s["file"])
    out.append((case, table, None, s))
    case = "stagraqubole-presto-1/fullacid_basefile_singleCol_singleRow"
    table = tmp / "single"
    place(
        corpus / case / "fullacid_basefile_singleCol_singleRow.orc",
        table / "delta_0000002_0000002_0000/bucket_00000",
    )
    out.append((case, table, None, exp(case, "read")))
    nation = corpus / "trinodb-trino/nationFile25kRowsSortedOnNationKey/bucket_00000"
    table = tmp / "nation"
    place(nation, table / "delta_0000002_0000002_0000/bucket_00000")
    out.append(
        (
            "trinodb-trino/nationFile25kRowsSortedOnNationKey",
            table,
            None,
            exp("trinodb-trino/nationFile25kRowsSortedOnNationKey", "full_read"),
        )
    )
    table = tmp / "nation_del"
    place(nation, table / "delta_0000002_0000002_0000/bucket_00000")
    for d in sorted((corpus / "trinodb-trino/nation_delete_deltas").glob("delete_delta_*")):
        place(d / "bucket_00000", table / d.name / "bucket_00000")
    s = exp("trinodb-trino/nation_delete_deltas", "nation_minus_deletes")
    out.append(("trinodb-trino/nation_delete_deltas", table, s["valid_write_ids_equivalent"], s))
    case = "trinodb-trino/fullacidNationTableWithOriginalFiles"
    s = exp(case, "original_file_with_delete")
    table = tmp / "nation_orig"
    place(corpus / case / "000000_0", table / "000000_0")
    for d in s["delete_deltas"]:
        place(corpus / case / d / "bucket_00000", table / d / "bucket_00000")
    out.append((case, table, None, s))
    for case in ("trinodb-trino/dummy_id_data_orc", "stagraqubole-presto-1/dummy_id_data_orc"):
        table = tmp / case.replace("/", "_")
        src = corpus / case
        for f in sorted(src.rglob("*")):
            if f.is_file() and f.suffix not in (".md", ".json"):
                place(f, table / f.relative_to(src))
        doc = json.loads((corpus / case / "expected.json").read_text())
        full = next(s for s in doc["scenarios"] if s["id"] in ("full_table_scan", "full_scan_hwm2"))
        out.append((case, table, full.get("valid_write_ids"), full))
    case = "trinodb-trino/acid_version_validation"
    s = exp(case, "hive3_file_accepted")
    table = tmp / "hive3"
    place(
        corpus / case / s["file"],
        table / f"delta_0000001_0000001_0000/bucket_{s['expect']['decoded_bucket']:05d}",
    )
    out.append((case, table, None, s))
    case = "trinodb-trino/orcFileWithoutRowGroupInfo"
    s = exp(case, "read_all")
    table = tmp / "minor"
    place(corpus / case / s["file"], table / s["logical_location"])
    out.append((case, table, None, s))
    case = "trinodb-trino/fullacid_delete_delta_test"
    for sid in ("mask_with_deltas_4_and_7", "mask_after_minor_compaction_naming"):
        s = exp(case, sid)
        table = tmp / f"deletes_{sid}"
        _delete_delta_table(corpus / case, table, s["delete_deltas"], s["probe_keys"])
        out.append((f"{case}:{sid}", table, None, s))
    return out


def _delete_delta_table(src: Path, table: Path, deltas: list[str], probe: dict[str, Any]) -> None:
    """The case's delete deltas plus one row per probed originalTransaction (bucket 0,
    rowId 0), as ``tests/acid/test_corpus.py::_delete_delta_case`` builds it."""
    import pyarrow as pa

    from acidstream.acid.layout import ParsedDelta, parse_dir_name
    from acidstream.acid.schema import TableSchema
    from acidstream.acid.writer import write_delta
    from tests.acid.orc_builders import place, write_original

    for d in deltas:
        place(src / d / "bucket_00000", table / d / "bucket_00000")
    compacted: set[int] = set()
    for d in deltas:
        parsed = parse_dir_name(d)
        assert isinstance(parsed, ParsedDelta)
        if parsed.statement_id == -1:
            compacted.update(range(parsed.min_write_id, parsed.max_write_id + 1))
    for w in probe["originalTransaction"]:
        if w == 0:
            write_original(table / "000000_0", {"col": [0]}, types={"col": pa.int32()})
        else:
            stmt = -1 if w in compacted else 0
            write_delta(str(table), TableSchema.parse("col int"), w, [(w,)], statement_id=stmt)


def test_every_corpus_case_reads_through_spark_as_expected(
    sp: Any, corpus_dir: Path, tmp_path: Path
) -> None:
    checked = 0
    for name, table, wids, s in _corpus_cases(corpus_dir, tmp_path):
        r = sp.read.format("acidtable").option("includeRowId", "true")
        if wids:
            r = r.option("validWriteIds", wids)
        df = r.load(str(table))
        got = [row.asDict(recursive=True) for row in df.collect()]
        expect = s["expect"]
        if "row_count" in expect:
            assert len(got) == expect["row_count"], name
        py = read_path(table, write_ids=wids, include_row_id=True)
        key = [c for c in py.schema.names if c != "row__id"]
        # The same rows as the Python reader, whose results test_corpus checks in full.
        assert sorted(got, key=lambda x: json.dumps(x, default=str, sort_keys=True)) == sorted(
            py.to_pylist(), key=lambda x: json.dumps(x, default=str, sort_keys=True)
        ), name
        for field in ("deleted_ids", "absent_nationkeys"):
            if field in expect:
                col = "id" if field == "deleted_ids" else "n_nationkey"
                assert not {g[col] for g in got} & set(expect[field]), name
        if "ids" in expect:
            assert sorted(g["id"] for g in got) == expect["ids"], name
        if "rows" in expect and name.startswith("apache-impala/streaming"):
            assert [[g[k] for k in key] for g in got] == expect["rows"], name
        if "rows" in expect and name == "trinodb-trino/orcFileWithoutRowGroupInfo":
            want = [
                {"row__id": {"writeid": o, "bucketid": b, "rowid": r}, **row}
                for _op, o, b, r, _c, row in expect["rows"]
            ]
            assert got == want, name
        if "surviving_originalTransaction" in expect:
            survivors = sorted(g["row__id"]["writeid"] for g in got)
            assert survivors == expect["surviving_originalTransaction"], name
        checked += 1
    assert checked == 15
    # The negative case: a file without hive.acid.version where only ACID files may be.
    s = json.loads((corpus_dir / "trinodb-trino/acid_version_validation/expected.json").read_text())
    bad = next(x for x in s["scenarios"] if x["id"] == "missing_acid_version_rejected")
    from tests.acid.orc_builders import place

    table = tmp_path / "bad"
    place(
        corpus_dir / "trinodb-trino/acid_version_validation" / bad["file"],
        table / "delta_0000001_0000002/bucket_00000",
    )
    phrase = bad["expect"]["error"].split(" but ")[0]
    with pytest.raises(Exception, match=phrase):
        sp.read.format("acidtable").load(str(table)).collect()
