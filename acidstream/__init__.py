"""acidstream: streaming ingest into Apache Hive ACID tables, from Python and Spark.

The names a user needs, in one place::

    from acidstream import StreamingConnection, StreamingOptions, StrictJsonWriter

    with StreamingConnection("db.events", record_writer=StrictJsonWriter()) as conn:
        conn.begin_transaction()
        conn.write(b'{"id": 1}')
        conn.commit_transaction()

    t = acidstream.table("db.events")
    with t.snapshot():  # one snapshot for every read in the block
        rows = t.read(columns=["id"], filter=[("id", ">", 0)])

Names are resolved on first use, so ``import acidstream`` (and the ``acidstream`` command)
stays fast and reads nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "StreamingConnection": "ingest.connection",
    "StreamingOptions": "ingest.connection",
    "StrictJsonWriter": "ingest.record_writers",
    "StrictDelimitedInputWriter": "ingest.record_writers",
    "StrictRegexWriter": "ingest.record_writers",
    "AcidSink": "sinks.foreach_batch",
    "SinkOptions": "sinks.foreach_batch",
    "open_store": "txn.store",
    "read_table": "acidstream.table_handle",
    "table": "acidstream.table_handle",
    "Table": "acidstream.table_handle",
    "ReadOptions": "acidstream.read_options",
    "TableDef": "txn.catalog",
    "AcidTableSource": "sources.acid_table",
    "AcidReadTxn": "txn.read_txn",
    "AcidStreamError": "acid.errors",
    "ConfigError": "acid.errors",
    "SerializationError": "acid.errors",
    "StorageError": "acid.errors",
    "TableNotFoundError": "acid.errors",
    "TransactionError": "acid.errors",
    "TxnAbortedError": "acid.errors",
    "CommitConflictError": "acid.errors",
    "CommitStateUnknownError": "acid.errors",
    "LockTimeoutError": "acid.errors",
    "NamespaceError": "acid.errors",
    "LinkReadOnlyError": "acid.errors",
}

__all__ = [
    "AcidReadTxn",
    "AcidSink",
    "AcidStreamError",
    "AcidTableSource",
    "CommitConflictError",
    "CommitStateUnknownError",
    "ConfigError",
    "LinkReadOnlyError",
    "LockTimeoutError",
    "NamespaceError",
    "ReadOptions",
    "SerializationError",
    "SinkOptions",
    "StorageError",
    "StreamingConnection",
    "StreamingOptions",
    "StrictDelimitedInputWriter",
    "StrictJsonWriter",
    "StrictRegexWriter",
    "Table",
    "TableDef",
    "TableNotFoundError",
    "TransactionError",
    "TxnAbortedError",
    "__version__",
    "open_store",
    "read_table",
    "table",
]

if TYPE_CHECKING:
    from acid.errors import (
        AcidStreamError,
        CommitConflictError,
        CommitStateUnknownError,
        ConfigError,
        LinkReadOnlyError,
        LockTimeoutError,
        NamespaceError,
        SerializationError,
        StorageError,
        TableNotFoundError,
        TransactionError,
        TxnAbortedError,
    )
    from acidstream.read_options import ReadOptions
    from acidstream.table_handle import Table, read_table, table
    from ingest.connection import StreamingConnection, StreamingOptions
    from ingest.record_writers import (
        StrictDelimitedInputWriter,
        StrictJsonWriter,
        StrictRegexWriter,
    )
    from sinks.foreach_batch import AcidSink, SinkOptions
    from sources.acid_table import AcidTableSource
    from txn.catalog import TableDef
    from txn.read_txn import AcidReadTxn
    from txn.store import open_store


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'acidstream' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
