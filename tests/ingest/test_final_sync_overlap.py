"""The batch's last commit syncs its files while the metastore runs the commit's
statements (issue 33: 1,000-row commits at batch 1), and still commits only after them.

Real SQLite metastore, real files: ``fdatasync`` is observed (the real call runs), and
at the data file's sync the metastore connection must be inside the commit's DB
transaction, with the txn not yet committed for any other client.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnState, TxnStore, open_store
from acidstream.txn.store_sqlite import SqliteDatabase


@dataclass(frozen=True)
class DataSync:
    thread: str
    in_commit: bool  # the writer's metastore connection was inside a DB transaction
    txn_state: TxnState | None  # the txn, as another client saw it meanwhile


def _table(store: TxnStore) -> TableDef:
    """The tests' table ``default.t (id int, msg string)``, unpartitioned."""
    return store.create_table(
        TableDef("default", "t", (("id", "int"), ("msg", "string")),
                 parameters={"transactional": "true"})
    )  # fmt: skip


@pytest.mark.parametrize("batch", [1, 3])
def test_the_last_commit_of_a_batch_runs_its_statements_during_the_file_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    url = f"sqlite:///{tmp_path}/m.db"
    with open_store(url, warehouse=str(tmp_path / "wh")) as store, open_store(url) as other:
        store.create_table(
            TableDef("default", "t", (("id", "int"), ("msg", "string")),
                     parameters={"transactional": "true"})
        )  # fmt: skip
        db = store.database
        assert isinstance(db, SqliteDatabase)
        current: list[int] = []
        seen: list[DataSync] = []
        lock = threading.Lock()
        real = os.fdatasync
        began = threading.Event()  # the writer's metastore began a DB transaction
        real_begin = db._begin

        def begin(*, write: bool) -> None:
            real_begin(write=write)
            began.set()

        def watch(fd: int) -> None:
            path = os.readlink(f"/proc/self/fd/{fd}")
            if path.endswith("bucket_00000") and current:
                if threading.current_thread() is not threading.main_thread():
                    # A sync off the writing thread: the commit's DB transaction begins
                    # meanwhile (the writer does not wait for the sync to begin it).
                    began.wait(timeout=30)
                conn: Any = db._conn
                state = other.txn_state(current[-1])
                with lock:
                    seen.append(
                        DataSync(threading.current_thread().name, conn.in_transaction, state)
                    )
            real(fd)

        monkeypatch.setattr(os, "fdatasync", watch)
        monkeypatch.setattr(db, "_begin", begin)
        with StreamingConnection(
            "t", record_writer=StrictJsonWriter(), store=store,
            options=StreamingOptions(txns_per_batch=batch, housekeeping_interval_s=None),
        ) as conn:  # fmt: skip
            for k in range(batch):
                current.append(conn.begin_transaction())
                conn.write_many([f'{{"id": {k}, "msg": "m"}}'.encode()])
                began.clear()
                conn.commit_transaction()
                assert other.txn_state(current[-1]) is TxnState.COMMITTED
        # The batch's last commit: its file synced on the sync thread inside the commit's
        # DB transaction (its statements ran meanwhile), the txn still open for others.
        last = seen[-1]
        assert last.thread.startswith("acidstream-sync")
        assert last.in_commit
        assert last.txn_state is TxnState.OPEN
        assert len(seen) == batch  # one data sync per commit


@pytest.mark.parametrize("batch", [1, 3])
def test_a_failed_sync_of_the_last_commit_aborts_it_and_keeps_what_was_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    """The disk fails the last commit's data sync (on the sync thread): the commit raises
    a typed StorageError, its txn is aborted (never committed), the batch's earlier txns
    and the table's earlier batches read back, and the file is left readable."""
    from acidstream.acid.errors import StorageError
    from tests.ingest.conftest import snapshot_read

    url = f"sqlite:///{tmp_path}/m.db"
    with open_store(url, warehouse=str(tmp_path / "wh")) as store, open_store(url) as other:
        table = _table(store)
        opts = StreamingOptions(txns_per_batch=batch, housekeeping_interval_s=None)
        with StreamingConnection(
            "t", record_writer=StrictJsonWriter(), store=store, options=opts
        ) as c:
            c.begin_transaction()
            c.write_many([b'{"id": 100, "msg": "before"}'])
            c.commit_transaction()  # an earlier batch (or txn), committed
        real = os.fdatasync
        failing = threading.Event()

        def flaky(fd: int) -> None:
            if failing.is_set() and os.readlink(f"/proc/self/fd/{fd}").endswith("bucket_00000"):
                raise OSError(5, "Input/output error (injected)")
            real(fd)

        monkeypatch.setattr(os, "fdatasync", flaky)
        txns: list[int] = []
        with StreamingConnection(
            "t", record_writer=StrictJsonWriter(), store=store, options=opts
        ) as c:
            for k in range(batch):
                txns.append(c.begin_transaction())
                c.write_many([f'{{"id": {k}, "msg": "m"}}'.encode()])
                if k < batch - 1:
                    c.commit_transaction()
                    continue
                failing.set()
                with pytest.raises(StorageError, match="aborted"):
                    c.commit_transaction()
                failing.clear()
        assert other.txn_state(txns[-1]) is TxnState.ABORTED
        assert all(other.txn_state(t) is TxnState.COMMITTED for t in txns[:-1])
        ids = sorted(snapshot_read(store, table).column("id").to_pylist())
        assert ids == [*range(batch - 1), 100]


def test_a_failed_sync_of_an_intermediate_commit_aborts_it_and_keeps_what_was_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An intermediate commit of a 3-txn batch (its data sync on the sync thread while the
    statements run, since its rows were not parsed ahead) fails its fdatasync: a typed
    StorageError, that txn aborted, the batch's committed txn reads back and the batch is
    over (its last txn is not started)."""
    from acidstream.acid.errors import StorageError
    from tests.ingest.conftest import snapshot_read

    url = f"sqlite:///{tmp_path}/m.db"
    with open_store(url, warehouse=str(tmp_path / "wh")) as store, open_store(url) as other:
        table = _table(store)
        real = os.fdatasync
        failing = threading.Event()
        threads: list[str] = []

        def flaky(fd: int) -> None:
            if failing.is_set() and os.readlink(f"/proc/self/fd/{fd}").endswith("bucket_00000"):
                threads.append(threading.current_thread().name)
                raise OSError(5, "Input/output error (injected)")
            real(fd)

        monkeypatch.setattr(os, "fdatasync", flaky)
        opts = StreamingOptions(txns_per_batch=3, housekeeping_interval_s=None)
        with StreamingConnection(
            "t", record_writer=StrictJsonWriter(), store=store, options=opts
        ) as c:
            first = c.begin_transaction()
            c.write_many([b'{"id": 0, "msg": "m"}'])
            c.commit_transaction()
            second = c.begin_transaction()
            c.write_many([b'{"id": 1, "msg": "m"}'])
            failing.set()
            with pytest.raises(StorageError, match="aborted"):
                c.commit_transaction()
            failing.clear()
        # (The commit's own sync failed on the sync thread; cutting the file back after it
        # syncs on the writing thread, which the injected fault fails too.)
        assert threads and threads[0].startswith("acidstream-sync")
        assert other.txn_state(first) is TxnState.COMMITTED
        assert other.txn_state(second) is TxnState.ABORTED
        assert snapshot_read(store, table).column("id").to_pylist() == [0]
