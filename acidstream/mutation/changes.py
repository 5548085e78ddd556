"""Change events applied to a keyed table: the upsert engine of CDC streams.

A batch of change events (an upsert or a delete of a key each, e.g. a Kafka micro-batch of
Debezium events) becomes one MERGE in one txn, as Delta users write by hand with
``foreachBatch`` and as Hive 2's Mutation API did record by record:

1. :func:`collapse`: every key keeps its last event, by ``(ordering, partition, offset)``
   (the source's version, then the Kafka position; without an ordering the Kafka
   position, without that the events' order);
2. :class:`ChangePlan`, the MERGE of the collapsed events on the key::

       WHEN MATCHED AND src.delete [AND not late] THEN DELETE
       WHEN MATCHED [AND not late] THEN UPDATE SET *        -- split-update
       WHEN NOT MATCHED AND NOT src.delete THEN INSERT *

   where *late* (``ordering_guard``) means the table's row has a newer ordering value
   than the event: the event is skipped and counted, so a replayed or reordered old event
   never overwrites a newer version. A delete of a key the table does not hold is a
   counted no-op;
3. :func:`apply_changes` runs it with :func:`~acidstream.mutation.run.run_mutation`: one
   txn and one write id, an EXCL_WRITE lock (Hive's ``hive.txn.xlock.mergeinsert``: two
   upsert writers of one table take turns, so both can never insert one new key, while
   streaming inserts and readers go on), the snapshot taken after the lock, a write-set
   conflict with a concurrent UPDATE/DELETE/MERGE retried with the keys resolved anew,
   and a caller's table parameter (a sink's Kafka offsets) stored with the commit.

Runs on the driver side (the calling process).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.errors import ConfigError
from acidstream.acid.lookup_cache import LookupCache
from acidstream.acid.table_name import TableName
from acidstream.mutation.merge import (
    MatchedDelete,
    MatchedUpdate,
    Matches,
    MergePlan,
    MergeSpec,
    NotMatchedInsert,
)
from acidstream.mutation.results import ChangeResult, MergeResult
from acidstream.mutation.run import MutationRun, run_mutation
from acidstream.mutation.target import ROW_ID_COLUMN, row_schema
from acidstream.mutation.write import by_partition, hashed_buckets
from acidstream.txn.locks import DataOperationType
from acidstream.txn.store import TxnStore

__all__ = [
    "DELETE_COLUMN",
    "OFFSET_COLUMN",
    "PARTITION_COLUMN",
    "ChangeOptions",
    "ChangePlan",
    "apply_changes",
    "collapse",
]

DELETE_COLUMN = "__acid_delete"
"""Events column (bool): True deletes the key; False or NULL upserts the row."""
PARTITION_COLUMN = "__acid_partition"
"""Optional events column (int): the first tie-breaker after the ordering (a Kafka partition)."""
OFFSET_COLUMN = "__acid_offset"
"""Optional events column (int): the second tie-breaker (a Kafka offset, an arrival number)."""

_SEQ = "__acid_seq"
_STATEMENT = 0
"""The statement id of a change batch's delete delta and insert delta (one each)."""
_SRC, _TGT = "src", "tgt"


@dataclass(frozen=True, kw_only=True)
class ChangeOptions:
    """How change events are applied.

    Attributes:
        key: the key columns (table columns; the events must have them).
        ordering: an events column whose larger value is the newer version of a key
            (Debezium's ``source.lsn``, a ``ts_ms``...); NULL sorts first (oldest).
            ``None``: the newest event is the last by partition and offset (or position).
        ordering_guard: skip an event whose ordering value is smaller than the one of the
            key's row in the table (needs ``ordering`` to be a table column too).
        retries: write conflicts with concurrent updates, deletes or merges of the
            table survived (each run resolves the keys anew in a new snapshot).
        lock_wait_s: how long the txn waits for its EXCL_WRITE lock.
    """

    key: tuple[str, ...]
    ordering: str | None = None
    ordering_guard: bool = False
    retries: int = 3
    lock_wait_s: float = 60.0

    def __post_init__(self) -> None:
        if isinstance(self.key, str) or not self.key:
            raise ConfigError(f"change events need a key: a tuple of columns, not {self.key!r}")
        key = tuple(k.strip().lower() for k in self.key)
        if any(not k for k in key) or len(set(key)) != len(key):
            raise ConfigError(f"bad key columns {self.key!r}")
        object.__setattr__(self, "key", key)
        if self.ordering is not None:
            object.__setattr__(self, "ordering", self.ordering.strip().lower())
        if self.ordering_guard and not self.ordering:
            raise ConfigError("ordering_guard needs an ordering column")
        if self.retries < 0:
            raise ConfigError(f"retries must be >= 0, not {self.retries}")


def _lower(events: pa.Table) -> pa.Table:
    names = [n.lower() for n in events.column_names]
    if len(set(names)) != len(names):
        raise ConfigError(f"event columns differ only in case: {events.column_names}")
    return events.rename_columns(names)


