"""Fixtures of the mutation tests: tables as the ingest tests make them, rows committed by
a streaming connection, and the Table handle on the ``store`` fixture's metastore."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa
import pytest

import acidstream
from acidstream import Table
from acidstream.acid import file_reader, key_lookup
from acidstream.compaction import Cleaner, Worker
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.store import TxnStore
from tests.ingest.conftest import make_table

__all__ = ["Insert", "insert", "make_table", "rows_of"]

Insert = Callable[..., None]


@pytest.fixture
def insert(store: TxnStore) -> Insert:
    """``insert("t", [{"id": 1, ...}, ...])``: one streaming txn committing the rows."""

    return lambda name, rows: insert_rows(store, name, rows)


def insert_rows(store: TxnStore, name: str, rows: Iterable[Mapping[str, Any]]) -> None:
    """One streaming txn committing ``rows`` (partition values taken from the records)."""
    with StreamingConnection(
        name, record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(housekeeping_interval_s=None),
    ) as c:  # fmt: skip
        c.begin_transaction()
        c.write_many(json.dumps(dict(r)).encode() for r in rows)
        c.commit_transaction()


@pytest.fixture
def handle(store_url: str, warehouse: str) -> Callable[[str], Table]:
    """``handle("t")``: the Table handle of ``default.t``."""

    def make(name: str) -> Table:
        return acidstream.table(f"default.{name}", metastore=store_url, warehouse=warehouse)

    return make


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every ORC column path the ACID reader (and a MERGE's key lookup, for the stripes
    it reads whole) decodes from here on."""
    seen: list[str] = []
    real = file_reader.read_orc_columns

    def spy(*args: object, **kw: object) -> pa.Table:
        seen.extend(kw["columns"])  # type: ignore[arg-type]
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(file_reader, "read_orc_columns", spy)
    # a MERGE's key lookup reads whole stripes the same way (acidstream.acid.key_lookup)
    monkeypatch.setattr(key_lookup, "read_orc_columns", spy)
    yield seen


def rows_of(t: pa.Table, columns: list[str] | None = None) -> list[tuple[Any, ...]]:
    """The rows of ``t`` (or of its ``columns``) as sorted tuples (None sorts first)."""
    names = columns or t.column_names
    cols = [t.column(n).to_pylist() for n in names]
    return sorted(zip(*cols, strict=True), key=lambda r: [(v is not None, v) for v in r])


def wait_for_a_waiting_lock(store_url: str, *, timeout_s: float = 60.0) -> bool:
    """Poll the metastore until some lock is WAITING (a writer queued behind another);
    True if one was seen within ``timeout_s``. The lock tables offer no event to wait on."""
    import threading
    import time

    from acidstream.txn.locks import LockState
    from acidstream.txn.store import open_store

    watcher = open_store(store_url)
    try:
        deadline = time.monotonic() + timeout_s
        pause = threading.Event()
        while time.monotonic() < deadline:
            if any(lk.state is LockState.WAITING for lk in watcher.show_locks()):
                return True
            pause.wait(0.01)
        return False
    finally:
        watcher.close()


def compact_major(store: TxnStore, name: str) -> None:
    """A major compaction of ``default.<name>`` run to the end, then the Cleaner's pass."""
    q = CompactionQueue(store)
    q.request("default", name, major=True)
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.state == "r", out
    Cleaner(store, queue=q).run_once()
