"""The embedded SQLite backend: one file, no server, safe for several processes on one host.

Settings and why:

* ``journal_mode=WAL``: readers never block the writer and vice versa.
* ``synchronous=NORMAL``: in WAL mode a commit is durable against a process
  crash and atomic against power loss; only the last commits before a power
  cut may be lost. This is what makes >1,000 txn commits/s possible. A writer's
  txn commit with durability ``fsync`` (the default; ``acidstream.acid.durability``)
  runs with ``synchronous=FULL`` instead (:meth:`Database.commit_durability`): that one
  DB transaction's WAL frames are synced before ``COMMIT`` returns, about 1 ms here;
  the other calls (open, allocate, lock, heartbeat) stay ``NORMAL``, their loss to a
  power cut only aborts txns that never committed.
* ``BEGIN IMMEDIATE`` for every writing call: the write lock is taken up front,
  so a read-then-write sequence can never be invalidated by another process
  (no ``SQLITE_BUSY`` upgrade deadlocks), which serialises all writers like a
  global mutex.
* ``busy_timeout``: waiting for that lock is handled by SQLite itself; a
  ``database is locked`` that still escapes is retried by :class:`~acidstream.txn.db.Database`.

Read-only (``open_store(url, read_only=True)``): the file is opened with a ``mode=ro``
URI, so nothing is created (no directory, no database, no journal mode change). A WAL
database whose directory cannot be written (a read-only mount) cannot get its ``-shm``
file; it is then opened ``immutable=1``, which is exact as long as nobody writes it,
and nobody can (a non-empty ``-wal`` file left behind by a crash would be ignored by
``immutable``, so that case is refused instead).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from acidstream.acid.errors import ConfigError
from acidstream.txn.db import Database, ErrorKind, Row, Tx

__all__ = ["SqliteDatabase", "sqlite_path_from_url"]

BUSY_TIMEOUT_MS = 30_000


def sqlite_path_from_url(url: str) -> str:
    """``sqlite:///rel/path.db`` -> ``rel/path.db``; ``sqlite:////abs/path.db`` -> ``/abs/path.db``.

    This is SQLAlchemy's convention: three slashes, then the path.
    """
    prefix = "sqlite:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        raise ConfigError(f"not a SQLite URL (expected sqlite:///path): {url!r}")
    path = url[len(prefix) :]
    if path == ":memory:" or "mode=memory" in path:
        # SQLite would keep it in this one connection (or, opened as a path, create a
        # file named ':memory:'): every other client -- the compactor, a reader, another
        # writer -- would see an empty store, and commits would vanish at exit while
        # their files stay. A metastore must outlive the process.
        raise ConfigError(
            f"{url!r}: an in-memory metastore is not supported (it would end with this "
            "process, and no other client could see it); use sqlite:///path/metastore.db"
        )
    return path


class SqliteDatabase(Database):
    """A SQLite file in WAL mode."""

    serialises_writers = True  # BEGIN IMMEDIATE: one writer at a time

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        super().__init__(url, read_only=read_only)
        self.path = sqlite_path_from_url(url)
        self._conn: sqlite3.Connection | None = None
        self._synchronous = "NORMAL"  # the connection's setting now

    def _connect(self) -> None:
        if self._conn is not None:
            return
        if self.read_only:
            self._conn = self._connect_read_only()
            return
        parent = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(parent, exist_ok=True)
        # isolation_level=None: we issue BEGIN/COMMIT ourselves. check_same_thread=False:
        # calls are serialised by Database._mutex, so a heartbeat thread may share the store.
        conn = sqlite3.connect(
            self.path,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,
            check_same_thread=False,
            cached_statements=256,
        )
        try:
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._synchronous = "NORMAL"
        except BaseException:
            conn.close()  # e.g. a read-only file system: do not keep the file open
            raise
        self._conn = conn

    def _connect_read_only(self) -> sqlite3.Connection:
        if not os.path.isfile(self.path):
            raise ConfigError(f"no metastore at {self.url}")
        uri = f"file:{quote(os.path.abspath(self.path))}?mode=ro"
        wal = self.path + "-wal"
        # immutable=1 ignores the WAL: only safe when there are no commits left in one.
        wal_empty = not os.path.exists(wal) or os.path.getsize(wal) == 0
        err: sqlite3.OperationalError | None = None
        for suffix in ("", "&immutable=1") if wal_empty else ("",):
            conn = sqlite3.connect(
                uri + suffix,
                uri=True,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            try:
                # Reading the schema opens the WAL index: this is where a read-only
                # directory without a -shm file fails.
                conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
                return conn
            except sqlite3.OperationalError as e:
                conn.close()
                err = e
        raise ConfigError(f"cannot read the metastore at {self.url}: {err}") from err

    def _disconnect(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
            self._conn = None

    def _c(self) -> sqlite3.Connection:
        assert self._conn is not None, "not connected"
        return self._conn

    def _begin(self, *, write: bool) -> None:
        if write and not self.read_only:
            # The pragma cannot change inside a transaction: set before BEGIN, and only
            # when it changes (a few microseconds; the setting is the connection's).
            want = "FULL" if self._commit_sync else "NORMAL"
            if want != self._synchronous:
                self._c().execute(f"PRAGMA synchronous={want}")
                self._synchronous = want
        self._c().execute("BEGIN IMMEDIATE" if write else "BEGIN")

    def _commit(self) -> None:
        self._c().execute("COMMIT")

    def _rollback(self) -> None:
        if self._conn is not None and self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def _classify(self, exc: BaseException) -> ErrorKind:
        if isinstance(exc, sqlite3.OperationalError):
            msg = str(exc).lower()
            if "locked" in msg or "busy" in msg:
                return ErrorKind.TRANSIENT
        return ErrorKind.OTHER

    def _query(self, sql: str, params: Sequence[Any]) -> list[Row]:
        return self._c().execute(sql, params).fetchall()

    def _execute(self, sql: str, params: Sequence[Any]) -> None:
        self._c().execute(sql, params)

    def _count(self, sql: str, params: Sequence[Any]) -> int:
        return self._c().execute(sql, params).rowcount

    def _executemany(self, sql: str, rows: list[Sequence[Any]]) -> None:
        self._c().executemany(sql, rows)

    def _lock_for_migration(self, tx: Tx) -> None:
        pass  # BEGIN IMMEDIATE already serialises writers

    def _has_table(self, name: str) -> bool:
        row = (
            self._c()
            .execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE",
                (name,),
            )
            .fetchone()
        )
        return row is not None
