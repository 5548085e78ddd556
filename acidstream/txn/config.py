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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acidstream.acid.errors import ConfigError
from acidstream.txn.catalog import absolute_location
from acidstream.txn.db import redact_url
from acidstream.txn.storage_options import StorageOptions

if TYPE_CHECKING:
    from acidstream.acid.storage import Storage
    from acidstream.txn.store import TxnStore

__all__ = [
    "DEFAULT_WAREHOUSE",
    "ENV_METASTORE",
    "ENV_WAREHOUSE",
    "StoreConfig",
    "is_remote",
]

ENV_METASTORE = "ACIDSTREAM_METASTORE"
ENV_WAREHOUSE = "ACIDSTREAM_WAREHOUSE"
DEFAULT_WAREHOUSE = "./warehouse"
METASTORE_FILE = "metastore.db"
_SCHEMES = ("sqlite:///", "postgresql://", "postgres://")


@dataclass(frozen=True, kw_only=True)
class StoreConfig:
    """The metastore URL, the warehouse root and how to reach the warehouse's storage.

    Attributes:
        metastore_url: ``sqlite:///path`` or ``postgresql://...``.
        warehouse: Root directory (or URL) under which table locations default.
        storage_options: the filesystem's options (endpoint, credentials, region) for every
            table location; printed masked.
    """

    metastore_url: str
    warehouse: str
    storage_options: StorageOptions = field(default_factory=StorageOptions)

    def __post_init__(self) -> None:
        # Normalise at construction: every StoreConfig names absolute places.
        if self.warehouse:
            object.__setattr__(self, "warehouse", absolute_location(self.warehouse))
        object.__setattr__(self, "metastore_url", _absolute_sqlite(self.metastore_url))
        if not self.metastore_url.startswith(_SCHEMES):
            raise ConfigError(
                f"{ENV_METASTORE}/--metastore must start with sqlite:/// or postgresql://, "
                f"got {redact_url(self.metastore_url)!r}"
            )
        if not self.warehouse:
            raise ConfigError(f"{ENV_WAREHOUSE}/--warehouse must not be empty")
        if self.metastore_url.startswith("sqlite:///") and is_remote(self.metastore_url[10:]):
            raise ConfigError(
                f"a SQLite metastore must be a local file, not {self.metastore_url[10:]!r}: "
                "give --metastore (or ACIDSTREAM_METASTORE) a local sqlite:/// path or "
                "postgresql://"
            )
        object.__setattr__(self, "storage_options", StorageOptions.of(self.storage_options))

    def __repr__(self) -> str:
        # Printed in logs and errors: neither the metastore's password nor a storage
        # secret may show (the options mask themselves).
        return (
            f"StoreConfig(metastore_url={redact_url(self.metastore_url)!r}, "
            f"warehouse={self.warehouse!r}, storage_options={self.storage_options!r})"
        )

    @classmethod
    def resolve(
        cls,
        *,
        metastore: str | None = None,
        warehouse: str | None = None,
        env: Mapping[str, str] | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> StoreConfig:
        """Merge arguments > environment > defaults.

        Without a metastore URL the store is the SQLite file ``metastore.db`` inside the
        (resolved) warehouse; a warehouse that is not a local directory has none.
        ``storage_options``: the warehouse filesystem's options, already merged by the
        caller (``--storage-option`` over a file's ``storage_options:``); the standard AWS
        environment is botocore's to read.

        Raises:
            ConfigError: a remote warehouse without a metastore URL; a bad URL or option.
        """
        environ = os.environ if env is None else env
        wh = warehouse or environ.get(ENV_WAREHOUSE) or DEFAULT_WAREHOUSE
        url = metastore or environ.get(ENV_METASTORE)
        if not url:
            if is_remote(wh):
                raise ConfigError(
                    f"the warehouse {wh} is not a local directory: name the metastore with "
                    f"--metastore (or {ENV_METASTORE}; sqlite:///local/path.db or postgresql://)"
                )
            url = f"sqlite:///{wh.rstrip('/')}/{METASTORE_FILE}"
        return cls(
            metastore_url=url,
            warehouse=wh,
            storage_options=StorageOptions.of(storage_options, where="storage_options"),
        )

    def storage(self, path: str | None = None) -> tuple[Storage, str]:
        """The storage of ``path`` (default: the warehouse) opened with this config's
        options, and the path in it (``Storage.for_path``)."""
        from acidstream.acid.storage import Storage

        return Storage.for_path(
            self.warehouse if path is None else path, storage_options=self.storage_options
        )

    def open(
        self, *, clock: Callable[[], float] | None = None, read_only: bool = False
    ) -> TxnStore:
        """Open the store this configuration names (``read_only``: see ``open_store``)."""
        from acidstream.txn.store import open_store

        if clock is None:
            return open_store(
                self.metastore_url,
                warehouse=self.warehouse,
                read_only=read_only,
                storage_options=self.storage_options,
            )
        return open_store(
            self.metastore_url,
            warehouse=self.warehouse,
            clock=clock,
            read_only=read_only,
            storage_options=self.storage_options,
        )


def is_remote(location: str) -> bool:
    """Whether a warehouse or table location is not on the local filesystem (a URL with a
    scheme other than ``file://``): no SQLite file may be put there."""
    scheme, sep, _ = location.partition("://")
    return bool(sep) and scheme.lower() not in ("file", "local")


def _absolute_sqlite(url: str) -> str:
    from acidstream.txn.store_sqlite import sqlite_path_from_url

    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + "/") and len(url) > len(prefix):
        # Checked before it is made absolute: ':memory:' would become a file of that name.
        return prefix + absolute_location(sqlite_path_from_url(url))
    return url
