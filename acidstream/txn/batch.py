"""The transaction batch: the metastore side every writer shares.

Hive's streaming API v2 writes through *transaction batches*: ``n`` txns opened in one
round trip, given consecutive write ids for the table, each taking its lock before it
writes, all heartbeated on a separate connection, committed one by one
(``StreamingConnection``) or all at once (``AcidSink``: a micro-batch commits atomically
with its offsets), and the txns not used aborted when the batch closes.

A batch knows its operation, and the lock and write set follow Hive
(``DbTxnManager.acquireLocks``, ``TxnHandler.commitTxn``):

- INSERT (streaming, appends): SHARED_READ, operation INSERT, no write set: inserts never
  conflict with anything;
- UPDATE or DELETE (row-level mutations; MERGE is an UPDATE): SHARED_WRITE, and at commit a
  ``WRITE_SET`` entry per partition written (the static partition of the lock, or the
  dynamic partitions named at commit). Of two txns that update or delete one partition and
  overlap in time, the first to commit wins; the other's commit aborts it and raises
  ``CommitConflictError``, with nothing of it visible.

:class:`TransactionBatch` is that sequence, written once. Writers keep only what is
theirs (files, buffers, record parsing). Rules it enforces:

- a txn is reported lost only when the metastore really aborted it (or never knew it):
  a txn this batch committed is never lost, however a heartbeat raced the commit;
- a commit whose outcome is unknown (the connection dropped during COMMIT) is re-checked
  in the metastore, never assumed failed; only a txn the metastore shows aborted fails the
  commit, and while the store cannot answer the caller gets ``CommitStateUnknownError``
  (its files must stay);
- every txn not committed is aborted when the batch closes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential_jitter

from acidstream.acid import faults
from acidstream.acid.durability import Durability
from acidstream.acid.errors import (
    AcidStreamError,
    CommitConflictError,
    CommitKeyExistsError,
    CommitStateUnknownError,
    ConfigError,
    TransactionError,
    TxnAbortedError,
)
from acidstream.acid.table_name import TableName
from acidstream.txn.heartbeat import Heartbeater
from acidstream.txn.locks import DataOperationType, LockComponent, LockRequest, LockState, LockType
from acidstream.txn.store import TxnState, TxnStore, open_store

__all__ = ["MAX_TXNS_PER_BATCH", "TransactionBatch"]

log = logging.getLogger(__name__)

MAX_TXNS_PER_BATCH = 1000
"""Hive's ``hive.txn.max.open.batch``: the most txns one batch (one ``openTxns``) holds."""

_RECHECK_S = 60.0  # how long to keep asking the metastore for a commit's outcome

# Hive's lock per write operation on an ACID table (DbTxnManager.acquireLocks): an insert
# shares the table with every other writer; an update or delete must be alone among
# EXCL_WRITE/EXCLUSIVE holders, and its conflicts with other updates and deletes are
# settled at commit by the write set, not by the lock.
_LOCK_TYPE = {
    DataOperationType.INSERT: LockType.SHARED_READ,
    DataOperationType.UPDATE: LockType.SHARED_WRITE,
    DataOperationType.DELETE: LockType.SHARED_WRITE,
}


