"""txn: the transaction and lock manager and the table catalog (Hive's metastore, re-done).

``open_store(url)`` gives a :class:`TxnStore` over SQLite (embedded) or
PostgreSQL. See ``docs/txn.md``.
"""

from acidstream.txn.catalog import PartitionInfo, TableDef
from acidstream.txn.config import StoreConfig
from acidstream.txn.locks import (
    DataOperationType,
    LockComponent,
    LockRequest,
    LockResponse,
    LockState,
    LockType,
)
from acidstream.txn.store import HeartbeatResult, TxnState, TxnStore, open_store

__all__ = [
    "DataOperationType",
    "HeartbeatResult",
    "LockComponent",
    "LockRequest",
    "LockResponse",
    "LockState",
    "LockType",
    "PartitionInfo",
    "StoreConfig",
    "TableDef",
    "TxnState",
    "TxnStore",
    "open_store",
]
