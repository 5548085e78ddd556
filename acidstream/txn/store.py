"""The transaction and lock manager plus catalog: :class:`TxnStore` and :func:`open_store`.

This is Hive's metastore ``TxnHandler`` (spec §6) re-done over one small SQL
schema (:mod:`acidstream.txn.migrations`) shared by two backends, chosen by URL:

* ``sqlite:///path/metastore.db`` -- embedded, one file, several processes on one host;
* ``postgresql://user@host:port/db[?schema=name]`` -- a server, many processes and hosts.

Every public method is one database transaction (:meth:`acidstream.txn.db.Database.run`),
so a crash or a lost connection never leaves half an operation behind. Times
are milliseconds since the epoch, as in Hive.

The methods live in one mixin per concern, beside their SQL: transactions
(:mod:`acidstream.txn.txn_ops`), locks (:mod:`acidstream.txn.lock_sql`), read snapshots
(:mod:`acidstream.txn.snapshot_sql`), the catalog (:mod:`acidstream.txn.catalog_sql`), housekeeping
(:mod:`acidstream.txn.housekeeping_sql`), namespaces and links (:mod:`acidstream.txn.links_sql`) and the
metastore-wide settings such as the txn timeout (:mod:`acidstream.txn.settings`). This module
assembles them and opens stores.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from acidstream.acid.errors import ConfigError
from acidstream.txn.catalog import absolute_location
from acidstream.txn.catalog_sql import CatalogOps
from acidstream.txn.db import Database
from acidstream.txn.housekeeping_sql import HousekeepingOps
from acidstream.txn.links_sql import LinkOps
from acidstream.txn.lock_sql import LockOps
from acidstream.txn.migrations import check_schema, migrate
from acidstream.txn.settings import SettingsOps
from acidstream.txn.snapshot_sql import SnapshotOps
from acidstream.txn.storage_options import StorageOptions
from acidstream.txn.txn_ops import (
    MAX_OPEN_BATCH,
    TXN_KEY_START,
    HeartbeatResult,
    TxnInfo,
    TxnOps,
)
from acidstream.txn.txn_sql import TxnState

if TYPE_CHECKING:
    from acidstream.acid.storage import Storage

__all__ = [
    "MAX_OPEN_BATCH",
    "TXN_KEY_START",
    "HeartbeatResult",
    "TxnInfo",
    "TxnState",
    "TxnStore",
    "open_store",
]


class TxnStore(TxnOps, LockOps, SnapshotOps, CatalogOps, HousekeepingOps, LinkOps, SettingsOps):
    """Transactions, write ids, locks, read snapshots and the table catalog in one database.

    Open one with :func:`open_store`. A store holds one connection; it may be
    shared by threads of a process (calls are serialised) but each process
    should open its own. Use it as a context manager or call :meth:`close`.

    Args:
        db: The backend connection.
        warehouse: Root directory under which table locations default (made absolute).
        clock: Seconds since the epoch; injectable so heartbeat and timeout
            behaviour can be tested without waiting.
        storage_options: the filesystem options of the tables' locations (endpoint,
            credentials): every service holding the store opens storage with them.
    """

    def __init__(
        self,
        db: Database,
        *,
        warehouse: str | None = None,
        clock: Callable[[], float] = time.time,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._db = db
        self.warehouse = absolute_location(warehouse) if warehouse else None
        self.storage_options = StorageOptions.of(storage_options)
        self._clock = clock
        if db.read_only:
            self.schema_version = self._db.run(
                "check_schema",
                lambda tx: check_schema(tx, db.display_url),
                write=False,
                idempotent=True,
            )
        else:
            self.schema_version = self._db.run("migrate", lambda tx: migrate(tx, db))

    def storage(self, path: str) -> tuple[Storage, str]:
        """The storage of a table or partition location, opened with this store's
        storage options, and the path in it (``Storage.for_path``)."""
        from acidstream.acid.storage import Storage  # fsspec loads on first use, not import

        return Storage.for_path(path, storage_options=self.storage_options)

    @property
    def url(self) -> str:
        """The URL this store was opened with (another process can open the same store)."""
        return self._db.url

    @property
    def clock(self) -> Callable[[], float]:
        """The clock this store stamps heartbeats with (services of the same process that
        judge time-outs use it too)."""
        return self._clock

    @property
    def read_only(self) -> bool:
        """Whether the store was opened read-only (writing calls raise ConfigError)."""
        return self._db.read_only

    @property
    def database(self) -> Database:
        """The backend connection (tests use its crash hook and backend pid)."""
        return self._db

    def close(self) -> None:
        """Close the connection; the store may not be used afterwards."""
        self._db.close()

    def __enter__(self) -> TxnStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def open_store(
    url: str,
    *,
    warehouse: str | None = None,
    clock: Callable[[], float] = time.time,
    read_only: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> TxnStore:
    """Open (and create or migrate) the store at ``url``.

    Args:
        url: ``sqlite:///path/to/metastore.db`` or ``postgresql://user@host:port/db``
            (optionally ``?schema=name``).
        warehouse: Root directory under which table locations default; a relative one is
            made absolute against the current directory now.
        clock: Seconds since the epoch (tests inject one).
        read_only: Open for listing only: nothing is created or migrated (no directory,
            no database file, no schema) and every writing call raises ConfigError.
            SQLite opens the file ``mode=ro`` (``immutable`` on a read-only directory);
            PostgreSQL runs read-only transactions.
        storage_options: the tables' filesystem options (``TxnStore.storage``).

    Raises:
        ConfigError: unknown URL scheme; read-only and there is no metastore at ``url``
            ("no metastore at <url>"), or its schema needs a migration.
    """
    db: Database
    if url.startswith("sqlite:"):
        from acidstream.txn.store_sqlite import SqliteDatabase

        db = SqliteDatabase(url, read_only=read_only)
    elif url.startswith(("postgresql:", "postgres:")):
        from acidstream.txn.store_postgres import PostgresDatabase

        db = PostgresDatabase(url, read_only=read_only)
    else:
        raise ConfigError(
            f"metastore URL must start with sqlite:/// or postgresql://, not {url.split(':')[0]!r}"
        )
    try:
        return TxnStore(db, warehouse=warehouse, clock=clock, storage_options=storage_options)
    except BaseException:
        db.close()
        raise
