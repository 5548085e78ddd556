"""Readers over the directories a Hive 3 mutation leaves (issue 30 item 7).

Tables are built as Hive's UPDATE, DELETE and MERGE write them (``tests/mutation_tables``:
``delete_delta_W_W_SSSS`` + ``delta_W_W_SSSS``, the statement id in the bucket property)
and read with ``read_path``, the ``Table`` handle and the ``acidtable`` Spark source; each
read must equal the model: updated rows once with their new values, deleted rows gone,
every statement of a write id read, and time travel to ``W-1`` showing the old rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import acidstream
from acidstream.acid import bucket_codec, layout
from acidstream.acid.directory import get_acid_state
from acidstream.acid.reader import read_path
from acidstream.acid.storage import Storage
from acidstream.txn.locks import DataOperationType
from acidstream.txn.store import TxnStore
from tests.mutation_tables import MutationTable, create_table, row, rows_of, values_of


def build_history(t: MutationTable, *, partition: str = "") -> dict[str, int]:
    """Inserts, then an UPDATE, a DELETE, a MERGE (three clauses) and a txn whose later
    statement deletes and updates rows an earlier statement of it inserted."""
    p = {"partition": partition}
    w: dict[str, int] = {}
    w["insert1"] = t.insert([row(i) for i in range(0, 12)], **p)
    w["insert2"] = t.insert([row(i) for i in range(12, 20)], **p)
    w["update"] = t.update({1: row(1, 111), 5: row(5, 555), 13: row(13, 1313)}, **p)
    # Hive 4's split UPDATE (HIVE-21160): the delete branch and the insert branch are two
    # statements of the txn, so the two directories have different statement ids.
    with t.txn(DataOperationType.UPDATE, **p) as tx:
        old = t.keys_of([9, 10], partition)
        tx.delete(old, stmt=0)
        tx.insert([row(9, 999), row(10, 1010)], stmt=1)
    w["split_update"] = tx.write_id
    w["delete"] = t.delete([2, 14], **p)
    # Updates a row the UPDATE wrote (its ROW__ID has the UPDATE's write id) and an
    # original row; deletes another updated row; inserts new ones.
    w["merge"] = t.merge(
        inserts=[row(i) for i in range(100, 104)],
        updates={1: row(1, 1111), 3: row(3, 333)},
        deletes=[5, 15],
        **p,
    )
    with t.txn(DataOperationType.UPDATE, **p) as tx:
        new = tx.insert([row(i) for i in range(200, 205)], stmt=0)
        tx.delete([new[1]], stmt=1)  # a row inserted by statement 0 of the same write id
        tx.update({new[3]: row(203, 2033)}, stmt=2)
        tx.delete(t.keys_of([4], partition), stmt=2)
    w["multi"] = tx.write_id
    return w


def _dirs(t: MutationTable, partition: str = "") -> list[str]:
    return sorted(p.name for p in Path(t.dir(partition)).iterdir())


def test_the_table_holds_hive_3_mutation_directories(store: TxnStore) -> None:
    """The fixture itself: directory names and bucket properties as Hive 3 writes them."""
    t = MutationTable(store, create_table(store))
    w = build_history(t)
    u, s, d, m, x = w["update"], w["split_update"], w["delete"], w["merge"], w["multi"]

    def dd(wid: int, stmt: int, *, delete: bool = False) -> str:
        return layout.delta_dir_name(wid, wid, statement_id=stmt, delete=delete)

    expected = {
        dd(1, 0), dd(2, 0),
        dd(u, 0), dd(u, 0, delete=True),
        dd(s, 0, delete=True), dd(s, 1),
        dd(d, 0, delete=True),
        dd(m, 0), dd(m, 1), dd(m, 1, delete=True), dd(m, 2, delete=True),
        dd(x, 0), dd(x, 1, delete=True), dd(x, 2), dd(x, 2, delete=True),
    }  # fmt: skip
    assert set(_dirs(t)) == expected
    got = rows_of(t.read())
    new_in_merge = [k for k, *_ in got if k[0] == m]
    # The MERGE's insert clause is statement 0, its update clause's new versions statement 1.
    assert {bucket_codec.decode(k[1])[1] for k in new_in_merge} == {0, 1}


def test_read_path_equals_the_model(store: TxnStore) -> None:
    t = MutationTable(store, create_table(store))
    build_history(t)
    got = rows_of(t.read())
    assert got == t.expected()
    ids = [r[1] for r in got]
    assert len(ids) == len(set(ids))  # every updated row once
    by_id = {r[1]: r[3] for r in got}
    assert by_id[1] == 1111 and by_id[3] == 333 and by_id[13] == 1313 and by_id[203] == 2033
    assert by_id[9] == 999 and by_id[10] == 1010
    assert not {2, 14, 5, 15, 4, 201} & set(by_id)


def test_bucketed_table_one_delete_file_per_writer(store: TxnStore) -> None:
    t = MutationTable(store, create_table(store, buckets=3))
    w = build_history(t)
    # The DELETE named rows of several writer ids: one sorted file per writer id.
    d = w["delete"]
    deleted = [k for k, r in t.history[d - 1][""].items() if r[0] in (2, 14)]
    writers = {bucket_codec.decode_writer_id(k[1]) for k in deleted}
    ddir = Path(t.dir()) / layout.delta_dir_name(d, d, statement_id=0, delete=True)
    assert {p.name for p in ddir.glob("bucket_*")} == {layout.bucket_file_name(b) for b in writers}
    assert rows_of(t.read()) == t.expected()


def test_projection_and_filter_without_row_ids(store: TxnStore) -> None:
    """Without ROW__ID in the output the reader still reads the key columns where deletes
    may hit: a projected, filtered read equals the model's rows, as of each write id too."""
    t = MutationTable(store, create_table(store, buckets=2))
    w = build_history(t)
    txns = store.get_valid_txns()
    wids = store.get_valid_write_ids("default", "t", txns)
    for as_of in (None, w["merge"] - 1, w["multi"] - 1):
        got = read_path(
            t.dir(),
            write_ids=wids.capped(as_of),
            txns=txns,
            schema=t.schema,
            columns=["id"],
            filter=[("salary", ">", 100)],
        )
        want = sorted(r[1] for r in t.expected(as_of=as_of) if r[3] > 100)
        assert sorted(got.column("id").to_pylist()) == want, as_of


