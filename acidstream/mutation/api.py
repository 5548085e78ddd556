"""Row-level DELETE, UPDATE and MERGE of one table, each in one txn: the entry points the
Table handle (``acidstream.Table.delete`` / ``update`` / ``merge``) calls. Runs on the
driver side (the calling process).

Every argument is checked against the table's columns before a txn opens (``ConfigError``,
nothing written); then :func:`~acidstream.mutation.run.run_mutation` runs the statement.
"""

from __future__ import annotations

from collections.abc import Mapping

from acidstream.acid.table_name import TableName
from acidstream.mutation.expressions import Expr
from acidstream.mutation.merge import MergePlan, MergeSpec
from acidstream.mutation.ops import DeletePlan, UpdatePlan
from acidstream.mutation.results import MergeResult, MutationResult
from acidstream.mutation.run import run_mutation
from acidstream.mutation.target import row_schema
from acidstream.txn.locks import DataOperationType
from acidstream.txn.store import TxnStore

__all__ = ["delete_rows", "merge_rows", "update_rows"]


def delete_rows(
    store: TxnStore,
    name: TableName,
    where: Expr | None,
    *,
    retries: int = 0,
    idempotency_key: str | None = None,
) -> MutationResult:
    """``DELETE FROM name [WHERE where]``."""
    plan = DeletePlan(row_schema(store.get_table(name.db, name.table)), where)
    return run_mutation(
        store, name, operation=DataOperationType.DELETE, body=plan, kind=MutationResult,
        retries=retries, idempotency_key=idempotency_key,
    )  # fmt: skip


def update_rows(
    store: TxnStore,
    name: TableName,
    set: Mapping[str, Expr],
    where: Expr | None,
    *,
    retries: int = 0,
    idempotency_key: str | None = None,
) -> MutationResult:
    """``UPDATE name SET col = value, ... [WHERE where]`` (split-update)."""
    plan = UpdatePlan(row_schema(store.get_table(name.db, name.table)), set, where)
    return run_mutation(
        store, name, operation=DataOperationType.UPDATE, body=plan, kind=MutationResult,
        retries=retries, idempotency_key=idempotency_key,
    )  # fmt: skip


def merge_rows(
    store: TxnStore,
    name: TableName,
    spec: MergeSpec,
    *,
    retries: int = 0,
    idempotency_key: str | None = None,
) -> MergeResult:
    """``MERGE INTO name USING source ON keys WHEN ...`` (Hive runs MERGE as an UPDATE)."""
    plan = MergePlan(spec, row_schema(store.get_table(name.db, name.table)))
    return run_mutation(
        store, name, operation=DataOperationType.UPDATE, body=plan, kind=MergeResult,
        retries=retries, idempotency_key=idempotency_key,
    )  # fmt: skip