class TransactionBatch:
    """One transaction batch of one writer on one table (Hive's ``TransactionBatch``).

    Opening it opens ``size`` txns, allocates their consecutive write ids and starts the
    heartbeat thread (on its own store connection). Then either:

    - ``begin_next()`` / ``commit()`` / ``abort()`` txn by txn (a streaming connection), or
    - ``lock_all()`` / ``commit_all()`` (a Spark micro-batch: all txns at once).

    ``close()`` aborts what was not committed and stops the heartbeat. Not thread-safe
    except for the heartbeat callback; writers serialise their calls.

    Args:
        store: the writer's store (the batch does not close it).
        table: the table written.
        size: txns in the batch, 1..1000.
        heartbeat_interval_s: at most this long between two heartbeats of the batch's open
            txns; ``None`` (the normal case): half of the metastore's txn timeout,
            re-read at every beat (:class:`~acidstream.txn.heartbeat.Heartbeater`).
        lock_wait_s: how long taking a txn's lock may wait.
        partition: the static partition name the lock names (``None``: whole table).
        dynamic: the txns write dynamic partitions (registered at commit).
        user, host, agent_info: recorded with the txns and locks.
        operation: INSERT (the default), UPDATE or DELETE: the lock type and the write set
            follow it (see the module's docstring).
        exclusive: an UPDATE or DELETE batch takes EXCL_WRITE instead of SHARED_WRITE
            (Hive's ``hive.txn.xlock.mergeinsert``): writers of the table that update or
            delete wait for each other, so two upserts can never both insert one new key;
            inserts and readers (SHARED_READ) are not blocked.
        on_call: called once per metastore round trip (connection statistics).
        heartbeater: the writer's heartbeat thread, to follow this batch from now on
            (a writer keeps one for all its batches); ``None``: the batch starts its own,
            on its own store connection, and stops it on ``close``.
        durability: how the commits are made durable in the metastore: ``fsync`` (synced
            before the commit returns) or ``flush`` (handed to the database's OS: SQLite
            ``synchronous=NORMAL``, PostgreSQL ``synchronous_commit=off``); the writer
            makes its files durable the same way (``acidstream.acid.durability``).
        lock_first: request the first txn's lock while opening the batch, without
            waiting (a writer that begins it at once: one round trip fewer); if it cannot
            be had at once, ``begin_next`` takes it as usual.
    """

    def __init__(
        self,
        store: TxnStore,
        table: TableName,
        *,
        size: int,
        heartbeat_interval_s: float | None = None,
        lock_wait_s: float = 60.0,
        partition: str | None = None,
        dynamic: bool = False,
        user: str = "",
        host: str = "",
        agent_info: str = "",
        operation: DataOperationType = DataOperationType.INSERT,
        exclusive: bool = False,
        on_call: Callable[[], None] | None = None,
        heartbeater: Heartbeater | None = None,
        durability: Durability = "fsync",
        lock_first: bool = False,
    ) -> None:
        if not 1 <= size <= MAX_TXNS_PER_BATCH:
            raise ConfigError(f"a transaction batch holds 1..{MAX_TXNS_PER_BATCH} txns, not {size}")
        if operation not in _LOCK_TYPE:
            raise ConfigError(
                f"a transaction batch inserts, updates or deletes, not {operation.name}"
            )
        if exclusive and operation is DataOperationType.INSERT:
            raise ConfigError("an exclusive (EXCL_WRITE) batch updates or deletes; inserts share")
        self.operation = operation
        self.durability: Durability = durability
        self.lock_type = LockType.EXCL_WRITE if exclusive else _LOCK_TYPE[operation]
        self.store = store
        self.table = table
        self._lock_wait_s = lock_wait_s
        self._partition = partition
        self._dynamic = dynamic
        self._user, self._host, self._agent = user, host, agent_info
        self._on_call = on_call or (lambda: None)
        self._mutex = threading.Lock()
        self._suspects: frozenset[int] = frozenset()  # reported aborted/unknown by a heartbeat
        self._committed: set[int] = set()
        self._aborted: set[int] = set()
        self._locked: set[int] = set()
        self._index = -1
        self._state: TxnState | None = None
        self._own_heartbeater: Heartbeater | None = None
        self._heartbeater: Heartbeater | None = None
        # The txns, their write ids and (lock_first) the first txn's lock in one
        # metastore round trip: a small txn's commit pays for every statement of it.
        opened = store.open_batch(
            size, table.db, table.table, user=user, host=host, agent_info=agent_info,
            first_lock=self._lock_request(0) if lock_first else None,
        )  # fmt: skip
        self._call()
        txns = list(opened.txn_ids)
        self.txn_ids: tuple[int, ...] = opened.txn_ids
        if opened.lock is not None and opened.lock.state is LockState.ACQUIRED:
            self._locked.add(txns[0])
        try:
            if len(txns) != size:
                raise TransactionError(f"asked for {size} txns, the metastore opened {len(txns)}")
            self.write_ids: tuple[int, ...] = opened.write_ids
            first = self.write_ids[0]
            if self.write_ids != tuple(range(first, first + size)):
                # One allocation call hands out consecutive ids; delta names rely on it.
                raise TransactionError(
                    f"write ids {self.write_ids} of one batch are not consecutive"
                )
            if heartbeater is not None:
                heartbeater.follow(self._heartbeat_range, self._on_lost)
            else:
                self._own_heartbeater = Heartbeater(
                    open_store(store.url),
                    interval_s=heartbeat_interval_s,
                    txn_range=self._heartbeat_range,
                    on_lost=self._on_lost,
                    count=self._call,
                )
                self._own_heartbeater.start()
            self._heartbeater = heartbeater or self._own_heartbeater
        except BaseException:
            self._abort_txns(list(txns), "opening the transaction batch failed")
            raise

    # ------------------------------------------------------------------ state
    def _call(self) -> None:
        self._on_call()

    @property
    def size(self) -> int:
        return len(self.txn_ids)

    @property
    def min_write_id(self) -> int:
        return self.write_ids[0]

    @property
    def max_write_id(self) -> int:
        return self.write_ids[-1]

    @property
    def index(self) -> int:
        """Position of the current txn (-1 before the first ``begin_next``)."""
        return self._index

    @property
    def remaining(self) -> int:
        """Txns after the current one."""
        return self.size - 1 - self._index

    @property
    def state(self) -> TxnState | None:
        """State of the current txn (``None``: none begun yet)."""
        return self._state

    @property
    def current_txn(self) -> int:
        if self._index < 0:
            raise TransactionError("no transaction of the batch has begun")
        return self.txn_ids[self._index]

    @property
    def current_write_id(self) -> int:
        return self.write_ids[self._index]

    @property
    def finished(self) -> bool:
        """Every txn of the batch is committed or aborted."""
        return len(self._committed) + len(self._aborted) == self.size

    def lost(self) -> frozenset[int]:
        """Txns the metastore aborted (or does not know) behind this batch's back.

        A txn this batch committed or aborted itself is never lost: a heartbeat whose range
        was taken while it was open may read it after the writer finished it."""
        with self._mutex:
            suspects = self._suspects
        return frozenset(t for t in suspects if t not in self._committed and t not in self._aborted)

    def check_alive(self) -> None:
        """Raise ``TxnAbortedError`` if the metastore aborted a txn of the batch (a
        heartbeat timeout); the batch is then unusable."""
        lost = self.lost()
        if lost:
            raise TxnAbortedError(
                f"Transaction batch {self.txn_ids[0]}..{self.txn_ids[-1]} on {self.table} is "
                f"closed: txns {sorted(lost)} were aborted by the metastore (heartbeat timeout?)"
            )

    def _on_lost(self, txns: frozenset[int]) -> None:
        # Heartbeat thread: only record. Whether a txn is really lost is decided by the
        # writer's thread, which knows what it committed (a heartbeat may race a commit).
        mine = frozenset(t for t in txns if t in self.txn_ids)
        if mine:
            with self._mutex:
                self._suspects = self._suspects | mine

    def _heartbeat_range(self) -> tuple[int, int] | None:
        # The txns not yet committed or aborted: the current one (if open) and those after.
        first = self._index if self._state is TxnState.OPEN else self._index + 1
        first = max(first, 0)
        while first < self.size and (
            self.txn_ids[first] in self._committed or self.txn_ids[first] in self._aborted
        ):
            first += 1
        if first >= self.size:
            return None
        return self.txn_ids[first], self.txn_ids[-1]

    def heartbeat(self) -> None:
        """Heartbeat the open txns now (the thread does it every interval)."""
        if self._heartbeater is not None:
            self._heartbeater.beat_once()

    # ------------------------------------------------------------------ locks
    def _lock_request(self, txn: int) -> LockRequest:
        return LockRequest(
            components=(
                LockComponent(
                    self.lock_type,
                    self.table.db,
                    self.table.table,
                    self._partition,
                    operation=self.operation,
                    is_transactional=True,
                    is_dynamic_partition_write=self._dynamic,
                ),
            ),
            txn_id=txn,
            user=self._user,
            host=self._host,
            agent_info=self._agent,
        )

    def _take_lock(self, txn: int) -> None:
        resp = self.store.lock(self._lock_request(txn), wait_s=self._lock_wait_s)
        self._call()
        if resp.state != LockState.ACQUIRED:
            raise TransactionError(
                f"Unable to acquire lock on {self.table} for txn {txn} "
                f"(state {resp.state.name}, blocked by {resp.blocked_by})"
            )
        self._locked.add(txn)

    def begin_next(self) -> int:
        """Start the next txn: take its streaming lock. Returns its id."""
        self.check_alive()
        if self._state is TxnState.OPEN:
            raise TransactionError("a transaction is already open: commit or abort it first")
        if self.remaining <= 0:
            raise TransactionError("the transaction batch is used up")
        self._index += 1
        self._state = None
        if self.current_txn not in self._locked:  # else taken with the last commit
            self._take_lock(self.current_txn)
        self._state = TxnState.OPEN
        return self.current_txn

    def lock_all(self) -> None:
        """Take the streaming lock of every txn of the batch (a micro-batch writes them all
        at once); the batch's txns are all open from here on."""
        self.check_alive()
        for txn in self.txn_ids:
            if txn not in self._locked:
                self._take_lock(txn)
        self._index = self.size - 1
        self._state = TxnState.OPEN

    # ------------------------------------------------------------------ commit / abort
    def commit(
        self,
        *,
        partitions: Sequence[str] = (),
        key: str | None = None,
        value: str | None = None,
        durable: Callable[[], None] | None = None,
        key_once: bool = False,
    ) -> None:
        """Commit the current txn, registering the dynamic partitions it wrote, with
        ``key``/``value`` stored atomically when given (``key_once``: only if no commit
        stored the key before; else the txn is aborted with ``CommitKeyExistsError``).

        ``durable``, when given, is waited on inside the commit's DB transaction, right
        before ``COMMIT``: the writer's files become durable while the commit's statements
        run, and nothing commits before they are (an ``AcidStreamError`` it raises rolls
        the commit back). The next txn's lock is requested in the same DB transaction
        (one round trip fewer per txn); if it cannot be had at once, ``begin_next``
        takes it as usual.
        """
        if self._state is not TxnState.OPEN:
            raise TransactionError("Transaction state is not OPEN. Missing begin_transaction?")
        self.check_alive()
        txn, wid = self.current_txn, self.current_write_id
        faults.point("batch.before_add_partitions")
        self._register_partitions([(txn, wid)], partitions)
        faults.point("batch.before_commit")
        nxt = self.txn_ids[self._index + 1] if self.remaining > 0 else None
        self._commit([txn], key=key, value=value, durable=durable, next_txn=nxt, key_once=key_once)
        faults.point("batch.after_commit")
        self._state = TxnState.COMMITTED

    def commit_all(
        self,
        *,
        partitions: Sequence[str] = (),
        key: str | None = None,
        value: str | None = None,
    ) -> None:
        """Commit every txn of the batch and ``key``/``value`` in ONE metastore transaction:
        all or none (every file of a micro-batch holds rows of every txn)."""
        if self._state is not TxnState.OPEN or self._committed or self._aborted:
            raise TransactionError("commit_all needs every txn of the batch open (lock_all)")
        if self.operation is not DataOperationType.INSERT and self.size > 1:
            # Each update/delete txn passes its own write-set check (Hive commits them
            # one by one); several cannot become visible in one step.
            raise TransactionError(
                "an update or delete batch of several txns commits them one by one"
            )
        self.check_alive()
        self._register_partitions(list(zip(self.txn_ids, self.write_ids, strict=True)), partitions)
        faults.point("batch.before_commit")
        self._commit(list(self.txn_ids), key=key, value=value)
        faults.point("batch.after_commit")
        self._state = TxnState.COMMITTED

    def _register_partitions(self, txns: list[tuple[int, int]], partitions: Sequence[str]) -> None:
        """Name the partitions the txns wrote (Hive's ``addDynamicPartitions``).

        An update or delete registers even an empty list: that drops the table-level
        placeholder its lock recorded, so a mutation that changed nothing holds no write
        set and conflicts with nobody."""
        if not self._dynamic:
            return
        if not partitions and self.operation is DataOperationType.INSERT:
            return
        parts = sorted(set(partitions))
        for txn, wid in txns:
            self.store.add_dynamic_partitions(
                txn, wid, self.table.db, self.table.table, parts, self.operation
            )
            self._call()

    def _commit(
        self,
        txns: list[int],
        *,
        key: str | None,
        value: str | None,
        durable: Callable[[], None] | None = None,
        next_txn: int | None = None,
        again: bool = True,
        key_once: bool = False,
    ) -> None:
        db, table = self.table.db, self.table.table
        try:
            with self.store.database.commit_durability(sync=self.durability == "fsync"):
                if len(txns) == 1:
                    nxt = None if next_txn is None else self._lock_request(next_txn)
                    lock = self.store.commit_txn(
                        txns[0], key=key, value=value, db=db, table=table,
                        before_commit=durable, next_lock=nxt, key_once=key_once,
                    )  # fmt: skip
                    if next_txn is not None and lock is not None:
                        if lock.state is LockState.ACQUIRED:
                            self._locked.add(next_txn)
                else:
                    self.store.commit_txns(txns, key=key, value=value, db=db, table=table)
            self._call()
        except CommitStateUnknownError as e:
            log.warning("commit of txns %s: outcome unknown (%s); asking the metastore", txns, e)
            state = self._recheck(txns, e)
            if state is TxnState.OPEN:
                if not again:
                    raise
                # The COMMIT never ran: commit now (committing is idempotent once done).
                self._commit(
                    txns, key=key, value=value, durable=durable, next_txn=next_txn,
                    again=False, key_once=key_once,
                )  # fmt: skip
                return
            if state is TxnState.ABORTED:
                self._mark_aborted(txns)
                raise TxnAbortedError(f"txns {txns} were aborted; nothing was committed") from e
        except (CommitConflictError, CommitKeyExistsError):
            # A mutation lost the write-set check, or its once-only key was taken: the
            # metastore aborted it; the caller acts on the type (redo it, or report the
            # other commit), so the error keeps it.
            self._mark_aborted(txns)
            raise
        except TxnAbortedError as e:
            self._mark_aborted(txns)
            raise TxnAbortedError(
                f"Aborted transaction cannot be committed: txns {txns}: {e}"
            ) from e
        self._committed.update(txns)

    def _recheck(self, txns: list[int], cause: CommitStateUnknownError) -> TxnState:
        """The state the metastore shows for a batch whose commit outcome is unknown."""
        try:
            for attempt in Retrying(
                retry=retry_if_exception_type(AcidStreamError),
                wait=wait_exponential_jitter(multiplier=0.05, max=2.0),
                stop=stop_after_delay(_RECHECK_S),
                reraise=True,
            ):
                with attempt:
                    states = {self.store.txn_state(t) for t in txns}
        except AcidStreamError as e:
            raise CommitStateUnknownError(
                f"commit of txns {txns} on {self.table}: outcome unknown and the metastore "
                f"cannot be asked ({e}); the files are kept for recovery"
            ) from cause
        if states == {TxnState.COMMITTED}:
            return TxnState.COMMITTED
        if TxnState.ABORTED in states:
            return TxnState.ABORTED
        if states == {TxnState.OPEN}:
            return TxnState.OPEN
        raise CommitStateUnknownError(
            f"commit of txns {txns}: the metastore shows states {states}"
        ) from cause

    def _mark_aborted(self, txns: Sequence[int]) -> None:
        self._aborted.update(txns)
        self._state = TxnState.ABORTED

    def abort(self, reason: str = "rollback by the client") -> None:
        """Abort the current (open) txn."""
        if self._state is not TxnState.OPEN:
            raise TransactionError("Transaction state is not OPEN. Missing begin_transaction?")
        txn = self.current_txn
        self.store.abort_txn(txn, reason=reason)
        self._call()
        self._mark_aborted([txn])

    def abort_remaining(self, reason: str) -> list[int]:
        """Abort every txn of the batch not committed (best effort: the reaper aborts what
        cannot be aborted now). Returns those txns."""
        rest = [t for t in self.txn_ids if t not in self._committed and t not in self._aborted]
        self._abort_txns(rest, reason)
        if rest:
            self._mark_aborted(rest)
        return rest

    def _abort_txns(self, txns: list[int], reason: str) -> None:
        for t in txns:
            try:
                self.store.abort_txn(t, reason=reason)
                self._call()
            except AcidStreamError as e:
                log.warning("abort of txn %s failed (the housekeeper will): %s", t, e)

    def close(self, reason: str = "transaction batch closed with the txn unused") -> list[int]:
        """Abort what is not committed and stop the batch's own heartbeat thread (a
        shared one just stops seeing txns to beat). Returns the aborted txns."""
        try:
            return self.abort_remaining(reason)
        finally:
            if self._own_heartbeater is not None:
                self._own_heartbeater.stop()
                self._own_heartbeater = None
