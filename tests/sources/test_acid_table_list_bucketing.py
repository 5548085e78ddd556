"""The ``acidtable`` Spark source on a list-bucketed table: every directory read, and pushed
``=`` / ``IN`` / ``NOT`` filters skip the list-bucketing directories they cannot need."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acidstream.acid.list_bucketing import DEFAULT_DIR_NAME
from acidstream.ingest.connection import StreamingConnection
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.sources.acid_table import AcidTableSource
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import open_store
from tests.list_bucketing_tables import SKEW, make_lb_table

pytestmark = pytest.mark.spark


@pytest.fixture
def env(store_url: str, tmp_path: Path) -> Any:
    """A list-bucketed table ``default.t`` (partition ``p=a``, two txns) on both backends."""
    wh = str(tmp_path / "wh")
    store = open_store(store_url, warehouse=wh)
    t = make_lb_table(store)
    with StreamingConnection("t", record_writer=StrictJsonWriter(), store=store) as c:
        for w in range(2):
            c.begin_transaction()
            c.write_rows([(x, f"{w}-{x}") for x in (6, 6, 20, 7, None)], partition=["a"])
            c.commit_transaction()
    yield store_url, wh, Path(str(t.location))
    store.close()


@pytest.fixture(scope="module")
def sp(spark: Any) -> Any:
    spark.dataSource.register(AcidTableSource)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    yield spark
    spark.conf.unset("spark.sql.python.filterPushdown.enabled")


def _rows(sp: Any, env: Any, where: str) -> list[tuple[Any, str]]:
    url, wh, _ = env
    df = (
        sp.read.format("acidtable")
        .option("metastore", url)
        .option("warehouse", wh)
        .option("filterPushdown", "true")
        .load("default.t")
        .where(where)
    )
    return sorted(((r.x if r.x is not None else -1), r.s) for r in df.collect())


def _spoil(table_dir: Path, lb_dir: str) -> int:
    """Make every bucket file of ``lb_dir`` unreadable: a read that opens one fails."""
    n = 0
    for f in table_dir.rglob("bucket_*"):
        if f.parent.name == lb_dir and not f.name.endswith("_flush_length"):
            f.write_bytes(b"not an orc file" * 10)
            n += 1
    return n


def test_pushed_filters_skip_list_bucketing_dirs(sp: Any, env: Any) -> None:
    cases = ["x = 6", "x != 20", "x in (6, 20)", "x = 7"]
    want = {w: _rows(sp, env, w) for w in cases}  # every directory intact: the reference
    assert want["x = 6"] == [(6, "0-6"), (6, "0-6"), (6, "1-6"), (6, "1-6")]
    assert sorted(want["x != 20"]) == sorted(want["x = 6"] + want["x = 7"])
    assert _spoil(env[2], "x=20") == 2
    # Reads that need no x=20 directory equal the intact reads.
    assert _rows(sp, env, "x = 6") == want["x = 6"]
    assert _rows(sp, env, "x != 20") == want["x != 20"]
    with pytest.raises(Exception, match=r"(?i)orc"):  # it opens a spoiled file
        _rows(sp, env, "x in (6, 20)")
    assert _spoil(env[2], DEFAULT_DIR_NAME) == 2
    assert _rows(sp, env, "x = 6") == want["x = 6"]
    with pytest.raises(Exception, match=r"(?i)orc"):
        _rows(sp, env, "x = 7")


def test_stream_reads_location_map_dirs_and_batch_prunes_them(
    store_url: str, tmp_path: Path
) -> None:
    """A declared tuple stored under a location-map directory (``hot/6``, neither ``k=v``
    nor the default name): the streaming planner and the batch planner find its files."""
    import pyarrow as pa

    from acidstream.acid.errors import AcidFormatError

    wh = str(tmp_path / "wh")
    store = open_store(store_url, warehouse=wh)
    try:
        store.create_table(
            TableDef(
                db="default", name="m", columns=(("x", "int"), ("s", "string")),
                partition_keys=(("p", "string"),), parameters={"transactional": "true"},
                skewed=SKEW,
            )
        )  # fmt: skip
        store.set_skewed_location("default", "m", ("6",), "hot/6")
        with StreamingConnection("m", record_writer=StrictJsonWriter(), store=store) as c:
            c.begin_transaction()
            c.write_rows([(6, "a"), (7, "b"), (20, "c")], partition=["a"])
            c.commit_transaction()
        loc = Path(str(store.get_table("default", "m").location))
        assert list(loc.glob("p=a/delta_*/hot/6/bucket_00000"))
        opts = {"path": "default.m", "metastore": store_url, "warehouse": wh}
        source = AcidTableSource(opts)
        r = source.streamReader(source.schema())
        start = r.initialOffset()
        end = r.latestOffset(start, r.getDefaultReadLimit())
        got = pa.Table.from_batches([b for p in r.partitions(start, end) for b in r.read(p)])
        assert sorted(got.column("s").to_pylist()) == ["a", "b", "c"]
        r.stop()
        # Batch: x = 6 reads only hot/6 (the other directories are spoiled), x = 7 fails.
        _spoil(loc, "x=20")
        _spoil(loc, DEFAULT_DIR_NAME)
        batch = AcidTableSource({**opts, "filterPushdown": "true"})
        schema = batch.schema()
        from pyspark.sql.datasource import EqualTo

        for value, ok in ((6, True), (7, False)):
            reader = batch.reader(schema)
            list(reader.pushFilters([EqualTo(("x",), value)]))  # type: ignore[attr-defined]
            if ok:
                rows = [b for p in reader.partitions() for b in reader.read(p)]
                assert sorted(pa.Table.from_batches(rows).column("x").to_pylist()) == [6]
            else:
                with pytest.raises(AcidFormatError):
                    [b for p in reader.partitions() for b in reader.read(p)]
    finally:
        store.close()
