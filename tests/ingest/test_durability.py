"""Durability ``fsync | flush`` of StreamingConnection commits (issue 33), against a real
metastore (SQLite and PostgreSQL) and real files: which files are synced, when, together,
and how the metastore commit is made durable."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from acidstream.acid import layout
from acidstream.acid.errors import ConfigError
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore
from tests.ingest.conftest import MakeTable, snapshot_read


@dataclass(frozen=True)
class Sync:
    path: str
    thread: str


@pytest.fixture
def syncs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Sync]]:
    """Every ``fdatasync``/``fsync`` this process makes, with the file's path and the
    thread (the real call still runs: this observes, it replaces nothing)."""
    seen: list[Sync] = []
    lock = threading.Lock()

    def watch(real: Any) -> Any:
        def call(fd: int) -> None:
            try:
                path = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                path = "?"
            with lock:
                seen.append(Sync(path, threading.current_thread().name))
            real(fd)

        return call

    monkeypatch.setattr(os, "fdatasync", watch(os.fdatasync))
    monkeypatch.setattr(os, "fsync", watch(os.fsync))
    yield seen


def _events(lo: int, hi: int) -> list[bytes]:
    return [f'{{"id": {i}, "msg": "m{i}"}}'.encode() for i in range(lo, hi)]


def _write(store: TxnStore, *, txns: int, batch: int, **kw: Any) -> StreamingConnection:
    conn = StreamingConnection(
        "t",
        record_writer=StrictJsonWriter(),
        store=store,
        options=StreamingOptions(txns_per_batch=batch, housekeeping_interval_s=None),
        **kw,
    )
    with conn:
        for k in range(txns):
            conn.begin_transaction()
            conn.write_many(_events(k * 50, (k + 1) * 50))
            conn.commit_transaction()
    return conn


def _in(path: str, root: str) -> bool:
    return path.startswith(root)


def test_fsync_syncs_a_commits_files_together_and_each_once(
    store: TxnStore, make_table: MakeTable, syncs: list[Sync]
) -> None:
    t = make_table("t", "id int, msg string", buckets=("id", 2))
    _write(store, txns=3, batch=3)
    root = str(Path(t.location or "").resolve())
    mine = [s for s in syncs if _in(s.path, root)]
    data = [s for s in mine if s.path.endswith(("bucket_00000", "bucket_00001"))]
    sides = [s for s in mine if s.path.endswith(layout.SIDE_FILE_SUFFIX)]
    markers = [s for s in mine if s.path.endswith(layout.ACID_FORMAT_FILE)]
    # Each data file: a footer per commit (two intermediate, one final).
    assert (
        sorted(s.path.rsplit("/", 1)[1] for s in data)
        == ["bucket_00000"] * 3 + ["bucket_00001"] * 3
    )
    # Each side file: its two lengths, each synced once (its first entry, 0, is not synced
    # on its own). The delta's marker: with the first commit's data (by each file that
    # found it unsynced, in the same group), never again.
    assert len(sides) == 4 and len({s.path for s in sides}) == 2
    assert 1 <= len(markers) <= 2
    assert max(mine.index(m) for m in markers) < mine.index(sides[0])
    # A commit's files are synced at once: some of them on the syncing threads.
    assert any(s.thread.startswith("acidstream-fsync") for s in data + sides)
    assert sorted(snapshot_read(store, t).column("id").to_pylist()) == list(range(150))


def test_flush_durability_syncs_no_file_and_reads_back(
    store: TxnStore, make_table: MakeTable, syncs: list[Sync]
) -> None:
    t = make_table("t", "id int, msg string", buckets=("id", 2))
    for batch in (1, 3):
        _write(store, txns=3, batch=batch, durability="flush")
    root = str(Path(t.location or "").resolve())
    assert [s for s in syncs if _in(s.path, root)] == []
    assert sorted(snapshot_read(store, t).column("id").to_pylist()) == sorted(list(range(150)) * 2)


@pytest.mark.parametrize(("durability", "level"), [("fsync", 2), ("flush", 1)])
def test_sqlite_commit_is_synced_only_in_fsync_mode(
    tmp_path: Path, durability: str, level: int
) -> None:
    """The commit's DB transaction runs with ``synchronous=FULL`` (2) in fsync mode and
    ``NORMAL`` (1) in flush mode; the batch's other calls stay ``NORMAL``."""
    from acidstream.txn.store import open_store
    from acidstream.txn.store_sqlite import SqliteDatabase

    with open_store(f"sqlite:///{tmp_path}/m.db", warehouse=str(tmp_path / "wh")) as store:
        store.create_table(
            TableDef("default", "t", (("id", "int"), ("msg", "string")),
                     parameters={"transactional": "true"})
        )  # fmt: skip
        db = store.database
        assert isinstance(db, SqliteDatabase)

        def level_now() -> int:
            conn = db._conn
            assert isinstance(conn, sqlite3.Connection)
            return int(conn.execute("PRAGMA synchronous").fetchone()[0])

        with StreamingConnection(
            "t", record_writer=StrictJsonWriter(), store=store, durability=durability,
            options=StreamingOptions(txns_per_batch=1, housekeeping_interval_s=None),
        ) as conn:  # fmt: skip
            conn.begin_transaction()
            assert level_now() == 1
            conn.write_many(_events(0, 10))
            conn.commit_transaction()
            assert level_now() == level  # the commit's own setting
            conn.begin_transaction()  # a new batch: open, allocate, lock
            assert level_now() == 1
            conn.abort_transaction()


def test_durability_comes_from_the_writer_then_the_table(
    store: TxnStore, make_table: MakeTable
) -> None:
    store.create_table(
        TableDef("default", "f", (("id", "int"), ("msg", "string")),
                 parameters={"transactional": "true", "acidstream.durability": "Flush"})
    )  # fmt: skip
    make_table("t", "id int, msg string")

    def durability(table: str, option: str | None = None, keyword: str | None = None) -> str:
        with StreamingConnection(
            table, record_writer=StrictJsonWriter(), store=store, durability=keyword,
            options=StreamingOptions(durability=option, housekeeping_interval_s=None),
        ) as c:  # fmt: skip
            return c.durability

    assert durability("t") == "fsync"
    assert durability("f") == "flush"
    assert durability("f", "fsync") == "fsync"
    assert durability("t", "fsync", "flush") == "flush"
    with pytest.raises(ConfigError, match="durability must be fsync or flush"):
        StreamingOptions(durability="sync")
    with pytest.raises(ConfigError, match=r"default\.b: table property acidstream\.durability"):
        store.create_table(
            TableDef("default", "b", (("id", "int"),),
                     parameters={"transactional": "true", "acidstream.durability": "always"})
        )  # fmt: skip
