"""A writer's transaction batch opened in one metastore transaction (issue 33 item 1).

``TxnStore.open_batch`` is ``open_txns`` + ``allocate_write_ids`` + the first txn's lock
(zero wait) in ONE database transaction: the same rows, one round trip, and all or
nothing. A streaming connection's batch-1 txn is then two metastore round trips (open,
commit) instead of four.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from acidstream.acid import faults
from acidstream.acid.errors import LockTimeoutError, TransactionError
from acidstream.acid.table_name import TableName
from acidstream.txn import TxnStore
from acidstream.txn.batch import TransactionBatch
from acidstream.txn.locks import (
    DataOperationType,
    LockComponent,
    LockRequest,
    LockState,
    LockType,
)
from acidstream.txn.store import TxnState

from .conftest import make_table

T = TableName("default", "t")


@pytest.fixture(autouse=True)
def _no_hook_left() -> Iterator[None]:
    yield
    faults.set_hook(None)


def _insert_lock(txn: int = 0) -> LockRequest:
    comp = LockComponent(
        LockType.SHARED_READ, "default", "t", None, operation=DataOperationType.INSERT,
        is_transactional=True,
    )  # fmt: skip
    return LockRequest((comp,), txn_id=txn, user="u", host="h")


def _steps() -> list[str]:
    """Record every fault-injection step passed from now on (one pair per DB transaction)."""
    seen: list[str] = []
    faults.set_hook(seen.append)
    return seen


def test_open_batch_is_one_db_transaction_with_the_rows_of_the_three_calls(
    store: TxnStore,
) -> None:
    make_table(store)
    seen = _steps()
    opened = store.open_batch(3, "Default", "T", user="u", host="h", first_lock=_insert_lock())
    faults.set_hook(None)
    assert seen == ["open_batch.before_commit", "open_batch.after_commit"]
    txns = list(opened.txn_ids)
    assert txns == list(range(txns[0], txns[0] + 3))
    assert opened.write_ids == (1, 2, 3)
    assert [store.txn_state(t) for t in txns] == [TxnState.OPEN] * 3
    assert [store.write_id_for_txn(t, "default", "t") for t in txns] == [1, 2, 3]
    # The first txn's lock is held, with its component (and write id), as lock() records.
    assert opened.lock is not None and opened.lock.state is LockState.ACQUIRED
    locks = store.show_locks()
    assert [(lk.txn_id, lk.state, lk.type) for lk in locks] == [
        (txns[0], LockState.ACQUIRED, LockType.SHARED_READ)
    ]
    assert store.txn_components(txns[0]) == [("default", "t", None, "i", 1)]
    assert store.txn_components(txns[1]) == []
    # The next allocation continues after them; the batch commits as usual.
    assert store.allocate_write_ids(store.open_txns(1, user="u", host="h"), "default", "t")
    store.commit_txn(txns[0])
    assert store.txn_state(txns[0]) is TxnState.COMMITTED


def test_a_blocked_first_lock_leaves_nothing_and_the_batch_waits_for_it(store: TxnStore) -> None:
    make_table(store)
    holder = store.open_txns(1, user="u", host="h")[0]
    excl = LockComponent(
        LockType.EXCLUSIVE, "default", "t", None, operation=DataOperationType.NO_TXN
    )
    assert store.lock(LockRequest((excl,), txn_id=holder)).state is LockState.ACQUIRED
    opened = store.open_batch(1, "default", "t", user="u", host="h", first_lock=_insert_lock())
    assert opened.lock is not None and opened.lock.state is LockState.NOT_ACQUIRED
    txn = opened.txn_ids[0]
    assert [lk.txn_id for lk in store.show_locks()] == [holder]
    assert store.txn_components(txn) == []
    assert store.txn_state(txn) is TxnState.OPEN

    # A batch whose first lock was not had at open takes it in begin_next, waiting.
    b = TransactionBatch(store, T, size=1, lock_first=True, lock_wait_s=0.2,
                         heartbeat_interval_s=3600.0)  # fmt: skip
    try:
        with pytest.raises(LockTimeoutError):
            b.begin_next()
    finally:
        b.close()
    store.abort_txn(holder)
    b = TransactionBatch(store, T, size=1, lock_first=True, heartbeat_interval_s=3600.0)
    try:
        calls = _steps()
        txn = b.begin_next()
        assert calls == []  # taken with the open: no round trip left
        assert [(lk.txn_id, lk.state) for lk in store.show_locks()] == [(txn, LockState.ACQUIRED)]
        b.commit()
    finally:
        b.close()
    assert store.txn_state(txn) is TxnState.COMMITTED


def test_a_failure_while_opening_a_batch_leaves_no_txn(store: TxnStore) -> None:
    make_table(store)

    def fail(step: str) -> None:
        if step == "open_batch.before_commit":
            raise TransactionError("injected")

    faults.set_hook(fail)
    with pytest.raises(TransactionError, match="injected"):
        TransactionBatch(store, T, size=5, lock_first=True, heartbeat_interval_s=3600.0)
    faults.set_hook(None)
    # Nothing opened, nothing to abort, no lock, no write id used.
    assert store.show_txns() == []
    assert store.show_locks() == []
    opened = store.open_batch(1, "default", "t", user="u", host="h")
    assert opened.write_ids == (1,) and opened.lock is None
