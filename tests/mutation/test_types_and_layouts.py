"""Mutations keep every Hive type of the rows they rewrite (an updated row's other columns
come back exactly), and a list-bucketed table's new versions go to their list-bucketing
directories, its delete events hiding rows in any of them. Both metastore backends."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow.compute as pc

from acidstream import Table
from acidstream.acid.schema import TableSchema
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore
from tests.list_bucketing_tables import make_lb_table
from tests.mutation.conftest import Insert, rows_of

COLS = (
    "id int, ts timestamp, dt date, dec decimal(10,3), vc varchar(5), ch char(4), b boolean, "
    "ti tinyint, d double, arr array<int>, m map<string,int>, st struct<a:int,b:string>"
)


def test_rewritten_rows_keep_every_type(
    store: TxnStore, insert: Insert, handle: Callable[[str], Table]
) -> None:
    sch = TableSchema.parse(COLS)
    store.create_table(
        TableDef(
            db="default", name="ty", columns=tuple((n, str(t)) for n, t in sch.columns),
            partition_keys=(("p", "int"),), parameters={"transactional": "true"},
        )
    )  # fmt: skip
    row = {
        "ts": "1850-01-02 03:04:05.123456", "dt": "1900-02-03", "dec": "12.345", "vc": "abc",
        "ch": "xy", "b": True, "ti": -7, "d": 0.1, "arr": [1, None], "m": {"k": 1},
        "st": {"a": 1, "b": "s"},
    }  # fmt: skip
    insert("ty", [{"id": i, **row, "p": i % 2} for i in range(4)])
    t = handle("ty")
    before = {r["id"]: r for r in t.read().to_pylist()}
    t.update({"ti": "CAST(ti + 1 AS tinyint)"}, "id = 1")
    t.update({"p": "'5'"}, "id = 2")  # moves the row to partition p=5
    src = t.read().filter(pc.field("id") == 3).drop_columns(["p"])
    assert t.merge(src, on="id").when_matched_update_all().execute().rows_updated == 1
    after = {r["id"]: r for r in t.read().to_pylist()}
    assert after[0] == before[0] and after[3] == before[3]
    assert after[1] == {**before[1], "ti": -6}
    assert after[2] == {**before[2], "p": "5"}


def test_list_bucketed_partitions(
    store: TxnStore, handle: Callable[[str], Table], warehouse: str
) -> None:
    make_lb_table(store)
    with StreamingConnection(
        "t", record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(housekeeping_interval_s=None),
    ) as c:  # fmt: skip
        c.begin_transaction()
        c.write_many(json.dumps({"x": x, "s": f"s{x}", "p": "a"}).encode() for x in (1, 6, 20, 21))
        c.commit_transaction()
    t = handle("t")
    assert t.delete("x = 6").rows_deleted == 1  # a row in the x=6 directory
    t.update({"x": "20"}, "x = 1")  # the new version goes to the x=20 directory
    t.update({"s": "'z'"}, "x = 21")  # stays in the default directory
    assert rows_of(t.read(), ["x", "s"]) == [(20, "s1"), (20, "s20"), (21, "z")]
    new = Path(warehouse) / "t" / "p=a" / "delta_0000003_0000003_0000"
    assert sorted(str(f.relative_to(new)) for f in new.rglob("bucket_*")) == ["x=20/bucket_00000"]
    new = Path(warehouse) / "t" / "p=a" / "delta_0000004_0000004_0000"
    files = sorted(str(f.relative_to(new)) for f in new.rglob("bucket_*"))
    assert len(files) == 1 and files[0].startswith("HIVE_DEFAULT_LIST_BUCKETING_DIR_NAME")
