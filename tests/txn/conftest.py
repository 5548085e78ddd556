"""Helpers shared by the txn tests."""

from __future__ import annotations

import pytest

from acidstream.txn import TableDef, TxnStore
from acidstream.txn.locks import DataOperationType, LockComponent, LockRequest, LockType


def make_table(
    store: TxnStore, name: str = "t", *, db: str = "default", partitioned: bool = False
) -> TableDef:
    return store.create_table(
        TableDef(
            db,
            name,
            (("id", "int"), ("name", "string")),
            partition_keys=(("ds", "string"),) if partitioned else (),
            parameters={"transactional": "true"},
        )
    )


def write_lock(
    store: TxnStore,
    txn: int,
    op: DataOperationType,
    *,
    table: str = "t",
    partition: str | None = None,
    lock_type: LockType = LockType.SHARED_WRITE,
    dynamic: bool = False,
) -> None:
    """Take a txn's write lock, which records its TXN_COMPONENTS row."""
    store.lock(
        LockRequest(
            (
                LockComponent(
                    lock_type,
                    "default",
                    table,
                    partition,
                    operation=op,
                    is_dynamic_partition_write=dynamic,
                ),
            ),
            txn_id=txn,
            user="u",
            host="h",
        )
    )


@pytest.fixture
def table(store: TxnStore) -> TableDef:
    return make_table(store)
