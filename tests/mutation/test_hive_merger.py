"""Hive's own reader over mutated tables: Hive 2.3's ``OrcRawRecordMerger`` (through the
public ``OrcInputFormat.getRawReader``, from the hive-exec jar in PySpark's wheel) merges
the deltas and delete deltas DELETE, UPDATE and MERGE wrote, bucket by bucket, and sees
exactly the rows and ROW__IDs acidstream's reader sees."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import acidstream
from acidstream import Table
from tests.ingest.conftest import MakeTable
from tests.mutation.conftest import Insert

pytestmark = pytest.mark.spark

LONG_MAX = 2**63 - 1


def _hive_rows(
    spark: Any, part_dir: Path, bucket: int, columns: str, types: str
) -> list[tuple[Any, ...]]:
    """``(id, v, (writeid, bucket property, rowid))`` of every live row Hive's merger
    returns for one bucket of one partition (collapsed: the newest event per ROW__ID;
    delete events hide their row)."""
    jvm = spark._jvm
    gw = spark.sparkContext._gateway
    conf = jvm.org.apache.hadoop.conf.Configuration()
    for k, v in [("columns", columns), ("columns.types", types)]:
        conf.set(k, v)
        conf.set(f"schema.evolution.{k}", v)
    dirs = sorted(
        d for d in part_dir.iterdir() if d.is_dir() and (d / f"bucket_{bucket:05d}").exists()
    )
    paths = gw.new_array(jvm.org.apache.hadoop.fs.Path, len(dirs))
    for i, d in enumerate(dirs):
        paths[i] = jvm.org.apache.hadoop.fs.Path(str(d))
    # Hive 2.3 knows txn ids, not write ids: every id on disk is below this high-water mark.
    txns = jvm.org.apache.hadoop.hive.common.ValidReadTxnList(f"1000:{LONG_MAX}:")
    reader = jvm.org.apache.hadoop.hive.ql.io.orc.OrcInputFormat().getRawReader(
        conf, True, bucket, txns, None, paths
    )
    key, value = reader.createKey(), reader.createValue()
    out = []
    try:
        while reader.next(key, value):
            if reader.isDelete(value):
                continue
            row = value.getFieldValue(5)
            v = row.getFieldValue(1)
            out.append(
                (
                    row.getFieldValue(0).get(),
                    None if v is None else v.toString(),
                    (key.getTransactionId(), key.getBucketId(), key.getRowId()),
                )
            )
    finally:
        reader.close()
    return out


def test_hive_23_merger_reads_a_mutated_table(
    make_table: MakeTable,
    insert: Insert,
    handle: Callable[[str], Table],
    spark: Any,
    store_url: str,
    warehouse: str,
) -> None:
    make_table("h", "id int, v string", partitioned_by=[("ds", "string")], buckets=("id", 2))
    insert("h", [{"id": i, "v": f"v{i}", "ds": "a" if i < 20 else "b"} for i in range(30)])
    t = handle("h")
    t.delete(pc.field("id").isin([3, 4, 25]))
    t.update({"v": pc.scalar("u")}, pc.field("id") >= 27)
    t.update({"ds": pc.scalar("b")}, pc.field("id") == 7)  # moves a row between partitions
    src = pa.table({"id": pa.array([1, 2, 26, 100], pa.int32()), "v": ["m1", "m2", "m26", "m100"],
                    "ds": ["a", "a", "b", "b"], "op": ["u", "d", "u", "i"]})  # fmt: skip
    (
        t.merge(src, on=["id"])
        .when_matched_delete(condition=pc.field("src.op") == "d")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    root = Path(warehouse) / "h"
    hive = []
    for ds in ("a", "b"):
        for b in (0, 1):
            hive += [
                (i, v, ds, rid)
                for i, v, rid in _hive_rows(spark, root / f"ds={ds}", b, "id,v", "int:string")
            ]
    ours = acidstream.read_table(
        "default.h", metastore=store_url, warehouse=warehouse, include_row_id=True
    )
    mine = [
        (i, v, ds, (r["writeid"], r["bucketid"], r["rowid"]))
        for i, v, ds, r in zip(
            *(ours.column(c).to_pylist() for c in ["id", "v", "ds", "row__id"]), strict=True
        )
    ]
    assert sorted(hive) == sorted(mine)
    ids = sorted(i for i, *_ in hive)
    assert ids == sorted([i for i in range(30) if i not in (2, 3, 4, 25)] + [100])
    assert {(i, v, ds) for i, v, ds, _ in hive} >= {
        (1, "m1", "a"),
        (7, "v7", "b"),
        (26, "m26", "b"),
        (28, "u", "b"),
    }
