"""Streaming upserts through ``StreamingConnection(mode="upsert")`` (issue 31 item 3), on
both store backends: a seeded model test over several txns (the table read back equals
the fold of the changes), the rules of an upsert connection, a write conflict, and two
real processes upserting the same new keys."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import acidstream
from acidstream.acid import faults
from acidstream.acid.errors import ConfigError, SerializationError
from acidstream.acid.schema import TableSchema
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictDelimitedInputWriter, StrictJsonWriter
from acidstream.ingest.upserts import KeyedWriter, upsert_key
from acidstream.txn.catalog import TableDef
from acidstream.txn.locks import LockState
from acidstream.txn.store import TxnStore

UPSERT = StreamingOptions(mode="upsert", housekeeping_interval_s=None)
ROOT = Path(__file__).resolve().parents[2]


def keyed_table(
    store: TxnStore, name: str = "k", *, partitioned: bool = False, key: str | None = "id"
) -> TableDef:
    params = {"transactional": "true"}
    if key is not None:
        params["acidstream.key"] = key
    cols = TableSchema.parse("id int, v string, n bigint").columns
    return store.create_table(
        TableDef(
            db="default",
            name=name,
            columns=tuple((c, str(t)) for c, t in cols),
            partition_keys=(("ds", "string"),) if partitioned else (),
            parameters=params,
        )
    )


def read_rows(store_url: str, warehouse: str, name: str = "k") -> list[tuple[Any, ...]]:
    t = acidstream.table(f"default.{name}", metastore=store_url, warehouse=warehouse).read()
    cols = [c for c in ("id", "v", "n", "ds") if c in t.column_names]
    return sorted(zip(*(t.column(c).to_pylist() for c in cols), strict=True))


def record(key: int, v: str, n: int, ds: str | None) -> bytes:
    d: dict[str, Any] = {"id": key, "v": v, "n": n}
    if ds is not None:
        d["ds"] = ds
    return json.dumps(d).encode()


# ---------------------------------------------------------------------- the model test
@pytest.mark.parametrize("partitioned", [False, True], ids=["flat", "partitioned"])
@pytest.mark.parametrize("seed", [1, 2])
def test_upserts_and_deletes_over_txns_equal_the_model(
    store: TxnStore, store_url: str, warehouse: str, seed: int, partitioned: bool
) -> None:
    """Random upserts (new and existing keys, moving rows between partitions), deletes
    (present and absent keys) and aborted txns, through every entry point; after each
    commit the table equals the model and ``last_changes`` counts what the model says."""
    rng = random.Random(seed)
    keyed_table(store, partitioned=partitioned)
    model: dict[int, tuple[str, int, str | None]] = {}
    with StreamingConnection(
        "default.k", record_writer=StrictJsonWriter(), store=store, options=UPSERT
    ) as conn:
        assert conn.key is not None and conn.key.columns == ("id",)
        for txn in range(6):
            conn.begin_transaction()
            txn_model = dict(model)
            changes: dict[int, str] = {}  # key -> last change kind in this txn
            block: list[bytes] = []
            for step in range(rng.randint(1, 40)):
                k = rng.randint(0, 30)
                if rng.random() < 0.3:
                    how = rng.choice(["map", "seq", "scalar"])
                    if block:  # keep call order: the buffered block goes first
                        conn.upsert_block(block)
                        block = []
                    conn.delete({"ID": k} if how == "map" else [k] if how == "seq" else k)
                    txn_model.pop(k, None)
                    changes[k] = "delete"
                    continue
                v, n = f"s{seed}t{txn}x{step}", rng.randint(-5, 5)
                ds = rng.choice(["a", "b", "c"]) if partitioned else None
                how = rng.choice(["one", "block", "rows"])
                if how == "one":
                    if block:
                        conn.upsert_block(block)
                        block = []
                    conn.upsert(record(k, v, n, ds))
                elif how == "block":
                    block.append(record(k, v, n, ds))
                else:
                    if block:
                        conn.upsert_block(block)
                        block = []
                    conn.upsert_rows([(k, v, n)], partition=(ds,) if partitioned else ())
                txn_model[k] = (v, n, ds)
                changes[k] = "upsert"
            if block:
                assert conn.upsert_block(block).accepted == len(block)
            if rng.random() < 0.2:
                conn.abort_transaction()  # nothing of it is applied
            else:
                conn.commit_transaction()
                res = conn.last_changes
                assert res is not None
                assert res.keys == len(changes)
                assert res.inserted == sum(
                    1 for k, c in changes.items() if c == "upsert" and k not in model
                )
                assert res.updated == sum(
                    1 for k, c in changes.items() if c == "upsert" and k in model
                )
                assert res.deleted == sum(
                    1 for k, c in changes.items() if c == "delete" and k in model
                )
                assert res.absent_deletes == sum(
                    1 for k, c in changes.items() if c == "delete" and k not in model
                )
                model = txn_model
            expected = sorted(
                (k, *val) if partitioned else (k, *val[:2]) for k, val in model.items()
            )
            assert read_rows(store_url, warehouse) == expected


# ---------------------------------------------------------------------- the rules
def test_upsert_mode_needs_a_keyed_table(store: TxnStore) -> None:
    keyed_table(store, key=None)
    with pytest.raises(ConfigError, match="has no key: upserts need the table property"):
        StreamingConnection(
            "default.k", record_writer=StrictJsonWriter(), store=store, options=UPSERT
        )


def test_upsert_mode_runs_one_txn_per_batch() -> None:
    with pytest.raises(ConfigError, match="txns_per_batch must be 1"):
        StreamingOptions(mode="upsert", txns_per_batch=2)
    with pytest.raises(ConfigError, match="mode must be one of append, upsert"):
        StreamingOptions(mode="merge")


def test_append_and_upsert_calls_are_refused_in_the_other_mode(
    store: TxnStore, store_url: str, warehouse: str
) -> None:
    keyed_table(store)
    with StreamingConnection(
        "default.k", record_writer=StrictJsonWriter(), store=store, options=UPSERT
    ) as conn:
        conn.begin_transaction()
        for call in (
            lambda: conn.write(record(1, "a", 1, None)),
            lambda: conn.write_block([record(1, "a", 1, None)]),
            lambda: conn.write_many([record(1, "a", 1, None)]),
            lambda: conn.write_rows([(1, "a", 1)]),
        ):
            with pytest.raises(ConfigError, match="opened for upserts"):
                call()
        conn.upsert(record(1, "a", 1, None))
        conn.commit_transaction()
    with StreamingConnection("default.k", record_writer=StrictJsonWriter(), store=store) as conn:
        conn.begin_transaction()
        with pytest.raises(ConfigError, match="opened for appends"):
            conn.upsert(record(2, "b", 2, None))
        with pytest.raises(ConfigError, match="opened for appends"):
            conn.delete(1)
        conn.write(record(1, "dup", 9, None))  # an append may store a key twice
        conn.commit_transaction()
    assert read_rows(store_url, warehouse) == [(1, "a", 1), (1, "dup", 9)]


def test_null_key_and_bad_records_are_rejected_at_the_call(
    store: TxnStore, store_url: str, warehouse: str, tmp_path: Path
) -> None:
    keyed_table(store)
    with StreamingConnection(
        "default.k", record_writer=StrictJsonWriter(), store=store, options=UPSERT
    ) as conn:
        conn.begin_transaction()
        with pytest.raises(SerializationError, match="NULL value in the key"):
            conn.upsert(b'{"v": "no key", "n": 1}')
        with pytest.raises(SerializationError):
            conn.upsert(b'{"id": "x"}')
        with pytest.raises(SerializationError, match="NULL value in the key"):
            conn.delete({"id": None})
        with pytest.raises(ConfigError, match="exactly the key columns"):
            conn.delete({"v": "a"})
        res = conn.upsert_block([b'{"id": 1, "v": "a"}', b'{"v": "b"}', b"{", b'{"id": 2}'])
        assert res.accepted == 2 and [i for i, _ in res.rejected] == [1, 2]
        conn.commit_transaction()  # the txn stayed usable
    assert read_rows(store_url, warehouse) == [(1, "a", None), (2, None, None)]
    dl = tmp_path / "dead"
    opts = StreamingOptions(mode="upsert", housekeeping_interval_s=None, dead_letter_path=str(dl))
    with StreamingConnection(
        "default.k", record_writer=StrictJsonWriter(), store=store, options=opts
    ) as conn:
        conn.begin_transaction()
        conn.upsert(b'{"v": "no key"}')  # to the dead letters, not raised
        conn.commit_transaction()
    lines = [json.loads(x) for f in dl.iterdir() for x in f.read_text().splitlines()]
    assert len(lines) == 1 and "NULL value in the key" in json.dumps(lines[0])


def test_delimited_records_and_a_static_partition(
    store: TxnStore, store_url: str, warehouse: str
) -> None:
    """The connection's record writer parses upserts (here delimited); a static-partition
    connection upserts into its partition and moves a key there from another one."""
    keyed_table(store, partitioned=True)
    w = StrictDelimitedInputWriter(field_delimiter=",")
    with StreamingConnection("default.k", record_writer=w, store=store, options=UPSERT) as c:
        c.begin_transaction()
        c.upsert_block([b"1,a,1,x", b"2,b,2,y"])
        c.commit_transaction()
    with StreamingConnection(
        "default.k", record_writer=w, store=store, options=UPSERT, static_partition=["z"]
    ) as c:
        c.begin_transaction()
        c.upsert(b"1,moved,10")
        c.commit_transaction()
    assert read_rows(store_url, warehouse) == [(1, "moved", 10, "z"), (2, "b", 2, "y")]


def test_an_update_committed_while_begin_waits_restarts_the_txn(
    store: TxnStore, store_factory: Callable[[], TxnStore], store_url: str, warehouse: str
) -> None:
    """A DELETE holds the table when the upsert txn opens and commits while the upsert
    waits for its lock: that txn's commit would fail the write-set check, so
    ``begin_transaction`` aborts it and returns a new txn, whose commit applies the
    upserts on top of the DELETE (no CommitConflictError, nothing lost)."""
    keyed_table(store)
    table = acidstream.table("default.k", metastore=store_url, warehouse=warehouse)
    watcher = store_factory()
    with StreamingConnection(
        "default.k", record_writer=StrictJsonWriter(), store=store, options=UPSERT
    ) as conn:
        conn.begin_transaction()
        conn.upsert_block([record(i, "old", i, None) for i in range(5)])
        conn.commit_transaction()
        paused, go = threading.Event(), threading.Event()
        errors: list[BaseException] = []

        def hook(step: str) -> None:
            if step == "mutation.after_open" and threading.current_thread().name == "delete":
                paused.set()
                assert go.wait(120)

        def manual_delete() -> None:
            try:
                table.delete("id = 0")
            except BaseException as e:  # reported to the test's thread
                errors.append(e)

        def release_when_waiting() -> None:
            # The upsert's begin waits for the DELETE's lock (EXCL_WRITE after a
            # SHARED_WRITE): once its lock request shows WAITING, let the DELETE commit.
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any(
                lk.state is LockState.WAITING for lk in watcher.show_locks()
            ):
                time.sleep(0.02)
            go.set()

        faults.set_hook(hook)
        try:
            t = threading.Thread(target=manual_delete, name="delete")
            t.start()
            assert paused.wait(60)
            r = threading.Thread(target=release_when_waiting)
            r.start()
            conn.begin_transaction()  # opens the txn, then waits for the lock
            r.join()
            t.join(60)
            assert not errors
            aborted = conn.stats().aborted_transactions
            conn.upsert(record(1, "new", 100, None))
            conn.upsert(record(9, "new", 9, None))
            conn.commit_transaction()
        finally:
            faults.set_hook(None)
            go.set()
        assert aborted == 1  # the txn opened before the DELETE committed
        res = conn.last_changes
        assert res is not None and (res.inserted, res.updated) == (1, 1)
    assert read_rows(store_url, warehouse) == sorted(
        [(1, "new", 100), (2, "old", 2), (3, "old", 3), (4, "old", 4), (9, "new", 9)]
    )


# ---------------------------------------------------------------------- two processes
_CHILD = """
import json, sys
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.store import open_store

