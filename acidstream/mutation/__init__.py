"""Row-level mutations of ACID tables: DELETE, UPDATE and MERGE, written as Hive 3 writes them.

A sibling of ``ingest`` and ``compaction`` (it imports ``acid`` and ``txn`` only). Modules:
``api`` (the entry points), ``run`` (one txn per statement, retries on a commit
conflict, idempotency keys), ``target`` (the table in the txn's snapshot; finding rows with
partition and bucket pruning), ``ops`` (DELETE, UPDATE), ``merge`` (MERGE: one join, the
cardinality check, the WHEN clauses), ``write`` (delete deltas and deltas on disk),
``expressions`` (SQL text or pyarrow expressions), ``results``. See ``docs/mutations.md``.
"""

from acidstream.mutation.api import delete_rows, merge_rows, update_rows
from acidstream.mutation.merge import MatchedDelete, MatchedUpdate, MergeSpec, NotMatchedInsert
from acidstream.mutation.results import MergeResult, MutationResult

__all__ = [
    "MatchedDelete",
    "MatchedUpdate",
    "MergeResult",
    "MergeSpec",
    "MutationResult",
    "NotMatchedInsert",
    "delete_rows",
    "merge_rows",
    "update_rows",
]
