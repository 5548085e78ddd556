"""The PostgreSQL backend (psycopg 3), for many processes on many hosts.

Writing calls run at READ COMMITTED and serialise where it matters with row
locks, as Hive's metastore does: the ``NEXT_TXN_ID`` / ``NEXT_WRITE_ID`` /
``NEXT_LOCK_ID`` counter rows, ``SELECT ... FOR UPDATE`` on the ``TXNS`` rows a
call changes, and the ``TXN_LOCK_TBL`` mutex row for update/delete commits.
Reads run at REPEATABLE READ so a snapshot's several queries see one state.
Each call runs in psycopg's pipeline mode: ``BEGIN``, statements whose result
is not needed and ``COMMIT`` travel together, so a call costs about one
network round trip per query whose result it reads.
Serialization failures and deadlocks roll the DB transaction back and are
retried by :class:`~acidstream.txn.db.Database`.

URL: ``postgresql://user@host:port/dbname[?schema=name]``; ``schema`` (not a
libpq parameter) puts the metastore tables in that schema via ``search_path``
and creates it if needed.

Read-only (``open_store(url, read_only=True)``): the session runs with
``default_transaction_read_only=on``, the schema is neither created nor migrated, and
the store refuses every writing call before it reaches the server.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import psycopg.errors

from acidstream.acid.errors import ConfigError
from acidstream.txn.db import Database, ErrorKind, Row, Tx

__all__ = ["PostgresDatabase", "split_schema"]

_TRANSIENT = (
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.LockNotAvailable,
)
# Any lock that is just a key: serialises migrations of one schema across processes.
_MIGRATION_LOCK_KEY = 0x41C1D5


def split_schema(url: str) -> tuple[str, str | None]:
    """Remove our ``schema`` query parameter from a PostgreSQL URL."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), None)
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    return urlunsplit(parts._replace(query=rest)), schema or None


class PostgresDatabase(Database):
    """A PostgreSQL database reached through psycopg 3."""

    for_update_clause = " FOR UPDATE"

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        super().__init__(url, read_only=read_only)
        self.conninfo, self.schema = split_schema(url)
        if self.schema is not None and not self.schema.replace("_", "").isalnum():
            raise ConfigError(f"bad schema name {self.schema!r}")
        self._conn: psycopg.Connection[Any] | None = None
        self._pipe_cm: AbstractContextManager[psycopg.Pipeline] | None = None
        self._pipe: psycopg.Pipeline | None = None
        self._sql: dict[str, str] = {}

    @property
    def backend_pid(self) -> int | None:
        """The server process of the current connection (tests use it to kill the connection)."""
        return None if self._conn is None else self._conn.info.backend_pid

    def _connect(self) -> None:
        if self._conn is not None and not self._conn.closed:
            return
        options = []
        if self.schema:
            options.append(f"-c search_path={self.schema}")
        if self.read_only:
            options.append("-c default_transaction_read_only=on")
        kwargs: dict[str, Any] = {"options": " ".join(options)} if options else {}
        conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10, **kwargs)
        conn.prepare_threshold = 1
        if self.schema and not self.read_only:
            try:
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            except psycopg.errors.UniqueViolation:
                pass  # another process created it at the same moment
        self._conn = conn

    def _disconnect(self) -> None:
        self._pipe_cm = self._pipe = None
        if self._conn is not None:
            try:
                self._conn.close()
            except psycopg.Error:
                pass
            self._conn = None

    def _c(self) -> psycopg.Connection[Any]:
        assert self._conn is not None, "not connected"
        return self._conn

    def _begin(self, *, write: bool) -> None:
        conn = self._c()
        self._pipe_cm = conn.pipeline()
        self._pipe = self._pipe_cm.__enter__()
        conn.execute("BEGIN" if write else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        if write and self._commit_sync is False:
            # A writer's durability "flush" (acidstream.acid.durability): COMMIT returns
            # before the server's WAL flush; a server crash may lose the last commits,
            # never half of one. Pipelined with BEGIN: no round trip of its own.
            conn.execute("SET LOCAL synchronous_commit TO OFF")

    def _end_pipeline(self) -> None:
        cm, self._pipe_cm, self._pipe = self._pipe_cm, None, None
        if cm is not None:
            cm.__exit__(None, None, None)  # syncs: raises the first error of the batch

    def _commit(self) -> None:
        self._c().execute("COMMIT")
        self._end_pipeline()

    def _flush(self) -> None:
        if self._pipe is not None:
            self._pipe.sync()

    def _rollback(self) -> None:
        try:
            self._end_pipeline()
        except psycopg.Error:
            pass  # the error being handled already; the transaction is failed or gone
        if self._conn is None or self._conn.closed:
            return
        try:
            self._conn.execute("ROLLBACK")
        except psycopg.Error:
            self._disconnect()

    def _classify(self, exc: BaseException) -> ErrorKind:
        if isinstance(exc, _TRANSIENT):
            return ErrorKind.TRANSIENT
        if self._conn is None or self._conn.closed or self._conn.broken:
            return ErrorKind.LOST
        if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            return ErrorKind.LOST
        return ErrorKind.OTHER

    def _pg(self, sql: str) -> str:
        out = self._sql.get(sql)
        if out is None:
            out = self._sql[sql] = sql.replace("?", "%s")
        return out

    def _query(self, sql: str, params: Sequence[Any]) -> list[Row]:
        return self._c().execute(self._pg(sql), params).fetchall()

    def _execute(self, sql: str, params: Sequence[Any]) -> None:
        self._c().execute(self._pg(sql), params)

    def _count(self, sql: str, params: Sequence[Any]) -> int:
        cur = self._c().execute(self._pg(sql), params)
        self._flush()
        return cur.rowcount

    def _executemany(self, sql: str, rows: list[Sequence[Any]]) -> None:
        if rows:
            self._c().cursor().executemany(self._pg(sql), rows)

    def _lock_for_migration(self, tx: Tx) -> None:
        tx.q("SELECT pg_advisory_xact_lock(?)", _MIGRATION_LOCK_KEY)

    def _has_table(self, name: str) -> bool:
        # Unquoted identifiers are folded to lower case; to_regclass follows search_path.
        row = self._c().execute("SELECT to_regclass(%s)", (name.lower(),)).fetchone()
        return row is not None and row[0] is not None