url, wh, tag, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
store = open_store(url, warehouse=wh)
opts = StreamingOptions(mode="upsert", housekeeping_interval_s=None, lock_wait_s=120)
with StreamingConnection("default.k", record_writer=StrictJsonWriter(), store=store,
                         options=opts) as conn:
    for r in range(rounds):
        conn.begin_transaction()
        # Every round: keys new to the table, the same ones in both processes.
        conn.upsert_block([json.dumps({"id": r * 10 + i, "v": tag, "n": r}).encode()
                           for i in range(10)])
        conn.commit_transaction()
store.close()
print("done", tag)
"""


def test_two_processes_upserting_the_same_new_keys_never_store_a_key_twice(
    store: TxnStore, store_url: str, warehouse: str
) -> None:
    keyed_table(store)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rounds = 8
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, store_url, warehouse, tag, str(rounds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for tag in ("p1", "p2")
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert out.startswith("done")
    t = acidstream.table("default.k", metastore=store_url, warehouse=warehouse).read()
    ids = t.column("id").to_pylist()
    assert sorted(ids) == list(range(rounds * 10))  # every key once
    tags = set(t.column("v").to_pylist())
    assert tags <= {"p1", "p2"}
    assert pa.compute.count_distinct(t.column("id")).as_py() == t.num_rows


def test_keyed_writer_rejects_null_keys_alike_per_record_and_per_block(store: TxnStore) -> None:
    """``KeyedWriter`` (the HTTP server's parse of changes): ``encode`` and
    ``encode_block`` accept and reject the same records with the same errors."""
    t = keyed_table(store, partitioned=True, key="id,ds")
    cols = [n for n, _ in t.columns]
    inner = StrictJsonWriter().bind(t.schema, partition_columns=t.partition_keys)
    key = upsert_key(t)
    w = KeyedWriter(inner, columns=cols, partition_columns=t.partition_names, key=key)
    records = [
        b'{"id": 1, "v": "a", "ds": "x"}',
        b'{"v": "no id", "ds": "x"}',
        b'{"id": 2, "v": "no ds"}',
        b"{",
        b'{"id": null, "ds": null}',
        b'{"id": 3, "ds": "y"}',
    ] * 7
    one: list[tuple[int, str]] = []
    for i, r in enumerate(records):
        try:
            w.encode(r)
        except SerializationError as e:
            one.append((i, str(e)))
    enc = w.encode_block(records)
    assert [(i, str(e)) for i, e in enc.rejected] == one
    assert enc.good_indices.to_pylist() == [i for i in range(len(records)) if i % 6 in (0, 5)]
    assert enc.table.num_rows == enc.partitions.num_rows == 14
    assert {m for _, m in one if "NULL" in m} == {
        "a NULL value in the key column 'id'",
        "a NULL value in the key column 'ds'",
    }


def test_a_key_with_a_partition_column(store: TxnStore, store_url: str, warehouse: str) -> None:
    """Key (id, ds): one id in two partitions is two keys; deletes name both parts."""
    keyed_table(store, partitioned=True, key="id,ds")
    with StreamingConnection(
        "default.k", record_writer=StrictJsonWriter(), store=store, options=UPSERT
    ) as conn:
        conn.begin_transaction()
        conn.upsert_block([record(1, "a", 1, "x"), record(1, "b", 2, "y"), record(2, "c", 3, "x")])
        conn.commit_transaction()
        conn.begin_transaction()
        conn.delete({"id": 1, "ds": "x"})
        conn.delete_rows([(2, None, None)], partition=("x",))
        conn.upsert(record(1, "b2", 5, "y"))
        conn.commit_transaction()
        res = conn.last_changes
        assert res is not None and (res.deleted, res.updated) == (2, 1)
    assert read_rows(store_url, warehouse) == [(1, "b2", 5, "y")]
