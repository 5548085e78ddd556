"""The upsert engine (``acidstream.mutation.changes``): change events collapsed per key and
applied as one MERGE in one txn, against a model of the change log (last ordering wins,
deletes remove, no key twice); counts, the ordering guard, the EXCL_WRITE lock, retries
after a write conflict and the commit parameter. Both metastore backends."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as orc
import pytest

from acidstream import Table
from acidstream.acid import bucket_codec
from acidstream.acid.errors import ConfigError
from acidstream.acid.table_name import TableName
from acidstream.mutation.changes import (
    DELETE_COLUMN,
    OFFSET_COLUMN,
    PARTITION_COLUMN,
    ChangeOptions,
    apply_changes,
    collapse,
)
from acidstream.txn.batch import TransactionBatch
from acidstream.txn.locks import DataOperationType, LockType
from acidstream.txn.store import TxnStore, open_store
from tests.ingest.conftest import MakeTable
from tests.mutation.conftest import Insert, rows_of, wait_for_a_waiting_lock

Event = dict[str, Any]

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("v", pa.string()),
        ("ver", pa.int64()),
        (DELETE_COLUMN, pa.bool_()),
        (PARTITION_COLUMN, pa.int32()),
        (OFFSET_COLUMN, pa.int64()),
    ]
)


def events_table(events: list[Event]) -> pa.Table:
    return pa.Table.from_pylist(events, schema=SCHEMA)


def fold(model: dict[int, tuple[str, int]], events: list[Event], *, guard: bool) -> None:
    """The change log applied to the model: per key the last event by (ver, partition,
    offset, position) wins; with ``guard`` an event older than the model's row is skipped."""
    last: dict[int, tuple[tuple[int, int, int, int], Event]] = {}
    for pos, e in enumerate(events):
        k = (e["ver"], e[PARTITION_COLUMN], e[OFFSET_COLUMN], pos)
        if e["id"] not in last or k >= last[e["id"]][0]:
            last[e["id"]] = (k, e)
    for key, (_, e) in last.items():
        if guard and key in model and e["ver"] < model[key][1]:
            continue
        if e[DELETE_COLUMN]:
            model.pop(key, None)
        else:
            model[key] = (e["v"], e["ver"])


def table_rows(t: Table) -> list[tuple[Any, ...]]:
    return rows_of(t.read(), ["id", "v", "ver"])


def random_events(rng: random.Random, n: int, offset: int) -> list[Event]:
    out = []
    for i in range(n):
        out.append(
            {
                "id": rng.randrange(30),
                "v": rng.choice("abc") + str(i),
                "ver": rng.randrange(20),
                DELETE_COLUMN: rng.random() < 0.25,
                PARTITION_COLUMN: rng.randrange(2),
                OFFSET_COLUMN: offset + i,
            }
        )
    return out


@pytest.mark.parametrize("guard", [False, True])
@pytest.mark.parametrize("layout", ["plain", "bucketed"])
def test_random_change_logs_fold_into_the_table(
    store: TxnStore,
    make_table: MakeTable,
    handle: Callable[[str], Table],
    guard: bool,
    layout: str,
) -> None:
    name = f"cdc_{layout}_{int(guard)}"
    make_table(
        name, "id bigint, v string, ver bigint", buckets=("id", 3) if layout == "bucketed" else None
    )
    t = handle(name)
    opts = ChangeOptions(key=("id",), ordering="ver", ordering_guard=guard)
    rng = random.Random(hash((layout, guard)) & 0xFFFF)
    model: dict[int, tuple[str, int]] = {}
    offset = 0
    for _ in range(6):
        batch = random_events(rng, rng.randrange(1, 40), offset)
        offset += len(batch)
        r = apply_changes(store, TableName("default", name), events_table(batch), opts)
        before = dict(model)
        fold(model, batch, guard=guard)
        assert table_rows(t) == sorted((k, v, ver) for k, (v, ver) in model.items())
        # The counts tell what happened to each key of the batch.
        keys = {e["id"] for e in batch}
        assert r.events == len(batch) and r.keys == len(keys)
        assert r.inserted == len(set(model) - set(before))
        assert r.deleted == len(set(before) - set(model))
        assert r.inserted + r.updated + r.deleted + r.absent_deletes + r.skipped_late == r.keys
        if not guard:
            assert r.skipped_late == 0
    assert len(t.read()) == len(model)  # no key twice