def _check_events(events: pa.Table, options: ChangeOptions) -> None:
    cols = set(events.column_names)
    missing = [k for k in options.key if k not in cols]
    if missing:
        raise ConfigError(f"the change events lack key column(s) {missing}")
    if options.ordering is not None and options.ordering not in cols:
        raise ConfigError(f"the change events lack the ordering column {options.ordering!r}")
    for k in options.key:
        nulls = events.column(k).null_count
        if nulls:
            raise ConfigError(
                f"{nulls} change event(s) have a NULL key {k!r} (route them to dead letters)"
            )


def collapse(events: pa.Table, options: ChangeOptions) -> pa.Table:
    """The last event of every key: the one with the greatest ``(ordering, partition,
    offset)``, ties and missing columns broken by position (later wins). The result has
    the events' columns, ``DELETE_COLUMN`` filled (NULL -> False), one row per key.

    Raises:
        ConfigError: a key or ordering column missing, a NULL key.
    """
    events = _lower(events)
    _check_events(events, options)
    n = events.num_rows
    if DELETE_COLUMN in events.column_names:
        i = events.column_names.index(DELETE_COLUMN)
        flag = pc.fill_null(events.column(i).cast(pa.bool_()), False)
        events = events.set_column(i, DELETE_COLUMN, flag)
    else:
        events = events.append_column(DELETE_COLUMN, pa.array(np.zeros(n, dtype=bool)))
    if n <= 1:
        return events
    order = [
        (c, "ascending", "at_start")
        for c in (options.ordering, PARTITION_COLUMN, OFFSET_COLUMN)
        if c is not None and c in events.column_names
    ]
    if order:
        # A stable sort: equal (ordering, partition, offset) keep their positions.
        idx = pc.sort_indices(events, sort_keys=order)
        events = events.take(idx)
    seq = events.select(list(options.key)).append_column(
        _SEQ, pa.array(np.arange(n, dtype=np.int64))
    )
    last = seq.group_by(list(options.key), use_threads=False).aggregate([(_SEQ, "max")])
    rows = pc.sort_indices(last.column(f"{_SEQ}_max"))
    return events.take(pc.take(last.column(f"{_SEQ}_max"), rows))


