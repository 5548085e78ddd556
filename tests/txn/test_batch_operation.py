"""Transaction batches that know their operation: lock type and write set as Hive's.

INSERT takes SHARED_READ and never conflicts; UPDATE and DELETE take SHARED_WRITE and
register a write set per partition at commit, where of two overlapping mutations of one
partition the first committer wins (``TxnHandler.commitTxn``'s write-set check).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from acidstream.acid.errors import (
    CommitConflictError,
    ConfigError,
    TransactionError,
    TxnAbortedError,
)
from acidstream.acid.table_name import TableName
from acidstream.txn import TxnStore
from acidstream.txn.batch import TransactionBatch
from acidstream.txn.locks import DataOperationType, LockType
from acidstream.txn.store import TxnState

from .conftest import make_table

INSERT, UPDATE, DELETE = (
    DataOperationType.INSERT,
    DataOperationType.UPDATE,
    DataOperationType.DELETE,
)
T = TableName("default", "t")


def _batch(store: TxnStore, op: DataOperationType, **kw: object) -> TransactionBatch:
    b = TransactionBatch(store, T, size=1, operation=op, heartbeat_interval_s=3600.0, **kw)  # type: ignore[arg-type]
    b.begin_next()
    return b


def _lock_types(store: TxnStore, txn: int) -> set[LockType]:
    return {lk.type for lk in store.show_locks() if lk.txn_id == txn}


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        (INSERT, LockType.SHARED_READ),
        (UPDATE, LockType.SHARED_WRITE),
        (DELETE, LockType.SHARED_WRITE),
    ],
)
def test_the_lock_follows_the_operation(
    store: TxnStore, op: DataOperationType, expected: LockType
) -> None:
    make_table(store)
    b = _batch(store, op)
    try:
        assert _lock_types(store, b.current_txn) == {expected}
        (comp,) = store.txn_components(b.current_txn)
        assert comp[3] == op.value  # TXN_COMPONENTS records the operation
    finally:
        b.close()


def test_an_operation_that_does_not_write_is_refused(store: TxnStore) -> None:
    make_table(store)
    with pytest.raises(ConfigError, match="inserts, updates or deletes"):
        TransactionBatch(store, T, size=1, operation=DataOperationType.SELECT)
    assert store.show_txns() == []  # refused before any txn was opened


@pytest.mark.parametrize("second", [UPDATE, DELETE])
@pytest.mark.parametrize("first", [UPDATE, DELETE])
def test_two_mutations_of_one_table_the_first_committer_wins(
    store: TxnStore, first: DataOperationType, second: DataOperationType
) -> None:
    make_table(store)
    a, b = _batch(store, first), _batch(store, second)
    b.commit()  # b began later but commits first: it wins
    with pytest.raises(CommitConflictError, match="write conflict on default/t"):
        a.commit()
    assert store.txn_state(a.current_txn) is TxnState.ABORTED
    assert store.txn_state(b.current_txn) is TxnState.COMMITTED
    a.close()
    b.close()


def test_a_mutation_never_conflicts_with_inserts(store: TxnStore) -> None:
    make_table(store)
    ins, upd, ins2 = _batch(store, INSERT), _batch(store, UPDATE), _batch(store, INSERT)
    ins.commit()
    upd.commit()
    ins2.commit()
    for b in (ins, upd, ins2):
        assert store.txn_state(b.current_txn) is TxnState.COMMITTED
        b.close()


def test_mutations_that_do_not_overlap_in_time_do_not_conflict(store: TxnStore) -> None:
    make_table(store)
    a = _batch(store, DELETE)
    a.commit()
    a.close()
    b = _batch(store, UPDATE)  # began after a committed: it saw a's result
    b.commit()
    assert store.txn_state(b.current_txn) is TxnState.COMMITTED
    b.close()


def _partitioned(store: TxnStore) -> Callable[[DataOperationType], TransactionBatch]:
    make_table(store, partitioned=True)
    return lambda op: _batch(store, op, dynamic=True)


def test_the_write_set_is_per_partition(store: TxnStore) -> None:
    open_batch = _partitioned(store)
    a, b, c = open_batch(UPDATE), open_batch(DELETE), open_batch(UPDATE)
    b.commit(partitions=["ds=1", "ds=2"])
    a.commit(partitions=["ds=3"])  # another partition: no conflict
    assert store.txn_state(a.current_txn) is TxnState.COMMITTED
    with pytest.raises(CommitConflictError, match="ds=2"):
        c.commit(partitions=["ds=2", "ds=4"])
    assert store.txn_state(c.current_txn) is TxnState.ABORTED
    for x in (a, b, c):
        x.close()


def test_a_mutation_that_changed_nothing_holds_no_write_set(store: TxnStore) -> None:
    open_batch = _partitioned(store)
    a, b = open_batch(DELETE), open_batch(DELETE)
    b.commit(partitions=[])  # deleted no row: the table-level placeholder goes
    assert store.txn_components(b.current_txn) == []
    a.commit(partitions=["ds=1"])
    assert store.txn_state(a.current_txn) is TxnState.COMMITTED
    # And the other way round: a later empty mutation does not conflict with a's partition.
    c = open_batch(UPDATE)
    c.commit(partitions=[])
    assert store.txn_state(c.current_txn) is TxnState.COMMITTED
    for x in (a, b, c):
        x.close()


def test_a_static_partition_mutation_conflicts_on_that_partition_only(store: TxnStore) -> None:
    make_table(store, partitioned=True)
    a = _batch(store, UPDATE, partition="ds=1")
    b = _batch(store, UPDATE, partition="ds=2")
    c = _batch(store, DELETE, partition="ds=1")
    a.commit()
    b.commit()
    assert store.txn_state(b.current_txn) is TxnState.COMMITTED
    with pytest.raises(CommitConflictError):
        c.commit()
    # The loser cannot be committed later either: it is aborted in the metastore.
    with pytest.raises((TxnAbortedError, CommitConflictError)):
        store.commit_txn(c.current_txn)
    for x in (a, b, c):
        x.close()


def test_commit_all_of_a_mutation_batch_checks_the_write_set(store: TxnStore) -> None:
    make_table(store)
    a = TransactionBatch(store, T, size=1, operation=UPDATE, heartbeat_interval_s=3600.0)
    a.lock_all()
    b = _batch(store, DELETE)
    b.commit()
    with pytest.raises(CommitConflictError):
        a.commit_all()
    assert store.txn_state(a.txn_ids[0]) is TxnState.ABORTED
    a.close()
    b.close()


def test_a_mutation_batch_of_several_txns_commits_them_one_by_one(store: TxnStore) -> None:
    make_table(store)
    a = TransactionBatch(store, T, size=2, operation=DELETE, heartbeat_interval_s=3600.0)
    a.lock_all()
    with pytest.raises(TransactionError, match="one by one"):
        a.commit_all()
    assert {store.txn_state(t) for t in a.txn_ids} == {TxnState.OPEN}  # nothing half done
    a.close()
    assert {store.txn_state(t) for t in a.txn_ids} == {TxnState.ABORTED}