def test_the_bounded_memory_delete_path_agrees(store: TxnStore) -> None:
    """Above ``delete_event_cap`` deletes are applied by the sort-merged registry."""
    t = MutationTable(store, create_table(store, buckets=2))
    w = build_history(t)
    assert rows_of(t.read(delete_event_cap=1)) == t.expected()
    before = w["multi"] - 1
    assert rows_of(t.read(as_of=before, delete_event_cap=1)) == t.expected(as_of=before)


def test_every_statement_of_a_write_id_is_chosen(store: TxnStore) -> None:
    t = MutationTable(store, create_table(store))
    w = build_history(t)
    st, path = Storage.for_path(t.dir())
    txns = store.get_valid_txns()
    state = get_acid_state(
        path, write_ids=store.get_valid_write_ids("default", "t", txns), txns=txns, storage=st
    )
    chosen = {d.name for d in state.deltas}
    assert chosen == set(_dirs(t))
    assert state.obsolete == () and state.aborted == ()
    m = w["merge"]
    order = [d.name for d in state.deltas if isinstance(d.parsed, layout.ParsedDelta)
             and d.parsed.min_write_id == m]  # fmt: skip
    assert order == sorted(order, key=lambda n: (layout.parse_dir_name(n).statement_id, n))  # type: ignore[union-attr]


def test_time_travel_before_each_mutation_shows_the_old_rows(store: TxnStore) -> None:
    t = MutationTable(store, create_table(store))
    w = build_history(t)
    for name in ("update", "split_update", "delete", "merge", "multi"):
        before = w[name] - 1
        assert rows_of(t.read(as_of=before)) == t.expected(as_of=before), name
        assert rows_of(t.read(as_of=w[name])) == t.expected(as_of=w[name]), name
    assert (1, "name-1", 10) in values_of(t.read(as_of=w["update"] - 1))
    assert (2, "name-2", 20) in values_of(t.read(as_of=w["delete"] - 1))
    assert (2, "name-2", 20) not in values_of(t.read(as_of=w["delete"]))


def test_an_aborted_mutation_changes_nothing(store: TxnStore) -> None:
    t = MutationTable(store, create_table(store))
    build_history(t)
    before = t.expected()
    t.update({0: row(0, -1), 7: row(7, -7)}, outcome="abort")
    t.delete([8, 9], outcome="abort")
    t.merge(inserts=[row(900)], updates={10: row(10, -10)}, deletes=[11], outcome="abort")
    assert rows_of(t.read()) == before


def test_table_read_by_name_and_as_of_write_id(
    store: TxnStore, store_url: str, warehouse: str
) -> None:
    t = MutationTable(store, create_table(store, partitioned=True))
    w = build_history(t, partition="ds=a")
    t.insert([row(i) for i in range(50, 55)], partition="ds=b")
    t.delete([52], partition="ds=b")
    handle = acidstream.table("default.t", metastore=store_url, warehouse=warehouse)

    def plain(exp: list[Any]) -> list[Any]:
        return sorted(tuple(r[1:]) for r in exp)

    assert values_of(handle.read()) == plain(t.expected())
    for name in ("update", "split_update", "delete", "merge", "multi"):
        before = w[name] - 1
        assert values_of(handle.read(as_of_write_id=before)) == plain(t.expected(as_of=before))
    got = handle.read(options=acidstream.ReadOptions(include_row_id=True))
    assert rows_of(got) == t.expected()


@pytest.mark.spark
def test_spark_acidtable_source_equals_the_model(
    store: TxnStore, store_url: str, warehouse: str, spark: Any
) -> None:
    from acidstream.sources.acid_table import register

    t = MutationTable(store, create_table(store, buckets=2, partitioned=True))
    w = build_history(t, partition="ds=a")
    register(spark)

    def read(**opts: Any) -> list[Any]:
        r = spark.read.format("acidtable").option("metastore", store_url)
        r = r.option("warehouse", warehouse).option("includeRowId", "true")
        for k, v in opts.items():
            r = r.option(k, str(v))
        out = []
        for rec in r.load("default.t").collect():
            d = rec.asDict(recursive=True)
            rid = d.pop("row__id")
            out.append(((rid["writeid"], rid["bucketid"], rid["rowid"]), *d.values()))
        return sorted(out)

    assert read() == t.expected()
    for name in ("update", "split_update", "delete", "merge", "multi"):
        before = w[name] - 1
        assert read(asOfWriteId=before) == t.expected(as_of=before), name
    # After a minor compaction of the partition (its outputs keep every event), the same.
    from acidstream.compaction import Cleaner, Worker
    from acidstream.txn.compaction_sql import CompactionQueue

    q = CompactionQueue(store)
    q.request("default", "t", "ds=a", major=False)
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.state == "r", out
    Cleaner(store).run_once()
    assert read() == t.expected()
    before = w["merge"] - 1
    assert read(asOfWriteId=before) == t.expected(as_of=before)
