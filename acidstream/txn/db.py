"""The database layer under the store: one connection, one DB transaction per call, retries.

Every store operation is a function of a :class:`Tx` run by :meth:`Database.run`
inside exactly one database transaction. The SQL is written once with ``?``
placeholders; the PostgreSQL backend rewrites them to ``%s``.

Failure handling (the part that makes the store safe to use from many
processes):

* A transient failure *before* ``COMMIT`` (SQLite busy, PostgreSQL
  serialization failure or deadlock, a connection lost mid-statement) means the
  database rolled the whole transaction back, so the whole call is retried
  with capped, jittered exponential backoff (tenacity).
* A connection lost *during* ``COMMIT`` leaves the outcome unknown: idempotent
  calls (reads, heartbeats) are retried, anything else raises the caller's
  "unknown" error (``CommitStateUnknownError`` for ``commit_txn``).
* Anything else surfaces as a typed :class:`~acidstream.acid.errors.TransactionError`.

Fault injection for tests goes through :mod:`acidstream.acid.faults` (the one test-hook module):
each statement boundary of a call is a named step (``commit_txn.before_commit``...).
"""

from __future__ import annotations

import abc
import contextlib
import enum
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential_jitter,
)

from acidstream.acid import faults
from acidstream.acid.errors import AcidStreamError, ConfigError, TransactionError

__all__ = ["Database", "ErrorKind", "Tx", "redact_url"]

T = TypeVar("T")
Row = tuple[Any, ...]


