"""One mutation, one txn: lock, snapshot, write, commit; retried on a commit conflict.

Hive runs each UPDATE, DELETE or MERGE in one txn with one table write id: SHARED_WRITE
lock (operation UPDATE or DELETE), the snapshot of that txn, the files, and at commit a
write-set entry per partition written. Of two mutations of one partition that overlap in
time the first committer wins; the other's commit is refused (``CommitConflictError``),
its txn aborted and nothing of it visible. With ``retries`` the loser starts over: a new
txn, a new snapshot, the rows found anew (old delete events are never replayed: the rows
they named may have changed). Runs on the driver side (the process calling the API).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from acidstream.acid import faults
from acidstream.acid.errors import (
    CommitConflictError,
    CommitKeyExistsError,
    CommitStateUnknownError,
    ConfigError,
    StorageError,
    TransactionError,
    TxnAbortedError,
    storage_error,
)
from acidstream.acid.table_name import TableName
from acidstream.mutation.results import (
    ChangeResult,
    MergeResult,
    MutationResult,
    from_json,
    to_json,
)
from acidstream.mutation.target import Target
from acidstream.mutation.write import MutationFiles
from acidstream.txn.batch import TransactionBatch
from acidstream.txn.locks import DataOperationType
from acidstream.txn.store import TxnStore

__all__ = [
    "IDEMPOTENCY_KEY_PREFIX",
    "MutationRun",
    "commit_conflict",
    "idempotency_param",
    "run_mutation",
]

log = logging.getLogger(__name__)

IDEMPOTENCY_KEY_PREFIX = "_meta.mutation."
"""Table parameter prefix of the results stored with idempotent mutations' commits."""

AGENT = "acidstream-mutation"

R = TypeVar("R", MutationResult, MergeResult, ChangeResult)


@dataclass(frozen=True, kw_only=True)
class MutationRun:
    """What a mutation's body gets: the table in the txn's snapshot and the files it writes."""

    target: Target
    files: MutationFiles
    write_id: int
    txn_id: int


MAX_RESTARTS = 100
"""Txns in a row a mutation may start anew because its lock came after a conflicting commit."""


class _Restart(Exception):
    """The txn holds its lock but another update or delete of the table committed after
    it opened: its commit would lose the write-set check, so it starts over at once."""


def idempotency_param(key: str) -> str:
    """The table parameter holding the result stored under idempotency key ``key``."""
    if not key or not key.strip():
        raise ConfigError("an idempotency key must not be empty")
    return IDEMPOTENCY_KEY_PREFIX + key


def commit_conflict(e: BaseException) -> CommitConflictError | None:
    """The commit conflict ``e`` is or wraps (the batch re-raises a refused commit as
    ``TxnAbortedError`` with the conflict as its cause)."""
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, CommitConflictError):
            return seen
        seen = seen.__cause__
    return None


def run_mutation(
    store: TxnStore,
    name: TableName,
    *,
    operation: DataOperationType,
    body: Callable[[MutationRun], R],
    kind: type[R],
    retries: int = 0,
    idempotency_key: str | None = None,
    lock_wait_s: float = 60.0,
    exclusive: bool = False,
    commit_param: Callable[[R], tuple[str, str]] | None = None,
    agent_info: str | None = None,
) -> R:
    """Run ``body`` in a txn of its own and commit what it wrote; return its result with
    ``write_id``, ``files_written``, ``partitions``, ``seconds`` and ``attempts`` filled in.

    ``body`` reads the table in the txn's snapshot (``run.target``) and writes through
    ``run.files``; an exception from it aborts the txn and removes its files.
    ``exclusive``: the txn takes EXCL_WRITE instead of SHARED_WRITE (upserts: see
    :class:`~acidstream.txn.batch.TransactionBatch`). ``commit_param``: given the
    result, a ``(table parameter, value)`` stored atomically with the commit (and
    overwritten by the next one: a sink's progress); not with ``idempotency_key``.
    ``agent_info``: recorded with the txn (default ``acidstream-mutation``).

    Raises:
        CommitConflictError: another mutation of a partition written committed first, and
            ``retries`` are used up (nothing of this one is visible).
        ConfigError: a bad argument; ``retries`` < 0.
        CardinalityViolationError, and whatever ``body`` raises: nothing written.
    """
    if retries < 0:
        raise ConfigError(f"retries must be >= 0, not {retries}")
    if commit_param is not None and idempotency_key is not None:
        raise ConfigError("a mutation stores an idempotency key or a commit parameter, not both")
    param = idempotency_param(idempotency_key) if idempotency_key is not None else None
    if param is not None:
        stored = store.get_table_param(name.db, name.table, param)
        if stored is not None:
            return _replayed(stored, kind, idempotency_key)
    start = time.monotonic()
    attempt = restarts = 0
    while True:
        attempt += 1
        try:
            result = _attempt(
                store, name, operation, body, param, lock_wait_s, exclusive, commit_param,
                agent_info or AGENT,
            )  # fmt: skip
        except CommitKeyExistsError as e:
            # The same key committed by a concurrent run (ours was aborted, its files
            # removed): that run's result is the statement's result.
            stored = store.get_table_param(name.db, name.table, param or "")
            if stored is None:
                raise
            log.info(
                "%s: idempotency key %r committed by another run: %s", name, idempotency_key, e
            )
            return _replayed(stored, kind, idempotency_key)
        except _Restart as e:
            # Not a lost race but a late start: nothing was written; not one of the retries.
            restarts += 1
            if restarts > MAX_RESTARTS:
                raise TransactionError(
                    f"{name}: {MAX_RESTARTS} txns in a row found another update of the table "
                    "committed while they waited for their lock"
                ) from e
            log.info("%s: %s; starting again in a new txn", name, e)
            continue
        except (CommitConflictError, TxnAbortedError) as e:
            conflict = commit_conflict(e)
            if conflict is None or attempt - restarts > retries:
                if conflict is not None and not isinstance(e, CommitConflictError):
                    raise conflict from e
                raise
            log.info("%s: commit conflict, running again (%d of %d): %s", name, attempt, retries, e)
            continue
        seconds = time.monotonic() - start
        return _with(result, seconds=seconds, attempts=attempt)


