"""Transactions: open, write ids, commit/abort, key/value commits, heartbeats, the reaper,
write-write conflicts. Every test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from acidstream.acid.errors import (
    CommitConflictError,
    ConfigError,
    TableNotFoundError,
    TransactionError,
    TxnAbortedError,
)
from acidstream.txn import TableDef, TxnState, TxnStore
from acidstream.txn.locks import DataOperationType as Op
from tests.plugins.store_fixture import FakeClock
from tests.txn.conftest import make_table, write_lock


def test_open_txns_returns_consecutive_ids_and_records_client(store: TxnStore) -> None:
    ids = store.open_txns(5, user="alice", host="node1", agent_info="agent-7")
    assert ids == list(range(ids[0], ids[0] + 5))
    more = store.open_txns(2, user="bob", host="node2")
    assert more == [ids[-1] + 1, ids[-1] + 2]
    info = {t.txn_id: t for t in store.show_txns()}
    assert info[ids[0]].user == "alice" and info[ids[0]].host == "node1"
    assert info[ids[0]].agent_info == "agent-7"
    assert info[ids[0]].state is TxnState.OPEN
    assert info[ids[0]].started_ms == info[ids[0]].last_heartbeat_ms > 0


def test_open_txns_is_silently_capped_at_1000(store: TxnStore) -> None:
    ids = store.open_txns(1500, user="u", host="h")
    assert len(ids) == 1000
    assert ids == list(range(ids[0], ids[0] + 1000))


def test_write_ids_are_dense_per_table_from_one_in_txn_order(store: TxnStore) -> None:
    a, b, c = store.open_txns(3, user="u", host="h")
    assert store.allocate_write_ids([c, a, b], "default", "t1") == {a: 1, b: 2, c: 3}
    assert store.allocate_write_ids([b], "default", "t2") == {b: 1}
    (d,) = store.open_txns(1, user="u", host="h")
    assert store.allocate_write_ids([d], "default", "t1") == {d: 4}
    assert store.allocate_write_ids([d, a], "default", "t2") == {a: 2, d: 3}


def test_allocate_is_idempotent_for_a_txn_that_has_a_write_id(store: TxnStore) -> None:
    a, b = store.open_txns(2, user="u", host="h")
    first = store.allocate_write_ids([a, b], "default", "t")
    assert store.allocate_write_ids([b, a], "DEFAULT", "T") == first
    (c,) = store.open_txns(1, user="u", host="h")
    assert store.allocate_write_ids([a, c], "default", "t") == {a: 1, c: 3}


def test_write_id_maps_to_txn_and_back(store: TxnStore) -> None:
    a, b = store.open_txns(2, user="u", host="h")
    store.allocate_write_ids([a, b], "default", "t")
    assert store.write_id_for_txn(b, "default", "t") == 2
    assert store.txn_for_write_id("default", "t", 1) == a
    assert store.write_id_for_txn(b, "default", "other") is None
    assert store.txn_for_write_id("default", "t", 3) is None


def test_allocate_rejects_txns_that_are_not_open(store: TxnStore) -> None:
    a, b = store.open_txns(2, user="u", host="h")
    store.abort_txn(a)
    store.commit_txn(b)
    with pytest.raises(TxnAbortedError):
        store.allocate_write_ids([a], "default", "t")
    with pytest.raises(TransactionError, match="committed"):
        store.allocate_write_ids([b], "default", "t")
    with pytest.raises(TransactionError, match="No such transaction"):
        store.allocate_write_ids([b + 100], "default", "t")
    # nothing was allocated by the failed calls
    (c,) = store.open_txns(1, user="u", host="h")
    assert store.allocate_write_ids([c], "default", "t") == {c: 1}


def test_commit_is_idempotent_and_aborted_txn_cannot_commit(store: TxnStore) -> None:
    a, b = store.open_txns(2, user="u", host="h")
    store.commit_txn(a)
    store.commit_txn(a)
    assert store.txn_state(a) is TxnState.COMMITTED
    store.abort_txn(b)
    with pytest.raises(TxnAbortedError):
        store.commit_txn(b)
    with pytest.raises(TransactionError, match="No such transaction"):
        store.commit_txn(b + 10)
    assert store.txn_state(b + 10) is None


def test_abort_records_reason_and_is_idempotent(store: TxnStore) -> None:
    a, b = store.open_txns(2, user="u", host="h")
    store.abort_txn(a, reason="client gave up")
    store.abort_txn(a)
    info = {t.txn_id: t for t in store.show_txns()}
    assert info[a].state is TxnState.ABORTED
    assert info[a].abort_reason == "client gave up"
    store.commit_txn(b)
    with pytest.raises(TransactionError, match="committed"):
        store.abort_txn(b)


def test_commit_with_key_value_stores_it_atomically(store: TxnStore, table: TableDef) -> None:
    a, b = store.open_txns(2, user="u", host="h")
    store.allocate_write_ids([a, b], "default", "t")
    store.commit_txn(a, key="_meta.stream.batch", value='{"batch": 7}', db="default", table="t")
    assert store.get_table_param("default", "t", "_meta.stream.batch") == '{"batch": 7}'
    store.abort_txn(b)
    with pytest.raises(TxnAbortedError):
        store.commit_txn(b, key="_meta.stream.batch", value="8", db="default", table="t")
    assert store.get_table_param("default", "t", "_meta.stream.batch") == '{"batch": 7}'


def test_commit_key_must_start_with_meta_and_table_must_exist(
    store: TxnStore, table: TableDef
) -> None:
    (a,) = store.open_txns(1, user="u", host="h")
    with pytest.raises(ConfigError, match="_meta"):
        store.commit_txn(a, key="batch", value="1", db="default", table="t")
    with pytest.raises(ConfigError, match="together"):
        store.commit_txn(a, key="_meta.x")
    with pytest.raises(TableNotFoundError, match="not found"):
        store.commit_txn(a, key="_meta.x", value="1", db="default", table="missing")
    # the failed commit left the txn open and uncommitted
    assert store.txn_state(a) is TxnState.OPEN
    assert store.get_table_param("default", "t", "_meta.x") is None


def test_heartbeat_range_reports_aborted_committed_and_nosuch(
    store: TxnStore, clock: FakeClock
) -> None:
    a, b, c = store.open_txns(3, user="u", host="h")
    store.abort_txn(b)
    store.commit_txn(c)
    clock.advance(10)
    res = store.heartbeat_txn_range(a, c + 2)
    assert res.aborted == {b}
    assert res.committed == {c}  # committed is not lost (it used to be reported as nosuch)
    assert res.nosuch == {c + 1, c + 2}  # never opened
    assert res.lost == {b, c + 1, c + 2}
    info = {t.txn_id: t for t in store.show_txns()}
    assert info[a].last_heartbeat_ms == info[a].started_ms + 10_000


def test_reaper_aborts_only_timed_out_txns_and_records_why(
    store: TxnStore, clock: FakeClock
) -> None:
    make_table(store)
    a, b = store.open_txns(2, user="u", host="h")
    store.allocate_write_ids([a, b], "default", "t")
    write_lock(store, a, Op.INSERT)
    clock.advance(200)
    store.heartbeat_txn_range(b, b)
    clock.advance(150)  # a: 350 s without heartbeat, b: 150 s
    assert store.reap_timed_out() == [a]
    assert store.txn_state(a) is TxnState.ABORTED
    assert store.txn_state(b) is TxnState.OPEN
    reason = {t.txn_id: t for t in store.show_txns()}[a].abort_reason
    assert reason is not None and "ABORT_TIMEOUT" in reason and "300s" in reason
    assert store.show_locks() == []  # the dead txn's lock is released
    assert store.heartbeat_txn_range(a, b).aborted == {a}
    assert store.reap_timed_out(timeout_s=10, now=clock.now + 1000) == [b]


def _update_txn(store: TxnStore, op: Op, partition: str | None = None) -> int:
    (t,) = store.open_txns(1, user="u", host="h")
    store.allocate_write_ids([t], "default", "t")
    write_lock(store, t, op, partition=partition)
    return t


@pytest.mark.parametrize(
    ("first", "second", "conflict"),
    [
        (Op.UPDATE, Op.UPDATE, True),
        (Op.UPDATE, Op.DELETE, True),
        (Op.DELETE, Op.DELETE, True),
        (Op.DELETE, Op.UPDATE, True),
        (Op.INSERT, Op.UPDATE, False),
        (Op.UPDATE, Op.INSERT, False),
        (Op.INSERT, Op.INSERT, False),
    ],
)
def test_write_write_conflict_rules(
    store: TxnStore, table: TableDef, first: Op, second: Op, conflict: bool
) -> None:
    a = _update_txn(store, first)
    b = _update_txn(store, second)
    store.commit_txn(a)
    if conflict:
        with pytest.raises(CommitConflictError, match=r"write conflict on default/t committed by"):
            store.commit_txn(b)
        assert store.txn_state(b) is TxnState.ABORTED
        info = {t.txn_id: t for t in store.show_txns()}
        assert info[b].abort_reason is not None
        assert info[b].abort_reason.startswith("ABORT_WRITE_CONFLICT")
        assert store.show_locks() == []
    else:
        store.commit_txn(b)
        assert store.txn_state(b) is TxnState.COMMITTED


def test_conflicts_need_the_same_partition_with_null_equal_null(store: TxnStore) -> None:
    make_table(store, partitioned=True)
    a = _update_txn(store, Op.UPDATE, "ds=1")
    b = _update_txn(store, Op.UPDATE, "ds=2")
    c = _update_txn(store, Op.UPDATE, None)
    d = _update_txn(store, Op.UPDATE, None)
    for t in (a, b, c):
        store.commit_txn(t)  # different partitions; c (NULL) does not match ds=1
    with pytest.raises(CommitConflictError):
        store.commit_txn(d)  # NULL == NULL


def test_no_conflict_with_a_commit_that_finished_before_the_txn_started(store: TxnStore) -> None:
    make_table(store)
    a = _update_txn(store, Op.UPDATE)
    store.commit_txn(a)
    b = _update_txn(store, Op.UPDATE)  # started after a committed: CUR.txnid > commit_id
    store.commit_txn(b)
    assert store.txn_state(b) is TxnState.COMMITTED


def test_commit_moves_components_to_completed(store: TxnStore, table: TableDef) -> None:
    a = _update_txn(store, Op.INSERT)
    assert store.txn_components(a) == [("default", "t", None, "i", 1)]
    store.commit_txn(a)
    assert store.txn_components(a) == []
    b = _update_txn(store, Op.UPDATE)
    store.abort_txn(b)
    # aborted txns keep their components: the cleaner needs to know where aborted data is
    assert store.txn_components(b) == [("default", "t", None, "u", 2)]


def _insert_batch(store: TxnStore, n: int) -> list[int]:
    ids = store.open_txns(n, user="u", host="h", agent_info="sink")
    store.allocate_write_ids(ids, "default", "t")
    for t in ids:
        write_lock(store, t, Op.INSERT)
    return ids


def test_commit_txns_commits_a_batch_and_its_key_value_together(
    store: TxnStore, table: TableDef
) -> None:
    ids = _insert_batch(store, 3)
    before = store.get_valid_write_ids("default", "t", store.get_valid_txns())
    assert all(not before.is_write_id_valid(w) for w in (1, 2, 3))
    store.commit_txns(ids, key="_meta.sink.s", value='{"batch_id": 4}', db="default", table="t")
    after = store.get_valid_write_ids("default", "t", store.get_valid_txns())
    assert all(after.is_write_id_valid(w) for w in (1, 2, 3))
    assert [store.txn_state(t) for t in ids] == [TxnState.COMMITTED] * 3
    assert store.get_table_param("default", "t", "_meta.sink.s") == '{"batch_id": 4}'
    assert all(store.txn_components(t) == [] for t in ids)
    # a replayed commit of the same batch does nothing
    store.commit_txns(ids, key="_meta.sink.s", value='{"batch_id": 4}', db="default", table="t")


def test_commit_txns_with_one_aborted_txn_commits_none(store: TxnStore, table: TableDef) -> None:
    ids = _insert_batch(store, 3)
    store.abort_txn(ids[1], reason="test")
    with pytest.raises(TxnAbortedError, match=str(ids[1])):
        store.commit_txns(ids, key="_meta.sink.s", value="1", db="default", table="t")
    assert [store.txn_state(t) for t in ids] == [TxnState.OPEN, TxnState.ABORTED, TxnState.OPEN]
    assert store.get_table_param("default", "t", "_meta.sink.s") is None
    # the open ones keep their components and locks: they can still be aborted cleanly
    assert store.txn_components(ids[0]) == [("default", "t", None, "i", 1)]


def test_commit_txns_refuses_partial_batches_and_update_txns(
    store: TxnStore, table: TableDef
) -> None:
    ids = _insert_batch(store, 2)
    store.commit_txn(ids[0])
    with pytest.raises(TransactionError, match="partly committed"):
        store.commit_txns(ids)
    assert store.txn_state(ids[1]) is TxnState.OPEN
    u = _update_txn(store, Op.UPDATE)
    (i,) = _insert_batch(store, 1)
    with pytest.raises(TransactionError, match="update/delete"):
        store.commit_txns([i, u])
    assert store.txn_state(i) is TxnState.OPEN and store.txn_state(u) is TxnState.OPEN
    with pytest.raises(TransactionError, match="No such transaction"):
        store.commit_txns([i, 10**9])
    with pytest.raises(ConfigError, match="no txns"):
        store.commit_txns([])