def redact_url(url: str) -> str:
    """The URL without its password, for messages (``postgresql://u:***@host/db``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


class ErrorKind(enum.Enum):
    """How a driver exception is handled."""

    TRANSIENT = "transient"  # rolled back; retry the whole DB transaction
    LOST = "lost"  # connection gone; reconnect
    OTHER = "other"  # a real error


class _Transient(Exception):
    """Internal: the DB transaction surely did not commit; retrying it is safe."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class Tx:
    """The handle a store operation gets: runs SQL inside the current DB transaction."""

    __slots__ = ("_db", "for_update")

    def __init__(self, db: Database) -> None:
        self._db = db
        self.for_update = db.for_update_clause

    @property
    def read_only(self) -> bool:
        """Whether the store was opened read-only (an older schema may then lack tables)."""
        return self._db.read_only

    def for_update_of(self, alias: str) -> str:
        """Row-lock clause for a join's ``alias`` table (empty on SQLite, which locks the file)."""
        return f"{self.for_update} OF {alias}" if self.for_update else ""

    def q(self, sql: str, *params: Any) -> list[Row]:
        """Run a query and return all rows."""
        return self._db._query(sql, params)

    def one(self, sql: str, *params: Any) -> Row | None:
        """Run a query and return its first row (or ``None``)."""
        rows = self._db._query(sql, params)
        return rows[0] if rows else None

    def x(self, sql: str, *params: Any) -> None:
        """Run a statement whose result is not needed (PostgreSQL may pipeline it)."""
        self._db._execute(sql, params)

    def count(self, sql: str, *params: Any) -> int:
        """Run a statement and return the number of rows it changed."""
        return self._db._count(sql, params)

    def xmany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run a statement once per parameter row."""
        self._db._executemany(sql, list(rows))

    def crash_point(self, name: str) -> None:
        """Give tests a chance to crash or disturb the store at a named step."""
        self._db.crash_point(name)

    def flush(self) -> None:
        """Make the statements so far reach the server (PostgreSQL pipelines them): the
        server runs them while the caller waits for something else."""
        self._db._flush()

    def has_table(self, name: str) -> bool:
        """Whether the metastore schema has a table of this name."""
        return self._db._has_table(name)


class Database(abc.ABC):
    """One connection to the metastore database, used by one store.

    Calls are serialised by a lock, so a store may be shared by threads (for
    example a heartbeat thread), but each process should open its own store.
    """

    for_update_clause = ""
    #: Every writing DB transaction holds one lock for its whole length (SQLite's write
    #: lock), so the order of its statements does not change what it blocks.
    serialises_writers = False
    max_attempts = 8
    max_retry_s = 60.0
    #: Inside :meth:`commit_durability`: whether its writing calls commit synced (the
    #: backends read it in ``_begin``); ``None``: the backend's default.
    _commit_sync: bool | None = None

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        self.url = url
        self.read_only = read_only
        self.display_url = redact_url(url)
        self._mutex = threading.RLock()

    # -- backend hooks ------------------------------------------------------------------------
    @abc.abstractmethod
    def _connect(self) -> None:
        """Open the connection if it is not open."""

    @abc.abstractmethod
    def _disconnect(self) -> None:
        """Drop the connection without raising."""

    @abc.abstractmethod
    def _begin(self, *, write: bool) -> None:
        """Start a DB transaction (write: takes the write lock / read-committed with row locks)."""

    @abc.abstractmethod
    def _commit(self) -> None: ...

    @abc.abstractmethod
    def _rollback(self) -> None:
        """Roll back, ignoring errors (the connection may be gone)."""

    @abc.abstractmethod
    def _classify(self, exc: BaseException) -> ErrorKind: ...

    @abc.abstractmethod
    def _query(self, sql: str, params: Sequence[Any]) -> list[Row]: ...

    @abc.abstractmethod
    def _execute(self, sql: str, params: Sequence[Any]) -> None: ...

    @abc.abstractmethod
    def _count(self, sql: str, params: Sequence[Any]) -> int: ...

    def _flush(self) -> None:
        """Make every statement so far reach the server (a pipelining backend overrides it)."""
        return None

    @abc.abstractmethod
    def _executemany(self, sql: str, rows: list[Sequence[Any]]) -> None: ...

    @abc.abstractmethod
    def _lock_for_migration(self, tx: Tx) -> None:
        """Serialise schema migrations across processes."""

    @abc.abstractmethod
    def _has_table(self, name: str) -> bool:
        """Whether the schema has the table (names are case-insensitive, as unquoted SQL)."""

    # -- shared -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def commit_durability(self, *, sync: bool) -> Iterator[None]:
        """The writing calls made inside commit on the disk before they return (``sync``)
        or only handed to the database's OS (a writer's ``durability: flush``), where the
        backend chooses per DB transaction (SQLite ``synchronous``, PostgreSQL
        ``synchronous_commit``); ``acidstream.acid.durability``."""
        with self._mutex:
            prev, self._commit_sync = self._commit_sync, sync
            try:
                yield
            finally:
                self._commit_sync = prev

    def crash_point(self, name: str) -> None:
        """A fault-injection step (:mod:`acidstream.acid.faults`); a pipelining backend flushes first so
        that a crash falls between statements the server has run."""
        faults.point(name, before_crash=self._flush)

    def close(self) -> None:
        with self._mutex:
            self._disconnect()

    def run(
        self,
        op: str,
        body: Callable[[Tx], T],
        *,
        write: bool = True,
        idempotent: bool = False,
        unknown: Callable[[str], TransactionError] = TransactionError,
    ) -> T:
        """Run ``body`` in one DB transaction, retrying it while that is safe.

        Args:
            op: Operation name, used in error messages and crash-point names.
            body: The work; it may raise ``AcidStreamError`` to roll back and report.
            write: Take the write lock (SQLite ``BEGIN IMMEDIATE``).
            idempotent: The call may be repeated even if a COMMIT's outcome is unknown.
            unknown: Builds the error raised when the connection is lost during COMMIT.

        Raises:
            ConfigError: a writing call on a store opened read-only.
        """
        if write and self.read_only:
            raise ConfigError(f"{op}: the metastore at {self.display_url} is open read-only")
        with self._mutex:
            try:
                return self._attempt(op, body, write, idempotent, unknown)
            except _Transient:
                pass  # the fast path failed; from here on back off between attempts
            retrying = Retrying(
                stop=stop_after_attempt(self.max_attempts) | stop_after_delay(self.max_retry_s),
                wait=wait_exponential_jitter(multiplier=0.005, max=1.0, jitter=0.01),
                retry=retry_if_exception_type(_Transient),
                reraise=True,
            )
            try:
                return retrying(self._attempt, op, body, write, idempotent, unknown)
            except _Transient as e:
                raise TransactionError(
                    f"{op}: metastore unavailable after {self.max_attempts} attempts: {e.cause}"
                ) from e.cause

    def _attempt(
        self,
        op: str,
        body: Callable[[Tx], T],
        write: bool,
        idempotent: bool,
        unknown: Callable[[str], TransactionError],
    ) -> T:
        committing = False
        try:
            self._connect()
            self._begin(write=write)
            result = body(Tx(self))
            self.crash_point(f"{op}.before_commit")
            committing = True
            self._commit()
        except AcidStreamError:
            self._rollback()
            raise
        except Exception as e:
            kind = self._classify(e)
            if kind is ErrorKind.LOST:
                self._disconnect()
                if committing and not idempotent:
                    raise unknown(
                        f"{op}: connection to the metastore lost during COMMIT; "
                        f"the outcome is unknown ({e})"
                    ) from e
                raise _Transient(e) from e
            self._rollback()
            if kind is ErrorKind.TRANSIENT:
                raise _Transient(e) from e
            raise TransactionError(f"{op} failed: {type(e).__name__}: {e}") from e
        self.crash_point(f"{op}.after_commit")
        return result
