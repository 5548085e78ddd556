"""AcidSink on local Spark: exactly-once micro-batches, replays, bad records, partitions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acidstream.sinks.foreach_batch import AcidSink, SinkOptions, committed_offsets
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnState, TxnStore, open_store
from tests.ingest.conftest import snapshot_read

pytestmark = pytest.mark.spark


@pytest.fixture
def env(tmp_path: Path, store_url: str) -> Iterator[dict[str, Any]]:
    """A partitioned table in a metastore on each backend (SQLite, PostgreSQL)."""
    wh = tmp_path / "wh"
    url = store_url
    store = open_store(url, warehouse=str(wh))
    store.create_table(
        TableDef(db="default", name="ev", columns=(("id", "int"), ("msg", "string")),
                 partition_keys=(("ds", "string"),), parameters={"transactional": "true"})
    )  # fmt: skip
    yield {"url": url, "wh": str(wh), "store": store, "tmp": tmp_path}
    store.close()


def _df(spark: Any, ids: list[int], *, bad: list[str] = ()) -> Any:  # type: ignore[assignment]
    vals = [json.dumps({"id": i, "msg": f"m{i}", "ds": f"d{i % 3}"}) for i in ids] + list(bad)
    return spark.createDataFrame([(v.encode(),) for v in vals], "value binary").repartition(3)


def _ids(store: TxnStore) -> list[int]:
    t = store.get_table("default", "ev")
    return sorted(snapshot_read(store, t).column("id").to_pylist())


@pytest.mark.parametrize("txns_per_batch", [1, 3])
def test_micro_batches_commit_once_and_replays_are_skipped(
    spark: Any, env: dict[str, Any], txns_per_batch: int
) -> None:
    sink = AcidSink(table="ev", metastore=env["url"], warehouse=env["wh"],
                    options=SinkOptions(sink_id="s1", txns_per_batch=txns_per_batch))  # fmt: skip
    sink(_df(spark, list(range(100))), 0)
    sink(_df(spark, list(range(100, 150))), 1)
    sink(_df(spark, list(range(100, 150))), 1)  # Spark replays batch 1 after a restart
    sink(_df(spark, list(range(0, 100))), 0)  # and an even older one
    assert sink.batches_committed == 2 and sink.batches_skipped == 2
    store: TxnStore = env["store"]
    assert _ids(store) == list(range(150))
    meta = committed_offsets("ev", sink_id="s1", metastore=env["url"], warehouse=env["wh"])
    assert meta is not None and meta["batch_id"] == 1 and meta["rows"] == 50
    parts = sorted(p.name for p in store.list_partitions("default", "ev"))
    assert parts == ["ds=d0", "ds=d1", "ds=d2"]
    # One statement id per task, so ROW__IDs never collide within a partition.
    t = store.get_table("default", "ev")
    rows = snapshot_read(store, t, include_row_id=True).to_pylist()
    keys = [
        (r["ds"], r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"])
        for r in rows
    ]
    assert len({k[2] for k in keys}) > 1  # several tasks, several statement ids
    assert len(set(keys)) == len(keys) == 150
    # Two batches of k txns each: write ids 1..2k, every txn of both committed.
    assert {k[1] for k in keys} == set(range(1, 2 * txns_per_batch + 1))
    assert [t.state for t in store.show_txns()] == [TxnState.COMMITTED] * 2 * txns_per_batch
    assert meta["write_ids"] == [txns_per_batch + 1, 2 * txns_per_batch]
    sink.close()


def test_each_task_file_is_a_streaming_file_of_the_transaction_batch(
    spark: Any, env: dict[str, Any], jvm_orc: Any
) -> None:
    k = 4
    sink = AcidSink(table="ev", metastore=env["url"], warehouse=env["wh"],
                    options=SinkOptions(txns_per_batch=k))  # fmt: skip
    sink(_df(spark, list(range(300))), 0)
    stats = sink.last_batch_stats
    assert stats["write_ids"] == [1, k] and len(stats["txn_ids"]) == k
    store: TxnStore = env["store"]
    assert _ids(store) == list(range(300))
    files = stats["flush_lengths"]
    assert len(files) == stats["files"] >= 3  # 3 partitions x the tasks that had rows for them
    assert not list(Path(env["wh"]).rglob("*_flush_length"))  # removed when each file closed
    for path, lengths in files.items():
        assert Path(path).parent.name.startswith("delta_0000001_0000004_")
        assert len(lengths) == k and lengths == sorted(lengths)
        # ORC Java (Hive's reader) opens the file at each txn boundary: the rows of txns
        # 1..i, their rowIds restarting at 0 per write id, and the ACID metadata.
        whole = jvm_orc.read(path, max_length=None)
        per_txn = []
        for length in lengths:
            got = jvm_orc.read(path, max_length=length)
            per_txn.append(got["rows"] - sum(per_txn))
            assert got["metadata"]["hive.acid.stats"].startswith(f"{got['rows']},0,0")
        assert sum(per_txn) == whole["rows"]
        assert max(per_txn) - min(per_txn) <= 1  # the task's rows spread evenly over the txns
    rows = snapshot_read(store, store.get_table("default", "ev"), include_row_id=True).to_pylist()
    by_wid: dict[int, int] = {}
    for r in rows:
        by_wid[r["row__id"]["writeid"]] = by_wid.get(r["row__id"]["writeid"], 0) + 1
    assert sorted(by_wid) == [1, 2, 3, 4] and sum(by_wid.values()) == 300
    sink.close()


def test_sink_tasks_write_the_tables_orc_codec(
    spark: Any, tmp_path: Path, store_url: str, jvm_orc: Any
) -> None:
    """``orc.compress`` reaches the executor tasks (the driver applies it to the plan);
    a codec the writers cannot produce fails the sink before any txn opens."""
    import pyarrow.orc as pa_orc

    from acidstream.acid.errors import ConfigError

    wh = str(tmp_path / "wh")
    with open_store(store_url, warehouse=wh) as store:
        for name, codec in (("z", "ZSTD"), ("l", "ZLIB")):
            store.create_table(
                TableDef(db="default", name=name, columns=(("id", "int"), ("msg", "string")),
                         parameters={"transactional": "true", "orc.compress": codec})
            )  # fmt: skip
        # A table Hive created with LZ4 (readable, not writable here): the catalog refuses
        # LZ4 at create, so it is stored behind the catalog's back.
        store.set_table_param("default", "l", "orc.compress", "LZ4")
        sink = AcidSink(table="z", metastore=store_url, warehouse=wh,
                        options=SinkOptions(txns_per_batch=2))  # fmt: skip
        sink(_df(spark, list(range(200))), 0)
        files = sink.last_batch_stats["flush_lengths"]
        assert files
        for path, lengths in files.items():
            assert pa_orc.ORCFile(path).compression == "ZSTD"
            assert jvm_orc.read(path, max_length=lengths[0])["rows"] > 0
        sink.close()
        got = snapshot_read(store, store.get_table("default", "z")).column("id").to_pylist()
        assert sorted(got) == list(range(200))
        bad = AcidSink(table="l", metastore=store_url, warehouse=wh, options=SinkOptions())
        with pytest.raises(ConfigError, match="LZ4 can be read but not written"):
            bad(_df(spark, [1]), 0)
        # Refused before any txn: only the two committed txns of the ZSTD sink exist.
        assert [t.state for t in store.show_txns()] == [TxnState.COMMITTED] * 2


def test_a_failed_transaction_batch_aborts_every_txn_and_deletes_its_files(
    spark: Any, env: dict[str, Any]
) -> None:
    sink = AcidSink(table="ev", metastore=env["url"], warehouse=env["wh"],
                    options=SinkOptions(txns_per_batch=3))  # fmt: skip
    with pytest.raises(Exception, match="bad record"):
        sink(_df(spark, list(range(30)), bad=["{oops"]), 0)
    store: TxnStore = env["store"]
    assert [t.state for t in store.show_txns()] == [TxnState.ABORTED] * 3
    assert not list(Path(env["wh"]).rglob("delta_*"))
    assert _ids(store) == []
    sink(_df(spark, list(range(30))), 0)
    assert _ids(store) == list(range(30))
    sink.close()


def test_a_failed_batch_waits_for_its_other_tasks_before_deleting(
    spark: Any, env: dict[str, Any]
) -> None:
    """One task fails at once on a bad record while another is still computing its input
    (slow upstream): the failed batch cancels and waits for the straggler, so no file of
    the aborted batch appears after the cleanup."""
    from pyspark.sql.functions import col, udf

    @udf("binary")
    def slow(v: bytes) -> bytes:
        if b'"slow"' in v:
            import time

            time.sleep(2.0)  # the straggler: its file would land after the driver's cleanup
        return v

    good = [json.dumps({"id": i, "msg": "slow", "ds": "d0"}).encode() for i in range(5)]
    fast = spark.createDataFrame([(b"{oops",)], "value binary").repartition(1)
    straggler = spark.createDataFrame([(v,) for v in good], "value binary").repartition(1)
    df = fast.union(straggler.select(slow(col("value")).alias("value")))
    sink = AcidSink(table="ev", metastore=env["url"], warehouse=env["wh"])
    with pytest.raises(Exception, match="bad record"):
        sink(df, 0)
    tracker = spark.sparkContext.statusTracker()
    # A failed stage leaves the active list at once, while its killed tasks may still
    # run: count the running tasks of every stage Spark still knows.
    running = [
        (sid, info.numActiveTasks)
        for sid in range(2000)
        if (info := tracker.getStageInfo(sid)) is not None and info.numActiveTasks
    ]
    assert running == []  # nothing of the failed batch runs any more...
    assert not list(Path(env["wh"]).rglob("delta_*"))  # ...and nothing of it is left
    sink.close()


def test_bad_record_fails_the_batch_and_leaves_nothing_visible(
    spark: Any, env: dict[str, Any]
) -> None:
    sink = AcidSink(table="ev", metastore=env["url"], warehouse=env["wh"])
    with pytest.raises(Exception, match="bad record"):
        sink(_df(spark, list(range(10)), bad=["{oops"]), 0)
    store: TxnStore = env["store"]
    assert _ids(store) == []
    assert all(t.state == TxnState.ABORTED for t in store.show_txns())
    # The failed batch's files are gone: no delta directory of its write id remains.
    assert not list(Path(env["wh"]).rglob("delta_*"))
    sink(_df(spark, list(range(10))), 0)  # the retry of the same batch id commits
    assert _ids(store) == list(range(10))
    sink.close()


def test_bad_records_go_to_the_dead_letter_path(spark: Any, env: dict[str, Any]) -> None:
    dl = env["tmp"] / "dead"
    sink = AcidSink(table="ev", metastore=env["url"], warehouse=env["wh"],
                    options=SinkOptions(dead_letter_path=str(dl)))  # fmt: skip
    sink(_df(spark, list(range(20)), bad=["{oops", '{"id": "x"}']), 0)
    assert _ids(env["store"]) == list(range(20))
    lines = [json.loads(x) for f in dl.glob("*.jsonl") for x in f.read_text().splitlines()]
    assert sorted(x["record"] for x in lines) == ['{"id": "x"}', "{oops"]
    assert all(x["reason"] for x in lines)
    assert sink.last_batch_stats["bad_records"] == 2
    sink.close()


def test_stale_txn_of_a_dead_driver_is_aborted_and_its_files_deleted(
    spark: Any, env: dict[str, Any]
) -> None:
    store: TxnStore = env["store"]
    sink = AcidSink(table="ev", metastore=env["url"], warehouse=env["wh"])
    # A previous driver opened a txn and wrote files, then died before committing.
    txns = store.open_txns(2, user="u", host="h", agent_info=sink.agent)
    wids = store.allocate_write_ids(txns, "default", "ev")
    lo, hi = wids[txns[0]], wids[txns[1]]
    stale_dir = Path(env["wh"]) / "ev" / "ds=d0" / f"delta_{lo:07d}_{hi:07d}_0000"
    stale_dir.mkdir(parents=True)
    (stale_dir / "bucket_00000").write_bytes(b"partial")
    (stale_dir / "bucket_00000_flush_length").write_bytes(b"\0" * 8)
    # A directory that holds a committed write id too is never deleted.
    (other,) = store.open_txns(1, user="u", host="h")
    ow = store.allocate_write_ids([other], "default", "ev")[other]
    store.commit_txn(other)
    kept = Path(env["wh"]) / "ev" / "ds=d0" / f"delta_{lo:07d}_{ow:07d}_0001"
    kept.mkdir(parents=True)
    sink(_df(spark, [1, 2, 3]), 0)
    assert [store.txn_state(t) for t in txns] == [TxnState.ABORTED] * 2
    assert not stale_dir.exists()
    assert kept.exists()
    kept.rmdir()
    assert _ids(store) == [1, 2, 3]
    sink.close()


def test_sink_options_are_parsed_once_with_clear_errors() -> None:
    o = SinkOptions.from_options(
        {"format": "delimited", "delimiter": "|", "sink.id": "a1", "skipBadRecords": "true"}
    )
    assert (o.format, o.delimiter, o.sink_id, o.skip_bad_records) == ("delimited", "|", "a1", True)
    with pytest.raises(Exception, match="unknown sink option"):
        SinkOptions.from_options({"nope": "1"})
    with pytest.raises(Exception, match="format"):
        SinkOptions(format="xml")
    with pytest.raises(Exception, match="sink_id"):
        SinkOptions(sink_id="a b")
    assert SinkOptions.from_options({"txnsPerBatch": "10"}).txns_per_batch == 10
    with pytest.raises(Exception, match=r"txns_per_batch must be 1\.\.1000"):
        SinkOptions(txns_per_batch=0)
    with pytest.raises(Exception, match="txnsPerBatch must be an integer"):
        SinkOptions.from_options({"txnsPerBatch": "many"})


def test_raw_format_stores_the_value_as_is(spark: Any, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    url = f"sqlite:///{wh}/metastore.db"
    store = open_store(url, warehouse=str(wh))
    try:
        t = store.create_table(
            TableDef(
                db="default",
                name="raw",
                columns=(("line", "string"),),
                parameters={"transactional": "true"},
            )
        )
        sink = AcidSink(
            table="raw", metastore=url, warehouse=str(wh), options=SinkOptions(format="raw")
        )
        lines = ["plain text", '{"not": "parsed"}', "ünïcode"]
        sink(spark.createDataFrame([(x.encode(),) for x in lines], "value binary"), 0)
        sink.close()
        assert sorted(snapshot_read(store, t).column("line").to_pylist()) == sorted(lines)
    finally:
        store.close()


def _terminate_backend_at(store: TxnStore, step: str) -> list[int]:
    """Kill the sink's PostgreSQL connection at a step of its commit (once); returns how
    many backends were terminated."""
    import psycopg

    from acidstream.acid import faults
    from tests.plugins.store_fixture import PG_URL

    fired: list[int] = []

    def hook(name: str) -> None:
        if name == step and not fired:
            with psycopg.connect(PG_URL, autocommit=True) as admin:
                # the committing connection is the one inside a transaction right now
                rows = admin.execute(
                    "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND state = 'idle in transaction'"
                ).fetchall()
            fired.append(sum(1 for (ok,) in rows if ok))

    faults.set_hook(hook)
    return fired


@pytest.mark.postgres
def test_connection_killed_during_commit_is_rechecked_not_assumed_failed(
    spark: Any, env: dict[str, Any], store_url: str
) -> None:
    if not store_url.startswith("postgresql"):
        pytest.skip("pg_terminate_backend needs the PostgreSQL backend")
    from acidstream.acid import faults

    sink = AcidSink(table="ev", metastore=env["url"], warehouse=env["wh"],
                    options=SinkOptions(txns_per_batch=2))  # fmt: skip
    fired = _terminate_backend_at(env["store"], "commit_txns.before_commit")
    try:
        sink(_df(spark, list(range(40))), 0)  # COMMIT lost: the sink asks the metastore
    finally:
        faults.set_hook(None)
    assert fired == [1]  # exactly the committing connection was killed
    assert _ids(env["store"]) == list(range(40))  # committed once, files kept
    assert sink.batches_committed == 1
    sink.close()


def test_a_commit_that_landed_but_whose_reply_was_lost_keeps_its_files(
    spark: Any, env: dict[str, Any]
) -> None:
    from acidstream.acid import faults
    from acidstream.acid.errors import CommitStateUnknownError

    def lost_reply(step: str) -> None:
        if step == "commit_txns.after_commit":
            raise CommitStateUnknownError("reply lost after COMMIT (injected)")

    sink = AcidSink(table="ev", metastore=env["url"], warehouse=env["wh"],
                    options=SinkOptions(txns_per_batch=3))  # fmt: skip
    faults.set_hook(lost_reply)
    try:
        sink(_df(spark, list(range(30))), 0)
    finally:
        faults.set_hook(None)
    store: TxnStore = env["store"]
    assert [t.state for t in store.show_txns()] == [TxnState.COMMITTED] * 3
    assert _ids(store) == list(range(30))  # nothing deleted, nothing doubled
    sink(_df(spark, list(range(30))), 0)  # Spark's replay of the batch is skipped
    assert _ids(store) == list(range(30)) and sink.batches_skipped == 1
    sink.close()


def test_an_unknown_outcome_the_metastore_cannot_settle_deletes_nothing(
    spark: Any, env: dict[str, Any]
) -> None:
    from acidstream.acid import faults
    from acidstream.acid.errors import CommitStateUnknownError

    def always_unknown(step: str) -> None:
        if step == "commit_txns.before_commit":
            raise CommitStateUnknownError("connection lost during COMMIT (injected)")

    sink = AcidSink(table="ev", metastore=env["url"], warehouse=env["wh"],
                    options=SinkOptions(txns_per_batch=2))  # fmt: skip
    faults.set_hook(always_unknown)
    try:
        with pytest.raises(CommitStateUnknownError):
            sink(_df(spark, list(range(20))), 0)
    finally:
        faults.set_hook(None)
    assert list(Path(env["wh"]).rglob("delta_*"))  # the files stay for recovery to decide
    sink.close()
    # the next run asks the metastore: the txns never committed, so it cleans up and redoes
    sink2 = AcidSink(table="ev", metastore=env["url"], warehouse=env["wh"],
                     options=SinkOptions(txns_per_batch=2))  # fmt: skip
    sink2(_df(spark, list(range(20))), 0)
    assert _ids(env["store"]) == list(range(20))
    sink2.close()
