"""AcidSink on local Spark: exactly-once micro-batches, replays, bad records, partitions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sinks.foreach_batch import AcidSink, SinkOptions, committed_offsets
from tests.ingest.conftest import snapshot_read
from txn.catalog import TableDef
from txn.store import TxnState, TxnStore, open_store

pytestmark = pytest.mark.spark


@pytest.fixture
def env(tmp_path: Path) -> dict[str, Any]:
    wh = tmp_path / "wh"
    url = f"sqlite:///{wh}/metastore.db"
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


def test_micro_batches_commit_once_and_replays_are_skipped(spark: Any, env: dict[str, Any]) -> None:
    sink = AcidSink(
        table="ev", metastore=env["url"], warehouse=env["wh"], options=SinkOptions(sink_id="s1")
    )
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
    txn = store.open_txns(1, user="u", host="h", agent_info=sink.agent)[0]
    wid = store.allocate_write_ids([txn], "default", "ev")[txn]
    stale_dir = Path(env["wh"]) / "ev" / "ds=d0" / f"delta_{wid:07d}_{wid:07d}_0000"
    stale_dir.mkdir(parents=True)
    (stale_dir / "bucket_00000").write_bytes(b"partial")
    sink(_df(spark, [1, 2, 3]), 0)
    assert store.txn_state(txn) == TxnState.ABORTED
    assert not stale_dir.exists()
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
