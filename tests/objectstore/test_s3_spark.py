"""Spark on an ``s3://`` warehouse (moto's S3 server, local Spark): the ``foreachBatch``
sink's executor tasks write their files and dead letters to S3, and the ``acidtable`` source's
executors read them back, batch and streaming. The storage options reach the executors
pickled inside the sink's task plan and the source's read spec: this process (and so the
Python workers Spark starts) has no AWS variable, so nothing else could point them there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import acidstream
from acidstream.ingest.dead_letter import read_dead_letters
from acidstream.sinks.foreach_batch import AcidSink, SinkOptions
from acidstream.sources.acid_table import register
from acidstream.sources.acid_table_options import spark_storage_options
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import open_store
from tests.objectstore.s3_helpers import aws_pointers
from tests.plugins.s3_fixture import SECRET_KEY, S3Warehouse

pytestmark = [pytest.mark.s3, pytest.mark.spark]


def _df(spark: Any, ids: range, *, bad: tuple[str, ...] = ()) -> Any:
    vals = [json.dumps({"id": i, "msg": f"m{i}", "ds": f"d{i % 3}"}) for i in ids] + list(bad)
    return spark.createDataFrame([(v.encode(),) for v in vals], "value binary").repartition(3)


def test_the_sink_writes_and_the_acidtable_source_reads_on_s3(
    spark: Any, s3_warehouse: S3Warehouse, store_url: str, tmp_path: Path
) -> None:
    wh = s3_warehouse
    assert not aws_pointers()
    with open_store(store_url, warehouse=wh.url, storage_options=wh.storage_options) as s:
        s.create_table(
            TableDef(db="default", name="ev", columns=(("id", "int"), ("msg", "string")),
                     partition_keys=(("ds", "string"),), parameters={"transactional": "true"})
        )  # fmt: skip
    dead = f"s3://{wh.bucket}/dead_letters"
    sink = AcidSink(
        table="ev",
        metastore=store_url,
        warehouse=wh.url,
        storage_options=wh.storage_options,
        options=SinkOptions(sink_id="s3", dead_letter_path=dead, skip_bad_records=True),
    )
    assert SECRET_KEY not in repr(sink.config)
    sink(_df(spark, range(100), bad=("not json",)), 0)
    sink(_df(spark, range(100, 160)), 1)
    sink(_df(spark, range(100, 160)), 1)  # a replay: skipped
    assert (sink.batches_committed, sink.batches_skipped) == (2, 1)
    sink.close()
    assert [d.record for d in read_dead_letters(dead, storage_options=wh.storage_options)] == [
        b"not json"
    ]

    opts = {
        "metastore": store_url,
        "warehouse": wh.url,
        **spark_storage_options(wh.storage_options),
    }
    register(spark)
    df = spark.read.format("acidtable").options(**opts).load("default.ev")
    rows = df.collect()
    assert sorted(r["id"] for r in rows) == list(range(160))
    assert {r["ds"] for r in rows} == {"d0", "d1", "d2"}
    assert df.rdd.getNumPartitions() >= 3  # several executor tasks read files
    # The Table handle passes its options to the same source.
    t = acidstream.table(
        "ev", metastore=store_url, warehouse=wh.url, storage_options=wh.storage_options
    )
    assert t.spark(spark, columns=["id"], filter=[("ds", "=", "d1")]).count() == len(
        [i for i in range(160) if i % 3 == 1]
    )
    # Streaming: the source's micro-batch reads on the executors too.
    out = spark.readStream.format("acidtable").options(**opts).load("default.ev")
    q = (
        out.writeStream.format("memory")
        .queryName("s3_acidtable_stream")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(300)
    streamed = spark.sql("select id from s3_acidtable_stream").collect()
    assert sorted(r["id"] for r in streamed) == list(range(160))