def _replayed(stored: str, kind: type[R], key: str | None) -> R:
    try:
        return from_json(stored, kind)
    except ValueError as e:
        raise ConfigError(f"idempotency key {key!r} was used by another kind of mutation") from e


def _with(result: R, **changes: object) -> R:
    import dataclasses

    return dataclasses.replace(result, **changes)  # type: ignore[arg-type]


def _attempt(
    store: TxnStore,
    name: TableName,
    operation: DataOperationType,
    body: Callable[[MutationRun], R],
    param: str | None,
    lock_wait_s: float,
    exclusive: bool = False,
    commit_param: Callable[[R], tuple[str, str]] | None = None,
    agent_info: str = AGENT,
) -> R:
    table = store.get_table(name.db, name.table)
    batch = TransactionBatch(
        store,
        name,
        size=1,
        operation=operation,
        exclusive=exclusive,
        dynamic=table.is_partitioned,
        lock_wait_s=lock_wait_s,
        agent_info=agent_info,
    )
    files: MutationFiles | None = None
    committed = False  # or perhaps committed: the files must stay
    try:
        txn = batch.begin_next()
        # Hive 4's getLatestTxnIdInConflict: an update or delete that committed while this
        # txn waited for its lock would fail this txn's write-set check at commit, whatever
        # it writes; start again in a new txn (a snapshot that sees it) before the body.
        late = store.write_conflict_since(txn, name.db, name.table)
        if late is not None:
            raise _Restart(f"txn {late} updated the table after txn {txn} opened")
        target = Target.open(store, table, txn)
        files = MutationFiles(target, batch.current_write_id)
        run = MutationRun(target=target, files=files, write_id=batch.current_write_id, txn_id=txn)
        faults.point("mutation.after_open")
        try:
            result = body(run)
        except StorageError:
            raise
        except OSError as e:
            # Full disk, read-only file system, I/O error: typed as for every writer; the
            # txn is aborted and the files removed below.
            raise storage_error(
                e, f"writing {name}", f"txn {txn} was aborted, committed data is intact"
            ) from e
        result = _with(
            result,
            write_id=run.write_id,
            files_written=tuple(files.paths),
            partitions=tuple(sorted(p for p in files.partitions if p)),
        )
        key, value = param, to_json(result) if param is not None else None
        if commit_param is not None:
            key, value = commit_param(result)
        faults.point("mutation.before_commit")
        try:
            batch.commit(
                partitions=sorted(p for p in files.partitions if p),
                key=key,
                value=value,
                key_once=param is not None,
            )
        except CommitStateUnknownError:
            committed = True  # recovery decides from the store; never delete its files
            raise
        committed = True
        faults.point("mutation.after_commit")
        return result
    finally:
        try:
            batch.close(reason="mutation failed" if not committed else "mutation done")
        finally:
            if not committed and files is not None:
                files.remove()