def test_collapse_keeps_the_last_event_by_ordering_then_position() -> None:
    ev = events_table(
        [
            {
                "id": 1,
                "v": "new",
                "ver": 5,
                DELETE_COLUMN: None,
                PARTITION_COLUMN: 0,
                OFFSET_COLUMN: 1,
            },
            {
                "id": 1,
                "v": "old",
                "ver": 3,
                DELETE_COLUMN: False,
                PARTITION_COLUMN: 0,
                OFFSET_COLUMN: 2,
            },
            {
                "id": 2,
                "v": "a",
                "ver": 1,
                DELETE_COLUMN: False,
                PARTITION_COLUMN: 1,
                OFFSET_COLUMN: 7,
            },
            {
                "id": 2,
                "v": "b",
                "ver": 1,
                DELETE_COLUMN: True,
                PARTITION_COLUMN: 1,
                OFFSET_COLUMN: 8,
            },
        ]
    )
    out = collapse(ev, ChangeOptions(key=("id",), ordering="ver"))
    got = sorted(zip(*(out.column(c).to_pylist() for c in ("id", "v", DELETE_COLUMN)), strict=True))
    assert got == [(1, "new", False), (2, "b", True)]
    # Without an ordering, the Kafka position decides: offset 2 of id 1 is the later one.
    out = collapse(ev, ChangeOptions(key=("id",)))
    assert sorted(zip(out.column("id").to_pylist(), out.column("v").to_pylist(), strict=True)) == [
        (1, "old"),
        (2, "b"),
    ]


def test_deletes_of_absent_keys_and_late_events_are_counted(
    store: TxnStore, make_table: MakeTable, insert: Insert, handle: Callable[[str], Table]
) -> None:
    make_table("late", "id bigint, v string, ver bigint")
    insert("late", [{"id": 1, "v": "a", "ver": 10}, {"id": 2, "v": "b", "ver": 10}])
    ev = pa.table(
        {
            "id": [1, 2, 3, 4],
            "v": ["old", None, "x", None],
            "ver": [9, 11, 1, 1],
            DELETE_COLUMN: [False, True, False, True],
        }
    )
    r = apply_changes(
        store,
        TableName("default", "late"),
        ev,
        ChangeOptions(key=("id",), ordering="ver", ordering_guard=True),
    )
    assert (r.inserted, r.updated, r.deleted, r.absent_deletes, r.skipped_late) == (1, 0, 1, 1, 1)
    assert table_rows(handle("late")) == [(1, "a", 10), (3, "x", 1)]


def test_bad_events_are_refused_before_any_txn(
    store: TxnStore, make_table: MakeTable, insert: Insert, handle: Callable[[str], Table]
) -> None:
    make_table("bad", "id bigint, v string")
    insert("bad", [{"id": 1, "v": "a"}])
    name = TableName("default", "bad")
    with pytest.raises(ConfigError, match="NULL key"):
        apply_changes(
            store, name, pa.table({"id": [None, 2], "v": ["x", "y"]}), ChangeOptions(key=("id",))
        )
    with pytest.raises(ConfigError, match="not a column of the table"):
        apply_changes(store, name, pa.table({"k": [1]}), ChangeOptions(key=("k",)))
    with pytest.raises(ConfigError, match="ordering column"):
        apply_changes(
            store,
            name,
            pa.table({"id": [1], "v": ["z"]}),
            ChangeOptions(key=("id",), ordering="ver"),
        )
    with pytest.raises(ConfigError, match="ordering_guard needs"):
        ChangeOptions(key=("id",), ordering_guard=True)
    assert table_rows_plain(handle("bad")) == [(1, "a")]
    assert not store.show_txns() or all(x.state.name != "OPEN" for x in store.show_txns())


def table_rows_plain(t: Table) -> list[tuple[Any, ...]]:
    return rows_of(t.read(), ["id", "v"])


def test_commit_param_is_stored_with_the_commit(
    store: TxnStore, make_table: MakeTable, handle: Callable[[str], Table]
) -> None:
    make_table("param", "id bigint, v string")
    name = TableName("default", "param")
    r = apply_changes(
        store,
        name,
        pa.table({"id": [1, 2], "v": ["a", "b"]}),
        ChangeOptions(key=("id",)),
        commit_param=lambda res: ("_meta.test.progress", f"{res.write_id}:{res.inserted}"),
    )
    assert store.get_table_param("default", "param", "_meta.test.progress") == f"{r.write_id}:2"
    # A failed commit stores nothing: a body error aborts the txn, the param stays.
    with pytest.raises(ConfigError):
        apply_changes(
            store,
            name,
            pa.table({"id": [None], "v": ["x"]}),
            ChangeOptions(key=("id",)),
            commit_param=lambda res: ("_meta.test.progress", "never"),
        )
    assert store.get_table_param("default", "param", "_meta.test.progress") == f"{r.write_id}:2"
    assert table_rows_plain(handle("param")) == [(1, "a"), (2, "b")]