class ChangePlan:
    """Change events checked against the table and collapsed, as a mutation body: call it
    inside :func:`~acidstream.mutation.run.run_mutation` (or a connection's own txn)."""

    def __init__(
        self,
        events: pa.Table,
        options: ChangeOptions,
        target_schema: pa.Schema,
        *,
        cache: LookupCache | None = None,
    ) -> None:
        self.options = options
        self.cache = cache
        self.events = events.num_rows
        tnames = set(target_schema.names)
        for k in options.key:
            if k not in tnames:
                raise ConfigError(f"key column {k!r} is not a column of the table")
        if options.ordering_guard and options.ordering not in tnames:
            raise ConfigError(
                f"ordering_guard needs the ordering column {options.ordering!r} in the table"
            )
        self.changes = collapse(events, options)
        self._deletes = self.changes.column(DELETE_COLUMN)
        s, t = _SRC, _TGT
        is_delete = pc.field(f"{s}.{DELETE_COLUMN}")
        newer: pc.Expression | None = None
        if options.ordering_guard:
            o = options.ordering
            newer = pc.field(f"{t}.{o}").is_null() | (pc.field(f"{s}.{o}") >= pc.field(f"{t}.{o}"))
        clauses: list[MatchedDelete | MatchedUpdate | NotMatchedInsert] = [
            MatchedDelete(condition=is_delete if newer is None else is_delete & newer)
        ]
        clauses.append(MatchedUpdate(all_except=(), condition=newer))
        clauses.append(NotMatchedInsert(insert_all=True, condition=~is_delete))
        self.plan = MergePlan(
            MergeSpec(
                source=self.changes,
                on=options.key,
                source_alias=s,
                target_alias=t,
                clauses=tuple(clauses),
            ),
            target_schema,
        )

    def __call__(self, run: MutationRun) -> ChangeResult:
        found = self.plan.find(run, cache=self.cache)
        merged = self._write(run, found)
        matched = np.zeros(self.changes.num_rows, dtype=bool)
        matched[found.pairs.column("__s").to_numpy()] = True
        deletes = self._deletes.to_numpy(zero_copy_only=False).astype(bool)
        return ChangeResult(
            events=self.events,
            keys=self.changes.num_rows,
            inserted=merged.rows_inserted,
            updated=merged.rows_updated,
            deleted=merged.rows_deleted,
            absent_deletes=int(np.count_nonzero(deletes & ~matched)),
            skipped_late=int(np.count_nonzero(matched)) - merged.rows_updated - merged.rows_deleted,
            txn_id=run.txn_id,
            write_id=run.write_id,
        )

    def _write(self, run: MutationRun, found: Matches) -> MergeResult:
        """The batch's files: ONE delete delta (the deleted and the updated rows' delete
        events) and ONE insert delta (the updated rows' new versions and the inserted
        rows, sorted by key) per partition and bucket, both statement 0, where the MERGE's
        per-clause layout writes four (insert, update's delete and insert, delete). Every
        later batch's key lookup and every read opens each file of the earlier batches:
        half the files, and a key-sorted insert delta whose row-group min/max rule out
        the row groups a later batch's keys miss. (The statement's own delete delta never
        applies to its insert delta: same write id, same statement.)"""
        t, src, target, pairs = run.target, self.changes, found.target, found.pairs
        # Both deltas' files are made durable together at the end (one wait for the disk).
        run.files.defer_sync = True
        gone: list[pa.Table] = []  # matched target rows (with ROW__ID) to delete-event
        new: list[tuple[pa.Table, pa.Array | None]] = []  # new rows, their kept buckets
        deleted = updated = inserted = 0
        plan = self.plan
        if plan.matched and pairs.num_rows:
            trow, joined = plan.joined_pairs(target, src, pairs)
            for a in plan.matched_rows(t, joined, trow.column(ROW_ID_COLUMN)):
                hit = trow.filter(a.mask)
                gone.append(hit)
                if a.rows is None:
                    deleted += hit.num_rows
                else:
                    new.append((a.rows, a.buckets))
                    updated += hit.num_rows
        matched_src = pc.is_in(
            pa.array(np.arange(src.num_rows, dtype=np.int64)),
            value_set=pairs.column("__s").combine_chunks(),
        )
        rest = src.filter(pc.invert(matched_src))
        rest = rest.rename_columns([f"{plan.src_alias}.{n}" for n in rest.column_names])
        for a in plan.not_matched_rows(rest):
            assert a.rows is not None
            new.append((a.rows, None))
            inserted += a.rows.num_rows
        if gone:
            hits = pa.concat_tables(gone)
            for part, group in by_partition(t, hits):
                run.files.delete_events(part, group.column(ROW_ID_COLUMN), _STATEMENT)
        if new:
            rows = pa.concat_tables([r for r, _ in new])
            buckets: pa.Array | None = None
            if any(b is not None for _, b in new):
                # Updated rows keep their buckets; the others are hashed as the writer would.
                kept = [b if b is not None else hashed_buckets(t, r) for r, b in new]
                buckets = pa.chunked_array(
                    [
                        c.cast(pa.int32())
                        for b in kept
                        for c in (b.chunks if isinstance(b, pa.ChunkedArray) else [b])
                    ],
                    pa.int32(),
                ).combine_chunks()
            order = pc.sort_indices(rows, sort_keys=[(k, "ascending") for k in self.options.key])
            rows = rows.take(order)
            if buckets is not None:
                buckets = buckets.take(order)
            run.files.insert_rows(rows, _STATEMENT, buckets=buckets)
        run.files.sync()
        return MergeResult(
            rows_inserted=inserted,
            rows_updated=updated,
            rows_deleted=deleted,
            write_id=run.write_id,
        )


def apply_changes(
    store: TxnStore,
    name: TableName,
    events: pa.Table,
    options: ChangeOptions,
    *,
    commit_param: Callable[[ChangeResult], tuple[str, str]] | None = None,
    agent_info: str | None = None,
    cache: LookupCache | None = None,
) -> ChangeResult:
    """Apply change events to table ``name`` in one txn (see the module's docstring).

    Args:
        events: the table's columns by name (a delete needs only the key), plus
            ``DELETE_COLUMN`` and optionally ``PARTITION_COLUMN`` / ``OFFSET_COLUMN``
            and the ordering column.
        options: key, ordering, guard, retries.
        commit_param: given the result, the ``(table parameter, value)`` stored
            atomically with the commit (a sink's offsets and batch id: exactly once).
        agent_info: recorded with the txn (default ``acidstream-mutation``): a writer
            that restarts after a crash finds (and aborts) its dead txn by it, instead of
            waiting for the metastore's timeout to release the EXCL_WRITE lock.
        cache: what earlier batches' key lookups learned of the table's immutable files
            (``acidstream.acid.lookup_cache``): a writer applying batch after batch to
            one table passes the same cache each time (the upsert sink does); which
            files are read still comes from each txn's own snapshot.

    Raises:
        ConfigError: a key or ordering column missing, a NULL key; nothing written.
        CommitConflictError: write conflicts outlived ``options.retries``.
    """
    table = store.get_table(name.db, name.table)
    plan = ChangePlan(events, options, row_schema(table), cache=cache)
    return run_mutation(
        store,
        name,
        operation=DataOperationType.UPDATE,
        body=plan,
        kind=ChangeResult,
        retries=options.retries,
        lock_wait_s=options.lock_wait_s,
        exclusive=True,
        commit_param=commit_param,
        agent_info=agent_info,
    )
