"""Where the metastore and the warehouse are: resolved once from arguments, environment, defaults.

Precedence is arguments > environment (``ACIDSTREAM_METASTORE``,
``ACIDSTREAM_WAREHOUSE``) > defaults (``./warehouse`` and the embedded SQLite
store inside it). The CLI, ingest and sinks share this so they all find the
same store.

Relative paths (the warehouse, a ``sqlite:///relative/path.db``) are resolved
against the current directory here, once: the resolved config names the same
directories in every process it is handed to (Spark executors, subprocesses),
whatever their working directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from acidstream.acid.errors import ConfigError
from acidstream.txn.catalog import absolute_location

if TYPE_CHECKING:
    from acidstream.txn.store import TxnStore

__all__ = [
    "DEFAULT_WAREHOUSE",
    "ENV_METASTORE",
    "ENV_WAREHOUSE",
    "StoreConfig",
]

ENV_METASTORE = "ACIDSTREAM_METASTORE"
ENV_WAREHOUSE = "ACIDSTREAM_WAREHOUSE"
DEFAULT_WAREHOUSE = "./warehouse"
METASTORE_FILE = "metastore.db"
_SCHEMES = ("sqlite:///", "postgresql://", "postgres://")


@dataclass(frozen=True, kw_only=True)
class StoreConfig:
    """The metastore URL and the warehouse root.

    Attributes:
        metastore_url: ``sqlite:///path`` or ``postgresql://...``.
        warehouse: Root directory under which table locations default.
    """

    metastore_url: str
    warehouse: str

    def __post_init__(self) -> None:
        # Normalise at construction: every StoreConfig names absolute places.
        if self.warehouse:
            object.__setattr__(self, "warehouse", absolute_location(self.warehouse))
        object.__setattr__(self, "metastore_url", _absolute_sqlite(self.metastore_url))
        if not self.metastore_url.startswith(_SCHEMES):
            raise ConfigError(
                f"{ENV_METASTORE}/--metastore must start with sqlite:/// or postgresql://, "
                f"got {self.metastore_url!r}"
            )
        if not self.warehouse:
            raise ConfigError(f"{ENV_WAREHOUSE}/--warehouse must not be empty")

    @classmethod
    def resolve(
        cls,
        *,
        metastore: str | None = None,
        warehouse: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> StoreConfig:
        """Merge arguments > environment > defaults.

        Without a metastore URL the store is the SQLite file ``metastore.db`` inside the
        (resolved) warehouse.
        """
        environ = os.environ if env is None else env
        wh = warehouse or environ.get(ENV_WAREHOUSE) or DEFAULT_WAREHOUSE
        url = metastore or environ.get(ENV_METASTORE)
        if not url:
            url = f"sqlite:///{wh.rstrip('/')}/{METASTORE_FILE}"
        return cls(metastore_url=url, warehouse=wh)

    def open(
        self, *, clock: Callable[[], float] | None = None, read_only: bool = False
    ) -> TxnStore:
        """Open the store this configuration names (``read_only``: see ``open_store``)."""
        from acidstream.txn.store import open_store

        if clock is None:
            return open_store(self.metastore_url, warehouse=self.warehouse, read_only=read_only)
        return open_store(
            self.metastore_url, warehouse=self.warehouse, clock=clock, read_only=read_only
        )


def _absolute_sqlite(url: str) -> str:
    from acidstream.txn.store_sqlite import sqlite_path_from_url

    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + "/") and len(url) > len(prefix):
        # Checked before it is made absolute: ':memory:' would become a file of that name.
        return prefix + absolute_location(sqlite_path_from_url(url))
    return url
