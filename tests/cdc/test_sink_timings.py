"""The upsert sink's split of a batch's time (``last_batch_stats``): the Spark job (Kafka
records read, parsed and brought to the driver) and ``apply_changes`` (key lookup, files,
commit), which ``benchmarks/cdc.py`` reports per run (issue 31: where our job's time goes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acidstream.sinks.foreach_batch import SinkOptions
from acidstream.sinks.upsert_sink import UpsertSink
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import open_store

pytestmark = pytest.mark.spark

KAFKA_SCHEMA = "key binary, value binary, topic string, partition int, offset long"


def _value(op: str, key: int, lsn: int) -> bytes:
    row = {"id": key, "v": f"{op}{lsn}"}
    return json.dumps(
        {"before": {"id": key} if op == "d" else None, "after": None if op == "d" else row,
         "op": op, "source": {"lsn": lsn, "ts_ms": 1_700_000_000_000 + lsn}}
    ).encode()  # fmt: skip


def test_batch_stats_split_the_spark_job_and_the_apply(
    spark: Any, tmp_path: Path, store_url: str
) -> None:
    wh = tmp_path / "wh"
    store = open_store(store_url, warehouse=str(wh))
    try:
        store.create_table(
            TableDef(db="default", name="cdc", columns=(("id", "int"), ("v", "string")),
                     parameters={"transactional": "true"})
        )  # fmt: skip
        sink = UpsertSink(
            table="cdc", metastore=store_url, warehouse=str(wh),
            options=SinkOptions(mode="upsert", format="debezium", key=("id",),
                                ordering="source.lsn", sink_id="timings"),
            lineage="L1",
        )  # fmt: skip
        ops = [("c", k, k) for k in range(40)] + [("u", 3, 100), ("d", 4, 101)]
        rows = [
            (b'{"id":%d}' % k, _value(op, k, lsn), "db.cdc", k % 2, i)
            for i, (op, k, lsn) in enumerate(ops)
        ]
        try:
            sink(spark.createDataFrame(rows, KAFKA_SCHEMA).repartition(2), 0)
        finally:
            sink.close()
        st = sink.last_batch_stats
        assert st["batch_id"] == 0 and st["events"] == len(ops) and st["inserted"] == 39
        spark_s, apply_s = st["spark_seconds"], st["apply_seconds"]
        assert isinstance(spark_s, float) and isinstance(apply_s, float)
        assert spark_s > 0 and apply_s > 0
        # Both are parts of the batch's time in the sink.
        assert spark_s + apply_s <= st["seconds"]
    finally:
        store.close()