def test_upserts_take_excl_write_and_wait_for_each_other(
    store: TxnStore, store_url: str, make_table: MakeTable, handle: Callable[[str], Table]
) -> None:
    """Two upsert writers inserting the same new keys: the second waits for the first's
    EXCL_WRITE lock, then finds the keys and updates them; no key twice."""
    make_table("race", "id bigint, v string")
    name = TableName("default", "race")
    holder = TransactionBatch(
        store, name, size=1, operation=DataOperationType.UPDATE, exclusive=True
    )
    assert holder.lock_type is LockType.EXCL_WRITE
    holder.begin_next()
    started, done = threading.Event(), threading.Event()
    result: list[Any] = []

    def other() -> None:
        s = open_store(store_url)
        try:
            started.set()
            result.append(
                apply_changes(
                    s, name, pa.table({"id": [1, 2], "v": ["w2", "w2"]}), ChangeOptions(key=("id",))
                )
            )
        finally:
            s.close()
            done.set()

    th = threading.Thread(target=other)
    th.start()
    assert started.wait(10)
    # The other writer waits for the lock held by the open exclusive txn.
    assert not done.wait(1.0)
    # The first writer inserts the keys in its txn, then commits.
    from acidstream.mutation.changes import ChangePlan
    from acidstream.mutation.run import MutationRun
    from acidstream.mutation.target import Target, row_schema
    from acidstream.mutation.write import MutationFiles

    table = store.get_table("default", "race")
    target = Target.open(store, table, holder.current_txn)
    files = MutationFiles(target, holder.current_write_id)
    plan = ChangePlan(
        pa.table({"id": [1, 2], "v": ["w1", "w1"]}), ChangeOptions(key=("id",)), row_schema(table)
    )
    first = plan(
        MutationRun(
            target=target, files=files, write_id=holder.current_write_id, txn_id=holder.current_txn
        )
    )
    assert first.inserted == 2
    holder.commit(partitions=[])
    holder.close()
    th.join(30)
    assert done.is_set() and result
    assert (result[0].inserted, result[0].updated) == (0, 2)
    # Its first txn opened before the holder committed: it started again once it held the
    # lock (a commit would have lost the write-set check), not counted as a retry.
    assert result[0].attempts == 2
    assert table_rows_plain(handle("race")) == [(1, "w2"), (2, "w2")]


def test_a_write_conflict_with_an_update_is_retried_with_keys_resolved_anew(
    store: TxnStore,
    store_url: str,
    make_table: MakeTable,
    insert: Insert,
    handle: Callable[[str], Table],
) -> None:
    """An UPDATE holds SHARED_WRITE when the upsert's txn opens: the upsert waits for the
    lock; once it holds it, the UPDATE has committed after the upsert's txn began (its
    commit would lose the write-set check), so it starts again in a new txn at once, finds
    the UPDATE's version and gives it a new one keeping the updated column."""
    from acidstream.acid import faults

    make_table("conflict", "id bigint, v string, n int")
    insert("conflict", [{"id": 1, "v": "a", "n": 0}, {"id": 2, "v": "b", "n": 0}])
    name = TableName("default", "conflict")
    t = handle("conflict")
    result: list[Any] = []
    errors: list[BaseException] = []
    waiting = threading.Event()

    def upsert() -> None:
        s = open_store(store_url)
        try:
            result.append(
                apply_changes(
                    s, name, pa.table({"id": [1, 3], "v": ["u", "new"]}), ChangeOptions(key=("id",))
                )
            )
        except BaseException as e:
            errors.append(e)
        finally:
            s.close()

    th = threading.Thread(target=upsert)

    def hook(point: str) -> None:
        # Inside the UPDATE, its rows found: start the upsert and let the UPDATE commit
        # once the upsert's lock waits behind it.
        if point == "mutation.after_find" and not th.is_alive() and not waiting.is_set():
            th.start()
            if wait_for_a_waiting_lock(store_url, timeout_s=20):
                waiting.set()

    faults.set_hook(hook)
    try:
        t.update(set={"n": "n + 1"}, where="id = 1")
        th.join(60)
    finally:
        faults.set_hook(None)
    assert waiting.is_set() and not errors, errors
    assert result[0].attempts == 2, result[0]
    assert (result[0].inserted, result[0].updated) == (1, 1)
    assert rows_of(t.read(), ["id", "v", "n"]) == [(1, "u", 1), (2, "b", 0), (3, "new", None)]


