"""The lock manager: acquire/wait, FIFO, release at commit/abort, timeouts, TXN_COMPONENTS.
Every test runs on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from acidstream.acid.errors import LockTimeoutError, StorageError, TransactionError, TxnAbortedError
from acidstream.txn import TableDef, TxnStore
from acidstream.txn.locks import DataOperationType as Op
from acidstream.txn.locks import LockComponent, LockRequest, LockState, LockType
from acidstream.txn.store import TxnState
from tests.plugins.store_fixture import FakeClock
from tests.txn.conftest import make_table


def _req(
    lock_type: LockType,
    table: str | None = "t",
    partition: str | None = None,
    *,
    txn: int = 0,
    op: Op = Op.NO_TXN,
    dynamic: bool = False,
    zero_wait: bool = False,
) -> LockRequest:
    return LockRequest(
        (LockComponent(lock_type, "default", table, partition, op, True, dynamic),),
        txn_id=txn,
        user="me",
        host="here",
        agent_info="test",
        zero_wait_read=zero_wait,
    )


def test_compatible_locks_are_acquired_together(store: TxnStore) -> None:
    a = store.lock(_req(LockType.SHARED_READ))
    b = store.lock(_req(LockType.SHARED_WRITE))
    assert a.state is LockState.ACQUIRED and b.state is LockState.ACQUIRED
    rows = store.show_locks()
    assert [(r.lock_id, r.state, r.type, r.user, r.host) for r in rows] == [
        (a.lock_id, LockState.ACQUIRED, LockType.SHARED_READ, "me", "here"),
        (b.lock_id, LockState.ACQUIRED, LockType.SHARED_WRITE, "me", "here"),
    ]
    assert all(r.acquired_at_ms is not None for r in rows)


def test_conflicting_lock_waits_and_is_granted_after_release(store: TxnStore) -> None:
    (t,) = store.open_txns(1, user="u", host="h")
    held = store.lock(_req(LockType.EXCL_WRITE, txn=t, op=Op.UPDATE))
    waiting = store.lock(_req(LockType.SHARED_WRITE))
    assert waiting.state is LockState.WAITING and waiting.blocked_by == held.lock_id
    info = {r.lock_id: r for r in store.show_locks()}
    assert info[waiting.lock_id].blocked_by == held.lock_id
    assert info[waiting.lock_id].acquired_at_ms is None
    assert store.check_lock(waiting.lock_id).state is LockState.WAITING
    store.commit_txn(t)  # releases the txn's locks
    assert store.check_lock(waiting.lock_id).state is LockState.ACQUIRED


def test_fifo_a_read_waits_behind_an_earlier_waiting_exclusive(store: TxnStore) -> None:
    r1 = store.lock(_req(LockType.SHARED_READ))
    x = store.lock(_req(LockType.EXCLUSIVE))
    r2 = store.lock(_req(LockType.SHARED_READ))
    assert r1.state is LockState.ACQUIRED
    assert x.state is LockState.WAITING and x.blocked_by == r1.lock_id
    assert r2.state is LockState.WAITING and r2.blocked_by == x.lock_id
    store.unlock(r1.lock_id)
    assert store.check_lock(r2.lock_id).state is LockState.WAITING  # still behind x
    assert store.check_lock(x.lock_id).state is LockState.ACQUIRED
    store.unlock(x.lock_id)
    assert store.check_lock(r2.lock_id).state is LockState.ACQUIRED


def test_partition_locks_do_not_conflict_across_partitions(store: TxnStore) -> None:
    a = store.lock(_req(LockType.EXCLUSIVE, "t", "ds=1"))
    b = store.lock(_req(LockType.EXCLUSIVE, "t", "ds=2"))
    c = store.lock(_req(LockType.SHARED_READ, "t", None))
    assert a.state is b.state is LockState.ACQUIRED
    assert c.state is LockState.WAITING


def test_same_txn_locks_never_conflict(store: TxnStore) -> None:
    (t,) = store.open_txns(1, user="u", host="h")
    assert store.lock(_req(LockType.EXCLUSIVE, txn=t)).state is LockState.ACQUIRED
    assert store.lock(_req(LockType.EXCLUSIVE, txn=t)).state is LockState.ACQUIRED


def test_abort_releases_locks(store: TxnStore) -> None:
    (t,) = store.open_txns(1, user="u", host="h")
    store.lock(_req(LockType.EXCLUSIVE, txn=t))
    w = store.lock(_req(LockType.SHARED_READ))
    store.abort_txn(t)
    assert store.check_lock(w.lock_id).state is LockState.ACQUIRED


def test_bounded_wait_times_out_and_withdraws_the_request(store: TxnStore) -> None:
    store.lock(_req(LockType.EXCLUSIVE))
    with pytest.raises(LockTimeoutError, match="not acquired within"):
        store.lock(_req(LockType.SHARED_READ), wait_s=0.05)
    assert len(store.show_locks()) == 1


def test_bounded_wait_returns_once_acquired(store_factory: Callable[[], TxnStore]) -> None:
    import threading

    s1, s2 = store_factory(), store_factory()
    held = s1.lock(_req(LockType.EXCLUSIVE))
    waiting = s2.lock(_req(LockType.EXCLUSIVE))
    released = threading.Event()

    def release() -> None:
        s1.unlock(held.lock_id)
        released.set()

    timer = threading.Timer(0.05, release)
    timer.start()
    resp = s2.wait_for_lock(waiting.lock_id, timeout_s=30)
    timer.join()
    assert released.is_set() and resp.state is LockState.ACQUIRED


def test_zero_wait_read_returns_not_acquired_and_leaves_nothing(store: TxnStore) -> None:
    store.lock(_req(LockType.EXCLUSIVE))
    resp = store.lock(_req(LockType.SHARED_READ, zero_wait=True))
    assert resp.state is LockState.NOT_ACQUIRED
    assert len(store.show_locks()) == 1


def test_unlock_rules(store: TxnStore) -> None:
    (t,) = store.open_txns(1, user="u", host="h")
    txn_lock = store.lock(_req(LockType.SHARED_READ, txn=t))
    with pytest.raises(TransactionError, match="not permitted"):
        store.unlock(txn_lock.lock_id)
    with pytest.raises(TransactionError, match="No such lock"):
        store.unlock(txn_lock.lock_id + 100)
    with pytest.raises(TransactionError, match="No such lock"):
        store.check_lock(txn_lock.lock_id + 100)


def test_lock_for_aborted_txn_is_refused(store: TxnStore) -> None:
    (t,) = store.open_txns(1, user="u", host="h")
    store.abort_txn(t)
    with pytest.raises(TxnAbortedError):
        store.lock(_req(LockType.SHARED_READ, txn=t, op=Op.INSERT))
    assert store.show_locks() == []


def test_write_components_recorded_with_write_id(store: TxnStore, table: TableDef) -> None:
    (t,) = store.open_txns(1, user="u", host="h")
    store.allocate_write_ids([t], "default", "t")
    store.lock(
        LockRequest(
            (
                LockComponent(LockType.SHARED_READ, "default", "t", "ds=1", Op.INSERT),
                LockComponent(LockType.SHARED_READ, "default", "t", "ds=2", Op.UPDATE),
                LockComponent(LockType.SHARED_READ, "default", "u", None, Op.SELECT),
                LockComponent(LockType.SHARED_READ, "default", "v", None, Op.INSERT, False),
            ),
            txn_id=t,
        )
    )
    assert store.txn_components(t) == [
        ("default", "t", "ds=1", "i", 1),
        ("default", "t", "ds=2", "u", 1),
    ]


def test_dynamic_partition_write_then_add_dynamic_partitions(store: TxnStore) -> None:
    make_table(store, partitioned=True)
    (t,) = store.open_txns(1, user="u", host="h")
    wid = store.allocate_write_ids([t], "default", "t")[t]
    store.lock(_req(LockType.SHARED_READ, txn=t, op=Op.INSERT, dynamic=True))
    assert store.txn_components(t) == [("default", "t", None, "i", wid)]
    infos = store.add_dynamic_partitions(t, wid, "default", "t", ["ds=a", "ds=b"], Op.INSERT)
    assert [(p.name, p.exists) for p in infos] == [("ds=a", False), ("ds=b", False)]
    assert store.txn_components(t) == [
        ("default", "t", "ds=a", "i", wid),
        ("default", "t", "ds=b", "i", wid),
    ]
    assert [p.name for p in store.list_partitions("default", "t")] == ["ds=a", "ds=b"]
    (t2,) = store.open_txns(1, user="u", host="h")
    store.allocate_write_ids([t2], "default", "t")
    store.add_dynamic_partitions(t2, 2, "default", "t", ["ds=a"])  # op UNSET -> 'u'
    assert store.txn_components(t2) == [("default", "t", "ds=a", "u", 2)]
    store.commit_txn(t)
    assert store.txn_components(t) == []


def test_reaper_releases_stale_locks_outside_txns(store: TxnStore, clock: FakeClock) -> None:
    a = store.lock(_req(LockType.EXCLUSIVE))
    clock.advance(200)
    b = store.lock(_req(LockType.SHARED_READ, "other"))
    store.heartbeat_lock(b.lock_id)
    clock.advance(200)
    assert store.reap_timed_out() == []
    assert [r.lock_id for r in store.show_locks()] == [b.lock_id]
    assert a.lock_id != b.lock_id


def test_commit_takes_the_next_lock_in_its_own_db_transaction(
    store: TxnStore, table: TableDef, store_factory: Callable[[], TxnStore]
) -> None:
    other = store_factory()  # opened (and migrated) before the commit holds the write lock
    t1, t2 = store.open_txns(2, user="u", host="h")
    store.allocate_write_ids([t1, t2], "default", "t")
    store.lock(_req(LockType.SHARED_READ, txn=t1, op=Op.INSERT))
    waited: list[TxnState | None] = []

    def before_commit() -> None:  # the commit's statements ran; COMMIT has not
        waited.append(other.txn_state(t1))

    resp = store.commit_txn(
        t1, before_commit=before_commit, next_lock=_req(LockType.SHARED_READ, txn=t2, op=Op.INSERT)
    )
    assert waited == [TxnState.OPEN]
    assert store.txn_state(t1) is TxnState.COMMITTED
    assert resp is not None and resp.state is LockState.ACQUIRED
    assert [(r.lock_id, r.txn_id, r.state) for r in store.show_locks()] == [
        (resp.lock_id, t2, LockState.ACQUIRED)
    ]
    assert store.txn_components(t2) == [("default", "t", None, "i", 2)]


def test_a_next_lock_that_must_wait_leaves_nothing_and_the_commit_lands(
    store: TxnStore, table: TableDef
) -> None:
    t1, t2, t3 = store.open_txns(3, user="u", host="h")
    store.allocate_write_ids([t1, t2], "default", "t")
    store.lock(_req(LockType.SHARED_READ, txn=t1, op=Op.INSERT))
    excl = store.lock(_req(LockType.EXCLUSIVE, txn=t3, op=Op.NO_TXN))  # e.g. a DROP waiting
    assert excl.state is LockState.WAITING
    resp = store.commit_txn(t1, next_lock=_req(LockType.SHARED_READ, txn=t2, op=Op.INSERT))
    assert resp is not None and resp.state is LockState.NOT_ACQUIRED
    assert store.txn_state(t1) is TxnState.COMMITTED
    assert [r.txn_id for r in store.show_locks()] == [t3]
    assert store.txn_components(t2) == []


def test_a_failing_wait_before_commit_rolls_the_commit_back(
    store: TxnStore, table: TableDef
) -> None:
    t1, t2 = store.open_txns(2, user="u", host="h")
    store.allocate_write_ids([t1, t2], "default", "t")
    store.lock(_req(LockType.SHARED_READ, txn=t1, op=Op.INSERT))

    def disk_failed() -> None:
        raise StorageError("fdatasync failed: Input/output error (EIO)")

    with pytest.raises(StorageError):
        store.commit_txn(
            t1, before_commit=disk_failed,
            next_lock=_req(LockType.SHARED_READ, txn=t2, op=Op.INSERT),
        )  # fmt: skip
    assert store.txn_state(t1) is TxnState.OPEN
    assert [r.txn_id for r in store.show_locks()] == [t1]
    assert store.txn_components(t2) == []
