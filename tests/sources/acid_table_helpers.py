"""Helpers for the ``acidtable`` source tests: tables written with the streaming connection,
deletes written through the store, and Spark reads of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from acidstream.acid.schema import TableSchema
from acidstream.acid.writer import write_delete_delta
from acidstream.ingest.connection import StreamingConnection
from acidstream.ingest.record_json import StrictJsonWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.locks import DataOperationType, LockComponent, LockRequest, LockType
from acidstream.txn.store import TxnStore

COLUMNS = "id bigint, name string, amount decimal(10,2)"


def create_table(
    store: TxnStore, name: str, *, partitioned_by: Sequence[tuple[str, str]] = ()
) -> TableDef:
    """A full-ACID table ``default.<name>`` with :data:`COLUMNS`."""
    cols = tuple((n, str(t)) for n, t in TableSchema.parse(COLUMNS).columns)
    return store.create_table(
        TableDef(
            db="default",
            name=name,
            columns=cols,
            partition_keys=tuple(partitioned_by),
            parameters={"transactional": "true"},
        )
    )


def rows(lo: int, hi: int) -> list[tuple[Any, ...]]:
    from decimal import Decimal

    return [(i, f"n{i}", Decimal(i % 1000) / 100) for i in range(lo, hi)]


def insert_txns(
    store: TxnStore,
    table: str,
    batches: Sequence[tuple[int, int]],
    *,
    partition: Sequence[str | None] = (),
) -> None:
    """One committed txn per ``(lo, hi)`` range of ids, through the streaming connection."""
    with StreamingConnection(table, record_writer=StrictJsonWriter(), store=store) as c:
        for lo, hi in batches:
            c.begin_transaction()
            c.write_rows(rows(lo, hi), partition=partition)
            c.commit_transaction()


def delete_keys(
    store: TxnStore,
    table: TableDef,
    keys: Sequence[tuple[int, int, int]],
    *,
    partition: str | None = None,
) -> int:
    """One committed txn deleting ROW__IDs ``(writeid, bucketid, rowid)`` (in the partition
    directory ``partition``, e.g. ``ds=1``); returns its write id."""
    txn = store.open_txns(1, user="test", host="h")[0]
    wid = store.allocate_write_ids([txn], table.db, table.name)[txn]
    store.lock(
        LockRequest(
            (
                LockComponent(
                    LockType.SHARED_WRITE,
                    table.db,
                    table.name,
                    partition,
                    operation=DataOperationType.DELETE,
                ),
            ),
            txn_id=txn,
            user="test",
            host="h",
        )
    )
    assert table.location is not None
    where = table.location if partition is None else f"{table.location}/{partition}"
    write_delete_delta(where, table.schema, wid, list(keys))
    store.commit_txn(txn)
    return wid


def spark_rows(df: Any) -> list[dict[str, Any]]:
    """A DataFrame's rows as dicts, sorted by ``id``."""
    return sorted((r.asDict(recursive=True) for r in df.collect()), key=lambda r: r["id"])


def arrow_rows(t: pa.Table) -> list[dict[str, Any]]:
    return sorted(t.to_pylist(), key=lambda r: r["id"])