def test_table_upsert_uses_the_table_key_and_delete_when(
    store: TxnStore, handle: Callable[[str], Table]
) -> None:
    from acidstream.txn.catalog import TableDef

    store.create_table(
        TableDef(
            db="default", name="keyed", columns=(("id", "bigint"), ("v", "string"), ("op", "string"), ("lsn", "bigint")),
            parameters={"transactional": "true", "acidstream.key": "id", "acidstream.ordering": "lsn"},
        )
    )  # fmt: skip
    t = handle("keyed")
    r = t.upsert(pa.table({"id": [1, 2, 1], "v": ["a", "b", "a2"], "op": ["c", "c", "u"], "lsn": [1, 2, 3]}))  # fmt: skip
    assert (r.inserted, r.events, r.keys) == (2, 3, 2)
    # Out of order: lsn 4 (delete of 2) arrives after lsn 5 (update of 2): the update wins.
    r = t.upsert(
        pa.table({"id": [2, 2, 3], "v": ["b5", None, None], "op": ["u", "d", "d"], "lsn": [5, 4, 6]}),
        delete_when="op = 'd'",
    )  # fmt: skip
    assert (r.updated, r.deleted, r.absent_deletes) == (1, 0, 1)
    assert rows_of(t.read(), ["id", "v", "lsn"]) == [(1, "a2", 3), (2, "b5", 5)]
    r = t.upsert(pa.table({"id": [1], "op": ["d"], "lsn": [9]}), delete_when="op = 'd'")
    assert r.deleted == 1 and rows_of(t.read(), ["id"]) == [(2,)]


def test_table_upsert_without_a_key_is_refused(
    store: TxnStore, make_table: MakeTable, handle: Callable[[str], Table]
) -> None:
    make_table("nokey", "id bigint, v string")
    with pytest.raises(ConfigError, match="has no key"):
        handle("nokey").upsert(pa.table({"id": [1], "v": ["a"]}))
    assert handle("nokey").upsert(pa.table({"id": [1], "v": ["a"]}), key=["id"]).inserted == 1


def test_a_change_batch_writes_one_delete_delta_and_one_key_sorted_delta(
    store: TxnStore,
    make_table: MakeTable,
    insert: Insert,
    handle: Callable[[str], Table],
    warehouse: str,
) -> None:
    """Updates, deletes and inserts of one batch land in ONE ``delete_delta_W_W_0000``
    and ONE ``delta_W_W_0000`` per bucket (a MERGE's per-clause layout writes statements
    0-2): the new versions and the inserted rows together, sorted by key, each file's
    events under its bucket's statement-0 bucket property; the rows read are the fold."""
    make_table("lay", "id bigint, v string, ver bigint", buckets=("id", 2))
    insert("lay", [{"id": i, "v": f"v{i}", "ver": 0} for i in range(0, 40, 2)])
    ids = [30, 4, 38, 0, 6, 41, 7, 13, 1]  # updates, deletes, inserts, out of key order
    dels = [False, False, False, True, True, False, False, False, True]
    ev = pa.table(
        {
            "id": ids,
            "v": [f"n{i}" for i in ids],
            "ver": [1] * len(ids),
            DELETE_COLUMN: dels,
        }
    )
    r = apply_changes(store, TableName("default", "lay"), ev, ChangeOptions(key=("id",)))
    assert (r.updated, r.deleted, r.inserted, r.absent_deletes) == (3, 2, 3, 1)
    root = Path(warehouse) / "lay"
    wid = r.write_id
    assert sorted(p.name for p in root.iterdir() if p.is_dir() and f"_{wid:07d}_" in p.name) == [
        f"delete_delta_{wid:07d}_{wid:07d}_0000",
        f"delta_{wid:07d}_{wid:07d}_0000",
    ]
    new_rows = 0
    for f in sorted((root / f"delta_{wid:07d}_{wid:07d}_0000").glob("bucket_*")):
        if f.name.endswith("_flush_length"):
            continue
        events = orc.ORCFile(str(f)).read()
        got = [row["id"] for row in events.column("row").to_pylist()]
        assert got == sorted(got)  # key-sorted
        b = int(f.name.split("_")[1])
        assert set(events.column("bucket").to_pylist()) == {bucket_codec.encode(b, 0)}
        new_rows += len(got)
    assert new_rows == r.updated + r.inserted
    gone = sum(
        orc.ORCFile(str(f)).nrows
        for f in (root / f"delete_delta_{wid:07d}_{wid:07d}_0000").glob("bucket_*")
        if not f.name.endswith("_flush_length")
    )
    assert gone == r.updated + r.deleted
    model = {i: f"v{i}" for i in range(0, 40, 2)}
    for i, d in zip(ids, dels, strict=True):
        if d:
            model.pop(i, None)
        else:
            model[i] = f"n{i}"
    assert table_rows(handle("lay")) == sorted(
        (k, v, 1 if v.startswith("n") else 0) for k, v in model.items()
    )
