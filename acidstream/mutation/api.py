"""Row-level DELETE, UPDATE and MERGE of one table, each in one txn: the entry points the
Table handle (``acidstream.Table.delete`` / ``update`` / ``merge``) calls. Runs on the
driver side (the calling process).

Every argument is checked against the table's columns before a txn opens (``ConfigError``,
nothing written); then :func:`~acidstream.mutation.run.run_mutation` runs the statement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from acidstream.acid.errors import ConfigError
from acidstream.acid.table_name import TableName
from acidstream.mutation.changes import DELETE_COLUMN, ChangeOptions, apply_changes
from acidstream.mutation.expressions import Expr, compile_predicate, mask
from acidstream.mutation.merge import MergePlan, MergeSpec, source_table
from acidstream.mutation.ops import DeletePlan, UpdatePlan
from acidstream.mutation.results import ChangeResult, MergeResult, MutationResult
from acidstream.mutation.run import run_mutation
from acidstream.mutation.target import row_schema
from acidstream.txn.locks import DataOperationType
from acidstream.txn.store import TxnStore
from acidstream.txn.table_key import table_key

__all__ = ["delete_rows", "merge_rows", "update_rows", "upsert_rows"]


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


def upsert_rows(
    store: TxnStore,
    name: TableName,
    source: Any,
    *,
    key: Sequence[str] | None = None,
    ordering: str | None = None,
    ordering_guard: bool = False,
    delete_when: Expr | None = None,
    retries: int = 3,
) -> ChangeResult:
    """Upsert (and delete) rows by key: the rows of ``source`` collapsed to the last per
    key, then one MERGE (``acidstream.mutation.changes``). ``key`` and ``ordering``
    default to the table's ``acidstream.key`` / ``acidstream.ordering`` properties;
    ``delete_when`` (SQL text or a pyarrow expression over the source's columns) marks
    the rows that delete their key.

    Raises:
        ConfigError: no key (given or in the table's properties), a column missing, a NULL
            key; nothing written.
    """
    table = store.get_table(name.db, name.table)
    props = table_key(table)
    cols = tuple(key) if key is not None else (props.columns if props is not None else ())
    if not cols:
        raise ConfigError(
            f"{table.full_name} has no key: pass key=[...] or set the table property acidstream.key"
        )
    if ordering is None and props is not None and key is None:
        ordering = props.ordering
    events = source_table(source)
    if delete_when is not None:
        if DELETE_COLUMN in events.column_names:
            raise ConfigError(f"the source has a {DELETE_COLUMN} column and delete_when too")
        flags = mask(events, compile_predicate(delete_when, events.schema))
        events = events.append_column(DELETE_COLUMN, pa.array(flags, pa.bool_()))
    options = ChangeOptions(
        key=cols, ordering=ordering, ordering_guard=ordering_guard, retries=retries
    )
    return apply_changes(store, name, events, options)
