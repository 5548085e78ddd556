"""The Table handle (``acidstream.table``): schema, describe, reads and scans equal to the
committed rows, time travel, a held snapshot the Cleaner waits for, Spark on the same
snapshot; ``ReadOptions`` and the one ``read_table``. Both metastore backends."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import acidstream
from acidstream import ReadOptions, Table, acid, snapshot_read
from acidstream.acid.errors import ConfigError, TableNotFoundError, TransactionError
from acidstream.compaction import Cleaner, Worker
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.store import TxnState, TxnStore
from tests.ingest.conftest import MakeTable
from tests.list_bucketing_tables import SKEW, make_lb_table
from tests.txn.links_helpers import make_namespaces
from tests.txn.links_helpers import write as write_b


def _commit(store: TxnStore, ids: range, *, ds: str = "a", abort: bool = False) -> None:
    """One txn of rows ``{"id": i, "msg": "m<i>", "ds": ds}`` into ``default.t``."""
    with StreamingConnection(
        "t", record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(housekeeping_interval_s=None),
    ) as c:  # fmt: skip
        c.begin_transaction()
        c.write_many(b'{"id": %d, "msg": "m%d", "ds": "%s"}' % (i, i, ds.encode()) for i in ids)
        if abort:
            c.abort_transaction()
        else:
            c.commit_transaction()


def _ids(t: pa.Table) -> list[int]:
    return sorted(t.column("id").to_pylist())


@pytest.fixture
def events(store: TxnStore, make_table: MakeTable, store_url: str, warehouse: str) -> Table:
    """``default.t (id int, msg string)`` partitioned by ``ds``: write id 1 holds ids
    0..4 (ds=a), 2 is aborted (100..104), 3 holds 5..9 (ds=b)."""
    make_table("t", "id int, msg string", partitioned_by=[("ds", "string")])
    _commit(store, range(5))
    _commit(store, range(100, 105), abort=True)
    _commit(store, range(5, 10), ds="b")
    return acidstream.table("default.t", metastore=store_url, warehouse=warehouse)


def _model(ids: range | list[int]) -> list[tuple[int, str, str]]:
    return sorted((i, f"m{i}", "a" if i < 5 else "b") for i in ids)


def _rows(t: pa.Table) -> list[tuple[Any, ...]]:
    cols = [t.column(n).to_pylist() for n in t.column_names]
    return sorted(zip(*cols, strict=True))


# ------------------------------------------------------------------ reads


def test_read_and_scan_equal_the_committed_rows(events: Table) -> None:
    got = events.read()
    assert _rows(got) == _model(range(10))  # the aborted txn's rows are absent
    assert got.schema == events.schema
    assert events.schema.names == ["id", "msg", "ds"]  # partition column included
    batches = list(events.scan())
    assert batches and all(isinstance(b, pa.RecordBatch) for b in batches)
    assert _rows(pa.Table.from_batches(batches)) == _model(range(10))


def test_columns_and_filters(events: Table) -> None:
    got = events.read(columns=["ds", "msg", "ID"])
    assert got.column_names == ["msg", "id", "ds"]  # the reader's order: partition columns last
    assert events.read(filter=[("id", ">=", 7)]).column("id").to_pylist() == [7, 8, 9]
    assert _ids(events.read(filter=("ds", "=", "a"))) == [0, 1, 2, 3, 4]  # one predicate
    assert _ids(events.read(filter=pc.field("id") < 2)) == [0, 1]
    opts = ReadOptions(columns=["id"], filter=[("id", "in", (1, 8))])
    assert events.read(options=opts).to_pydict() == {"id": [1, 8]}
    assert pa.Table.from_batches(list(events.scan(options=opts))).to_pydict() == {"id": [1, 8]}


def test_as_of_write_id_reads_the_table_as_it_was(events: Table, store: TxnStore) -> None:
    assert _ids(events.read(as_of_write_id=1)) == [0, 1, 2, 3, 4]
    assert _ids(events.read(as_of_write_id=2)) == [0, 1, 2, 3, 4]  # 2 was aborted
    assert _ids(events.read(as_of_write_id=3)) == list(range(10))
    assert _ids(events.read(as_of_write_id=0)) == []
    with pytest.raises(ConfigError, match="as_of_write_id 4 is in the future"):
        events.read(as_of_write_id=4)


def test_unknown_columns_are_config_errors(events: Table) -> None:
    with pytest.raises(ConfigError, match="unknown column 'nope'"):
        events.read(columns=["id", "nope"])
    with pytest.raises(ConfigError, match="unknown column 'nope'"):
        events.scan(columns=["nope"])  # at the call, before the first batch
    with pytest.raises(ConfigError, match="nope"):
        events.read(filter=[("nope", "=", 1)])
    with pytest.raises(ConfigError, match="operator"):
        events.read(filter=[("id", "~", 1)])
    with pytest.raises(ConfigError, match="SQL text"):
        events.read(filter="id > 1")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="columns must be a list"):
        events.read(columns="id")  # type: ignore[arg-type]


def test_missing_table_is_table_not_found(
    store: TxnStore, store_url: str, warehouse: str, tmp_path: Path
) -> None:
    with pytest.raises(TableNotFoundError):
        acidstream.table("default.nope", metastore=store_url, warehouse=warehouse)
    with pytest.raises(TableNotFoundError, match="no metastore"):
        acidstream.table("default.t", metastore=f"sqlite:///{tmp_path}/none.db")
    assert not (tmp_path / "none.db").exists()  # opening a handle creates no metastore


# ------------------------------------------------------------------ snapshots


def test_snapshot_pins_one_snapshot_while_a_writer_commits(events: Table, store: TxnStore) -> None:
    with events.snapshot() as snap:
        first = events.read()
        _commit(store, range(10, 15), ds="b")
        assert _rows(events.read()) == _rows(first) == _model(range(10))
        assert _rows(pa.Table.from_batches(list(events.scan()))) == _model(range(10))
        assert snap.txn_id is not None and snap.write_ids.high_watermark == 3
        with pytest.raises(ConfigError, match="already held"), events.snapshot():
            pass
    assert _ids(events.read()) == list(range(15))
    assert _open_txns(store) == []  # the snapshot's read txn ended with its block


def _open_txns(store: TxnStore) -> list[int]:
    return [t.txn_id for t in store.show_txns() if t.state == TxnState.OPEN]


def test_a_scan_holds_its_read_txn_until_it_ends(events: Table, store: TxnStore) -> None:
    batches = events.scan()
    next(batches)
    assert len(_open_txns(store)) == 1  # its own snapshot's read txn, while it streams
    batches.close()  # type: ignore[attr-defined]
    assert _open_txns(store) == []
    assert sum(b.num_rows for b in events.scan()) == 10
    assert _open_txns(store) == []


def test_cleaner_waits_for_a_held_snapshot(events: Table, store: TxnStore) -> None:
    loc = events.describe().location
    assert loc is not None

    def files() -> set[str]:
        return {str(p.relative_to(loc)) for p in Path(loc).rglob("*") if p.is_file()}

    q = CompactionQueue(store)
    with events.snapshot():
        want = events.read()
        before = files()
        q.request("default", "t", partition="ds=a", major=True)
        out = Worker(store, queue=q).run_once()
        assert out is not None and out.state == "r"
        assert Cleaner(store, queue=q).run_once() == []  # it waits for the read txn
        assert before <= files()
        assert _rows(events.read()) == _rows(want)
    done = Cleaner(store, queue=q).run_once()
    assert [c.id for c in done] == [out.id]
    assert not before <= files()  # the snapshot's delta files of ds=a are gone now
    assert _rows(events.read()) == _rows(want)


def test_a_lost_read_txn_refuses_to_read(events: Table, store: TxnStore) -> None:
    with pytest.raises(TransactionError, match="aborted"), events.snapshot() as snap:
        assert snap.txn_id is not None
        store.abort_txn(snap.txn_id)  # as the housekeeper's reaper would
        events.read()


# ------------------------------------------------------------------ describe


def test_describe_a_partitioned_bucketed_table(
    store: TxnStore, make_table: MakeTable, store_url: str, warehouse: str
) -> None:
    make_table("bk", "id int, msg string", partitioned_by=[("ds", "string")], buckets=("id", 4))
    d = acidstream.table("bk", metastore=store_url, warehouse=warehouse).describe()
    assert d.name == "default.bk"
    assert d.columns == (("id", "int"), ("msg", "string"))
    assert d.partition_keys == (("ds", "string"),) and d.partition_names == ("ds",)
    assert (d.bucket_cols, d.num_buckets, d.is_bucketed) == (("id",), 4, True)
    assert d.properties["transactional"] == "true"
    assert d.location is not None and d.location.endswith("bk")
    assert (d.skewed, d.is_link, d.link, d.link_partitions) == (None, False, None, None)
    with pytest.raises(TypeError):
        d.properties["transactional"] = "false"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.num_buckets = 2  # type: ignore[misc]


def test_describe_a_list_bucketed_table(store: TxnStore, store_url: str, warehouse: str) -> None:
    make_lb_table(store)
    d = acidstream.table("default.t", metastore=store_url, warehouse=warehouse).describe()
    assert d.skewed == SKEW and d.partition_names == ("p",) and not d.is_bucketed


def test_describe_and_read_a_link(store: TxnStore, store_url: str) -> None:
    make_namespaces(store)
    write_b(store, [("1", range(0, 3)), ("2", range(10, 13))])
    store.create_link("a", "b", "t1")
    store.alter_link_partition("a", "b", "t1", "ds=2", add=True)
    t = acidstream.table("t1@b", namespace="a", metastore=store_url, warehouse=store.warehouse)
    d = t.describe()
    assert (d.name, d.is_link, d.link) == ("b.t1", True, "a.t1@b")
    assert d.link_partitions == frozenset({"ds=2"})
    assert _ids(t.read()) == [10, 11, 12]  # only the link's partition
    with t.snapshot():
        write_b(store, [("2", range(13, 15))])
        assert _ids(t.read()) == [10, 11, 12]
    assert _ids(t.read()) == [10, 11, 12, 13, 14]


# ------------------------------------------------------------------ facade


def test_read_options_are_frozen_keyword_only_and_parsed_once() -> None:
    with pytest.raises(TypeError):
        ReadOptions(["id"])  # type: ignore[misc]
    o = ReadOptions(columns=["id"], filter=[("id", ">", 1)])
    assert o.columns == ("id",) and o.filter == (("id", ">", 1),)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.columns = None  # type: ignore[misc]
    for bad in ({"as_of_write_id": -1}, {"as_of_write_id": True}, {"timestamp_unit": "ms"}):
        with pytest.raises(ConfigError):
            ReadOptions(**bad)


def test_one_read_table_by_name_or_path(events: Table, store_url: str, warehouse: str) -> None:
    kw: dict[str, Any] = {"metastore": store_url, "warehouse": warehouse}
    loc = events.describe().location
    assert loc is not None
    assert _rows(acidstream.read_table("default.t", **kw)) == _model(range(10))
    assert _ids(acidstream.read_table(loc, as_of_write_id=1, **kw)) == [0, 1, 2, 3, 4]
    opts = ReadOptions(columns=["id"], filter=[("ds", "=", "b")])
    assert acidstream.read_table("t", options=opts, **kw).to_pydict() == {"id": [5, 6, 7, 8, 9]}
    with pytest.raises(ConfigError, match="not both"):
        acidstream.read_table("t", options=opts, columns=["id"], **kw)
    # The path-level reader no longer shares the name: it is acid.read_path; and the
    # untyped snapshot_read.read_table is gone: the facade's is the one read_table.
    assert not hasattr(acid, "read_table") and callable(acid.read_path)
    assert not hasattr(snapshot_read, "read_table")


def test_table_names_are_in_the_facade() -> None:
    for name in ("table", "Table", "ReadOptions", "TableDef", "AcidTableSource", "AcidReadTxn"):
        assert name in acidstream.__all__
    assert acidstream.TableDef is TableDef
    assert callable(acidstream.table) and isinstance(acidstream.Table, type)


# ------------------------------------------------------------------ spark


@pytest.mark.spark
def test_spark_inside_a_snapshot_sees_the_same_rows(
    events: Table, store: TxnStore, spark: Any
) -> None:
    with events.snapshot():
        want = events.read()
        _commit(store, range(10, 15), ds="b")
        df = events.spark(spark)
        got = pa.Table.from_pylist([r.asDict() for r in df.collect()], schema=events.schema)
        assert _rows(got) == _rows(want) == _model(range(10))
        f = events.spark(spark, columns=["id"], filter=[("ds", "=", "b")])
        assert sorted(r.id for r in f.collect()) == [5, 6, 7, 8, 9]
    assert events.spark(spark).count() == 15
