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

from typing import TYPE_CHECKING

from acidstream.acid.lazy_exports import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "StreamingConnection": "acidstream.ingest.connection",
    "StreamingOptions": "acidstream.ingest.connection",
    "StrictJsonWriter": "acidstream.ingest.record_writers",
    "StrictDelimitedInputWriter": "acidstream.ingest.record_writers",
    "StrictRegexWriter": "acidstream.ingest.record_writers",
    "AcidSink": "acidstream.sinks.foreach_batch",
    "SinkOptions": "acidstream.sinks.foreach_batch",
    "open_store": "acidstream.txn.store",
    "read_table": "acidstream.table_handle",
    "table": "acidstream.table_handle",
    "Table": "acidstream.table_handle",
    "ReadOptions": "acidstream.read_options",
    "TableDef": "acidstream.txn.catalog",
    "AcidTableSource": "acidstream.sources.acid_table",
    "AcidReadTxn": "acidstream.txn.read_txn",
    "AcidStreamError": "acidstream.acid.errors",
    "ConfigError": "acidstream.acid.errors",
    "SerializationError": "acidstream.acid.errors",
    "StorageError": "acidstream.acid.errors",
    "TableNotFoundError": "acidstream.acid.errors",
    "TransactionError": "acidstream.acid.errors",
    "TxnAbortedError": "acidstream.acid.errors",
    "CommitConflictError": "acidstream.acid.errors",
    "CardinalityViolationError": "acidstream.acid.errors",
    "CommitStateUnknownError": "acidstream.acid.errors",
    "LockTimeoutError": "acidstream.acid.errors",
    "NamespaceError": "acidstream.acid.errors",
    "LinkReadOnlyError": "acidstream.acid.errors",
}

__all__ = [
    "AcidReadTxn",
    "AcidSink",
    "AcidStreamError",
    "AcidTableSource",
    "CardinalityViolationError",
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
    from acidstream.acid.errors import (
        AcidStreamError,
        CardinalityViolationError,
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
    from acidstream.ingest.connection import StreamingConnection, StreamingOptions
    from acidstream.ingest.record_writers import (
        StrictDelimitedInputWriter,
        StrictJsonWriter,
        StrictRegexWriter,
    )
    from acidstream.read_options import ReadOptions
    from acidstream.sinks.foreach_batch import AcidSink, SinkOptions
    from acidstream.sources.acid_table import AcidTableSource
    from acidstream.table_handle import Table, read_table, table
    from acidstream.txn.catalog import TableDef
    from acidstream.txn.read_txn import AcidReadTxn
    from acidstream.txn.store import open_store


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
