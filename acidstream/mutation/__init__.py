"""Row-level mutations of ACID tables: DELETE, UPDATE and MERGE, written as Hive 3 writes them.

A layer on ``txn`` (it imports ``acid`` and ``txn`` only), below ``ingest`` (streaming
upserts) and ``sinks`` (the Spark MERGE, the upsert sink). Modules:
``api`` (the entry points), ``run`` (one txn per statement, retries on a commit
conflict, idempotency keys), ``target`` (the table in the txn's snapshot; finding rows with
partition and bucket pruning), ``ops`` (DELETE, UPDATE), ``merge`` (MERGE: one join, the
cardinality check, the WHEN clauses), ``write`` (delete deltas and deltas on disk),
``expressions`` (SQL text or pyarrow expressions), ``changes`` (change events collapsed per
key and applied as one MERGE: the upsert engine of CDC), ``results``. See ``docs/mutations.md``.
"""

from acidstream.mutation.api import delete_rows, merge_rows, update_rows
from acidstream.mutation.changes import ChangeOptions, apply_changes
from acidstream.mutation.merge import MatchedDelete, MatchedUpdate, MergeSpec, NotMatchedInsert
from acidstream.mutation.results import ChangeResult, MergeResult, MutationResult

__all__ = [
    "ChangeOptions",
    "ChangeResult",
    "MatchedDelete",
    "MatchedUpdate",
    "MergeResult",
    "MergeSpec",
    "MutationResult",
    "NotMatchedInsert",
    "apply_changes",
    "delete_rows",
    "merge_rows",
    "update_rows",
]
