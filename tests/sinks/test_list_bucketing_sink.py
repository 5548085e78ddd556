"""AcidSink (and the Spark compaction engine) into list-bucketed tables on local Spark: each
executor task routes its rows into list-bucketing directories inside its delta, the
driver ships each partition's own skew, and ORC Java (Hive's reader) reads every file."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.orc as pa_orc
import pytest

from acidstream.acid.list_bucketing import DEFAULT_DIR_NAME, SkewedInfo
from acidstream.compaction import Worker
from acidstream.sinks.foreach_batch import AcidSink, SinkOptions
from acidstream.txn.catalog import TableDef
from acidstream.txn.compaction_sql import READY_FOR_CLEANING, CompactionQueue
from acidstream.txn.store import TxnStore, open_store
from tests.ingest.conftest import snapshot_read

pytestmark = pytest.mark.spark

SKEW = SkewedInfo(col_names=("k",), col_values=(("6",), ("20",)), stored_as_dirs=True)


@pytest.fixture
def env(tmp_path: Path, store_url: str) -> Iterator[dict[str, Any]]:
    """A partitioned table whose partition ds=old exists before the table is skewed."""
    wh = tmp_path / "wh"
    store = open_store(store_url, warehouse=str(wh))
    store.create_table(
        TableDef(
            db="default",
            name="ev",
            columns=(("k", "int"), ("msg", "string")),
            partition_keys=(("ds", "string"),),
            parameters={"transactional": "true"},
        )
    )
    store.add_partition("default", "ev", ["old"])
    store.set_skewed("default", "ev", SKEW)
    yield {"url": store_url, "wh": str(wh), "store": store}
    store.close()


def _df(spark: Any, rows: list[tuple[int, str]]) -> Any:
    vals = [json.dumps({"k": k, "msg": f"m{i}", "ds": ds}) for i, (k, ds) in enumerate(rows)]
    return spark.createDataFrame([(v.encode(),) for v in vals], "value binary").repartition(2)


def _data() -> list[tuple[int, str]]:
    return [((6, 20, 100 + i)[i % 3], "new" if i % 2 else "old") for i in range(60)]


def _files(root: Path) -> dict[str, int]:
    """Relative path of every bucket file -> rows (checking each holds its directory's k)."""
    out = {}
    for f in sorted(root.rglob("bucket_*")):
        ks = {r["k"] for r in pa_orc.read_table(str(f)).column("row").to_pylist()}
        lb = f.parent.name
        if lb.startswith("k="):
            assert ks == {int(lb[2:])}
        elif lb == DEFAULT_DIR_NAME:
            assert not ks & {6, 20}
        out[str(f.relative_to(root))] = pa_orc.ORCFile(str(f)).nrows
    return out


def test_sink_tasks_write_list_bucketing_dirs_readable_by_orc_java(
    spark: Any, env: dict[str, Any], jvm_orc: Any
) -> None:
    sink = AcidSink(
        table="ev",
        metastore=env["url"],
        warehouse=env["wh"],
        options=SinkOptions(txns_per_batch=2, skip_bad_records=True),
    )
    bad = json.dumps({"k": 6, "msg": "x", "ds": DEFAULT_DIR_NAME})
    df = _df(spark, _data()).union(spark.createDataFrame([(bad.encode(),)], "value binary"))
    sink(df, 0)
    assert sink.last_batch_stats["bad_records"] == 1
    store: TxnStore = env["store"]
    root = Path(env["wh"]) / "ev"
    new, old = _files(root / "ds=new"), _files(root / "ds=old")
    # ds=new (created by this batch): a file per (task, directory); ds=old: plain layout.
    assert {Path(p).parent.name for p in new} == {"k=6", "k=20", DEFAULT_DIR_NAME}
    assert all(Path(p).parent.name.startswith("delta_0000001_0000002_") for p in old)
    assert sum(new.values()) == 30 and sum(old.values()) == 30
    assert not list(root.rglob("*_flush_length"))
    for rel, n in {**{f"ds=new/{p}": n for p, n in new.items()},
                   **{f"ds=old/{p}": n for p, n in old.items()}}.items():  # fmt: skip
        got = jvm_orc.read(str(root / rel))
        assert got["rows"] == got["rows_read"] == n
        assert got["metadata"]["hive.acid.key.index"].count(";") == got["stripes"]
    rows = snapshot_read(store, store.get_table("default", "ev"), include_row_id=True)
    assert rows.num_rows == 60
    keys = Counter(
        (r["ds"], r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"])
        for r in rows.to_pylist()
    )
    assert max(keys.values()) == 1
    sink.close()


def test_a_table_no_longer_skewed_keeps_its_partitions_skew_without_listing_them(
    spark: Any, env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """NOT SKEWED after ds=new was created list-bucketed: the driver reads only the
    partitions with a skew of their own (never every partition, per micro-batch), and the
    tasks still route ds=new's rows into its directories, ds=old's and a fresh
    partition's into the plain layout."""
    store: TxnStore = env["store"]
    store.add_partition("default", "ev", ["new"])  # created while the table is skewed
    store.set_skewed("default", "ev", None)

    def no_listing(self: TxnStore, db: str, table: str) -> list[Any]:
        raise AssertionError(f"the sink listed every partition of {db}.{table}")

    monkeypatch.setattr(TxnStore, "list_partitions", no_listing)
    sink = AcidSink(
        table="ev", metastore=env["url"], warehouse=env["wh"],
        options=SinkOptions(txns_per_batch=2),
    )  # fmt: skip
    rows = [(k, ds) for k, ds in _data()] + [(6, "fresh"), (20, "fresh")]
    sink(_df(spark, rows), 0)
    sink.close()
    root = Path(env["wh"]) / "ev"
    new, old, fresh = (_files(root / f"ds={d}") for d in ("new", "old", "fresh"))
    assert {Path(p).parent.name for p in new} == {"k=6", "k=20", DEFAULT_DIR_NAME}
    for plain in (old, fresh):
        assert all(Path(p).parent.name.startswith("delta_0000001_0000002_") for p in plain)
    assert (sum(new.values()), sum(old.values()), sum(fresh.values())) == (30, 30, 2)
    monkeypatch.undo()
    assert snapshot_read(store, store.get_table("default", "ev")).num_rows == 62


def test_spark_compaction_engine_keeps_list_bucketing_dirs(
    spark: Any, env: dict[str, Any], jvm_orc: Any
) -> None:
    sink = AcidSink(table="ev", metastore=env["url"], warehouse=env["wh"],
                    options=SinkOptions(txns_per_batch=1))  # fmt: skip
    sink(_df(spark, _data()), 0)
    sink(_df(spark, _data()), 1)
    sink.close()
    store: TxnStore = env["store"]
    table = store.get_table("default", "ev")
    before = sorted(map(str, snapshot_read(store, table, include_row_id=True).to_pylist()))
    q = CompactionQueue(store)
    _, accepted = q.request("default", "ev", "ds=new", major=True)
    assert accepted
    out = Worker(store, queue=q, engine="spark", spark=spark).run_once()
    assert out is not None and out.state == READY_FOR_CLEANING, out
    base = Path(out.output_dirs[0])
    files = _files(base)
    assert {Path(p).parent.name for p in files} == {"k=6", "k=20", DEFAULT_DIR_NAME}
    assert sum(files.values()) == out.inserts == 60
    for rel, n in files.items():
        assert jvm_orc.read(str(base / rel))["rows"] == n
    after = sorted(map(str, snapshot_read(store, table, include_row_id=True).to_pylist()))
    assert after == before
