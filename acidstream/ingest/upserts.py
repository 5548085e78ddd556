"""Streaming upserts: ``StreamingConnection(options=StreamingOptions(mode="upsert"))``.

Hive Streaming v2's shape (begin, changes, commit) over the row-level mutation engine: a
connection opened for upserts on a keyed table (``acidstream.key``, see
:mod:`acidstream.txn.table_key`) takes, inside a txn,

- ``upsert(record)`` / ``upsert_block(records)``: records parsed by the connection's
  record writer (the same parse as ``write`` / ``write_block``); the row replaces the row
  of its key, or is inserted when the key is new;
- ``upsert_rows(rows)`` / ``upsert_arrow(table)``: already-typed rows (table column order);
- ``delete(key)``: the key's values (a mapping by column, or a sequence in key order);
  a key not in the table is a counted no-op.

The changes are held in memory (in call order) until ``commit_transaction``; then, per key,
the last change of the txn wins (the engine's collapse, by arrival order) and the
collapsed changes are applied by the engine's :class:`~acidstream.mutation.changes.ChangePlan`
in the connection's own txn (its write id): delete events for the old versions, new rows
for the upserts (Hive's split-update), then the commit. What the commit did is
:attr:`UpsertMethods.last_changes` (inserted, updated, deleted, absent deletes).

Rules (documented in ``docs/cdc.md``, "Streaming upserts"):

- The txn's batch is an UPDATE batch holding EXCL_WRITE on the whole table from
  ``begin_transaction`` to the commit (Hive's ``hive.txn.xlock.mergeinsert``): two upsert
  writers of one table take turns, so two can never both insert one new key; appends
  (SHARED_READ) and readers go on. One txn per batch (``txns_per_batch`` must be 1).
- ``write``, ``write_many``, ``write_block``, ``write_rows`` and ``write_arrow`` are refused
  (``ConfigError``): a plain insert would bypass the key and could store a key twice.
- A record or key with a NULL key column is refused at the call (``SerializationError``,
  or the dead letters when configured), never at commit.
- A write conflict at commit (a manual UPDATE/DELETE/MERGE of the table committed while
  this txn was open) aborts the txn: ``CommitConflictError``, nothing of the txn applied;
  the caller begins a new txn and sends the changes again. Any other failure at commit
  aborts it the same way; the txn is never half-applied.

Runs on the caller's thread, under the connection's lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.errors import (
    CommitStateUnknownError,
    ConfigError,
    SerializationError,
    StorageError,
    TransactionError,
    TxnAbortedError,
    storage_error,
)
from acidstream.acid.placement import Placement
from acidstream.acid.table_name import TableName
from acidstream.ingest.call_args import row_tuples
from acidstream.ingest.record_writers import BoundRecordWriter, EncodedBlock
from acidstream.ingest.stats import StatsCounter
from acidstream.ingest.streaming_options import BlockResult
from acidstream.mutation.changes import DELETE_COLUMN, OFFSET_COLUMN, ChangeOptions, ChangePlan
from acidstream.mutation.results import ChangeResult
from acidstream.mutation.run import MutationRun, commit_conflict
from acidstream.mutation.target import Target, row_schema
from acidstream.mutation.write import MutationFiles
from acidstream.txn.batch import TransactionBatch
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnState, TxnStore
from acidstream.txn.table_key import TableKey, table_key

if TYPE_CHECKING:
    from acidstream.ingest.streaming_options import StreamingOptions

__all__ = ["ChangeBuffer", "KeyedWriter", "UpsertMethods", "upsert_key"]

# Each restart of a begin means another writer's update committed meanwhile: progress,
# but a connection that never gets a turn gives up rather than loop for ever.
_MAX_RESTARTS = 100


def upsert_key(table: TableDef) -> TableKey:
    """The key an upsert writer of ``table`` uses.

    Raises:
        ConfigError: the table is not keyed (no ``acidstream.key`` property).
    """
    key = table_key(table)
    if key is None:
        raise ConfigError(
            f"{table.full_name} has no key: upserts need the table property acidstream.key "
            "(e.g. acidstream.key=id), set when the table is created"
        )
    return key


class ChangeBuffer:
    """One txn's changes in call order: upserted rows and deleted keys, as the events the
    engine takes (the table's read columns, ``__acid_delete``, ``__acid_offset``)."""

    def __init__(self, table: TableDef, key: TableKey) -> None:
        self.schema = row_schema(table)  # data columns, then partition columns (strings)
        self.key = key
        self._pieces: list[pa.Table] = []
        self.events = 0
        self.upserts = 0
        self.deletes = 0

    def __len__(self) -> int:
        return self.events

    def add(self, rows: pa.Table, *, delete: bool) -> None:
        """Buffer ``rows`` (columns by name, a subset of :attr:`schema`; missing ones are
        NULL) as upserts or deletes. A NULL key value raises ``SerializationError``
        (checked by the callers first, per record, where a record can be rejected)."""
        if rows.num_rows == 0:
            return
        n = rows.num_rows
        cols: list[pa.Array | pa.ChunkedArray] = []
        for f in self.schema:
            if f.name in rows.column_names:
                c = rows.column(f.name)
                cols.append(c if c.type == f.type else c.cast(f.type))
            else:
                cols.append(pa.nulls(n, f.type))
        piece = pa.Table.from_arrays(cols, schema=self.schema)
        bad = null_keys(piece, self.key)
        if bad:
            raise SerializationError(f"{bad} change(s) with a NULL key column {self.key.columns}")
        self._pieces.append(piece.append_column(DELETE_COLUMN, pa.repeat(delete, n)))
        self.events += n
        if delete:
            self.deletes += n
        else:
            self.upserts += n

    def table(self) -> pa.Table:
        """Every buffered change, with ``__acid_offset`` = its position (arrival order)."""
        if not self._pieces:
            t = self.schema.empty_table().append_column(DELETE_COLUMN, pa.array([], pa.bool_()))
        else:
            t = pa.concat_tables(self._pieces)
        return t.append_column(OFFSET_COLUMN, pa.array(range(t.num_rows), pa.int64()))

    def clear(self) -> None:
        self._pieces = []
        self.events = self.upserts = self.deletes = 0


def null_keys(rows: pa.Table, key: TableKey) -> int:
    """How many rows have a NULL in a key column."""
    mask = key_null_mask(rows, key)
    return 0 if mask is None else int(pc.sum(mask).as_py() or 0)


def key_null_mask(rows: pa.Table, key: TableKey) -> pa.Array | None:
    """Per row: a key column is NULL (``None``: no row has one)."""
    mask: pa.Array | None = None
    for c in key.columns:
        col = rows.column(c)
        if col.null_count == 0:
            continue
        m = (
            pc.is_null(col).combine_chunks()
            if isinstance(col, pa.ChunkedArray)
            else pc.is_null(col)
        )
        mask = m if mask is None else pc.or_(mask, m)
    return mask


class KeyedWriter:
    """A bound record writer that also rejects a record with a NULL key column, with the
    same error from :meth:`encode` and :meth:`encode_block` (the record-writer contract):
    the parse of upserts and deletes where each record can be rejected on its own (the
    HTTP server's ``?mode=upsert``). Key columns that are static partition columns are
    not the writer's to see; they are checked when the changes are buffered."""

    def __init__(
        self,
        inner: BoundRecordWriter,
        *,
        columns: Sequence[str],
        partition_columns: Sequence[str],
        key: TableKey,
    ) -> None:
        self.inner = inner
        cols = [c.lower() for c in columns]
        parts = [c.lower() for c in partition_columns]
        # (key column, index in the row or -1, index in the partition values or -1)
        self._where = [
            (c, cols.index(c) if c in cols else -1, parts.index(c) if c in parts else -1)
            for c in key.columns
            if c in cols or c in parts
        ]

    def _error(self, column: str) -> SerializationError:
        return SerializationError(f"a NULL value in the key column {column!r}")

    def encode(self, record: bytes) -> Any:
        row, pvals = self.inner.encode(record)
        for c, i, j in self._where:
            if (row[i] if i >= 0 else pvals[j]) is None:
                raise self._error(c)
        return row, pvals

    def encode_block(self, records: Sequence[bytes]) -> EncodedBlock:
        enc = self.inner.encode_block(records)
        if not enc.table.num_rows:
            return enc
        bad: pa.Array | None = None
        rejected = list(enc.rejected)
        for c, i, j in self._where:
            col = enc.table.column(i) if i >= 0 else enc.partitions.column(j)  # type: ignore[union-attr]
            if not col.null_count:
                continue
            m = pc.is_null(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
            new = m if bad is None else pc.and_(m, pc.invert(bad))
            err = self._error(c)
            rejected.extend((idx, err) for idx in enc.good_indices.filter(new).to_pylist())
            bad = m if bad is None else pc.or_(bad, m)
        if bad is None:
            return enc
        keep = pc.invert(bad)
        rejected.sort(key=lambda r: r[0])
        return EncodedBlock(
            table=enc.table.filter(keep),
            partitions=None if enc.partitions is None else enc.partitions.filter(keep),
            rejected=tuple(rejected),
            good_indices=enc.good_indices.filter(keep),
            nbytes=enc.nbytes,
        )


class UpsertMethods:
    """The upsert side of :class:`acidstream.ingest.connection.StreamingConnection` (a
    mixin: the connection provides the attributes and methods declared here)."""

    options: StreamingOptions
    name: TableName
    table: TableDef
    _store: TxnStore
    _writer: BoundRecordWriter
    _place: Placement
    _dynamic: bool
    _static: tuple[str | None, ...] | None
    _stats: StatsCounter
    _lock: threading.RLock
    _changes: ChangeBuffer | None
    _last_changes: ChangeResult | None

    def _check_open(self, *, changes: bool = False) -> TransactionBatch:
        raise NotImplementedError

    def _reject(self, record: bytes, error: SerializationError, *, position: str = "") -> bool:
        raise NotImplementedError

    def _given_partition(self, values: Sequence[str | None]) -> tuple[str | None, ...]:
        raise NotImplementedError

    def _finish_batch(self, b: TransactionBatch) -> None:
        raise NotImplementedError

    def _open_batch(self) -> TransactionBatch:
        raise NotImplementedError

    _batch: TransactionBatch | None

    @property
    def key(self) -> TableKey | None:
        """The table's key when the connection is opened for upserts (else ``None``)."""
        return None if self._changes is None else self._changes.key

    @property
    def last_changes(self) -> ChangeResult | None:
        """What the last committed upsert txn did (``None`` before the first)."""
        return self._last_changes

    def _buffer(self) -> ChangeBuffer:
        self._check_open(changes=True)
        buf = self._changes
        assert buf is not None  # _check_open(changes=True) refused an append connection
        return buf

    # ------------------------------------------------------------------ changes
    def upsert(self, record: bytes) -> None:
        """Upsert one record (parsed by the record writer) in the open txn.

        A record that cannot be converted, or has a NULL key column, raises
        ``SerializationError`` (or goes to the dead-letter directory); the txn stays usable.
        """
        if not isinstance(record, (bytes, bytearray)):
            raise SerializationError(f"a record is bytes, not {type(record).__name__}")
        with self._lock:
            res = self._upsert_block([record], None)
            if res.rejected and not self._dead_lettered:
                raise res.rejected[0][1]

    def upsert_block(
        self, records: Sequence[bytes], *, positions: Sequence[str] | None = None
    ) -> BlockResult:
        """Upsert a block of records, parsed in one columnar pass (``write_block``'s
        parse). A bad record (or one with a NULL key column) never fails the block: it is
        returned with its index and error, and goes to the dead letters when configured."""
        bad = next((r for r in records if not isinstance(r, (bytes, bytearray))), b"")
        if not isinstance(bad, (bytes, bytearray)):
            raise SerializationError(
                f"a record is bytes, not {type(bad).__name__} (nothing of the block is written)"
            )
        with self._lock:
            return self._upsert_block(records, positions)

    def upsert_rows(
        self, rows: Iterable[Sequence[Any]], *, partition: Sequence[str | None] = ()
    ) -> int:
        """Upsert already-typed rows (tuples in table column order; ``partition``: their
        partition values, as for ``write_rows``). All or nothing: a row that does not fit,
        or has a NULL key column, raises ``SerializationError`` and none is buffered."""
        with self._lock:
            buf = self._buffer()
            data = self._place.rows_to_table(row_tuples(rows, len(self.table.columns)))
            buf.add(self._with_partition(data, partition), delete=False)
            self._stats.add("records_written", data.num_rows)
            return data.num_rows

    def upsert_arrow(
        self, data: pa.Table | pa.RecordBatch, *, partition: Sequence[str | None] = ()
    ) -> int:
        """Upsert Arrow rows (the table's columns in order, matched by position). All or
        nothing, as :meth:`upsert_rows`."""
        with self._lock:
            buf = self._buffer()
            table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
            names = [n.lower() for n, _ in self.table.columns]
            if table.num_columns != len(names):
                raise ConfigError(f"expected {len(names)} columns, got {table.num_columns}")
            table = table.rename_columns(names)
            buf.add(self._with_partition(table, partition), delete=False)
            self._stats.add("records_written", table.num_rows)
            return table.num_rows

    def delete(self, key: Mapping[str, Any] | Sequence[Any]) -> None:
        """Delete the row of ``key`` in the open txn: a mapping of the key columns to
        their values, or the values in key order. A key not in the table is a counted
        no-op (``last_changes.absent_deletes``).

        Raises:
            ConfigError: ``key`` does not name exactly the key columns.
            SerializationError: a value does not fit its column, or is NULL.
        """
        self.delete_many([key])

    def delete_many(self, keys: Iterable[Mapping[str, Any] | Sequence[Any]]) -> int:
        """:meth:`delete` of each of ``keys``, all or nothing. Returns how many."""
        with self._lock:
            buf = self._buffer()
            cols = buf.key.columns
            values: list[list[Any]] = [[] for _ in cols]
            for k in keys:
                for i, v in enumerate(_key_values(k, cols)):
                    values[i].append(v)
            arrays = []
            for c, vs in zip(cols, values, strict=True):
                typ = buf.schema.field(c).type
                try:
                    arrays.append(pa.array(vs, typ))
                except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as e:
                    raise SerializationError(f"key column {c!r} ({typ}): {e}") from e
            rows = pa.table(dict(zip(cols, arrays, strict=True)))
            buf.add(rows, delete=True)
            self._stats.add("records_written", rows.num_rows)
            return rows.num_rows

    def delete_arrow(self, data: pa.Table, *, partition: Sequence[str | None] = ()) -> int:
        """Delete the keys of ``data`` (a table with at least the key columns that are
        data columns, by name; other columns are ignored; key columns that are partition
        columns come from ``partition`` or the static partition), all or nothing."""
        with self._lock:
            buf = self._buffer()
            pnames = {k.lower() for k in self.table.partition_names}
            if any(c in pnames for c in buf.key.columns):
                data = self._with_partition(data, partition)
            missing = [c for c in buf.key.columns if c not in data.column_names]
            if missing:
                raise ConfigError(f"the keys to delete lack key column(s) {missing}")
            rows = data.select(list(buf.key.columns))
            buf.add(rows, delete=True)
            self._stats.add("records_written", rows.num_rows)
            return rows.num_rows

    def delete_rows(
        self, rows: Iterable[Sequence[Any]], *, partition: Sequence[str | None] = ()
    ) -> int:
        """Delete the keys of whole rows (tuples in table column order, as ``write_rows``
        takes them: only the key columns matter), all or nothing."""
        with self._lock:
            self._buffer()
            data = self._place.rows_to_table(row_tuples(rows, len(self.table.columns)))
            return self.delete_arrow(data, partition=partition)

    # ------------------------------------------------------------------ internals
    @property
    def _dead_lettered(self) -> bool:
        return bool(self.options.dead_letter_path)

    def _upsert_block(
        self, records: Sequence[bytes], positions: Sequence[str] | None
    ) -> BlockResult:
        buf = self._buffer()
        enc = self._writer.encode_block(records)
        rejected = list(enc.rejected)
        table = enc.table
        good = enc.good_indices
        if table.num_rows:
            table, good = self._block_events(table, enc.partitions, good, rejected)
            mask = key_null_mask(table, buf.key)
            if mask is not None:
                err = SerializationError(f"a NULL value in the key {list(buf.key.columns)}")
                rejected.extend((i, err) for i in good.filter(mask).to_pylist())
                table = table.filter(pc.invert(mask))
            buf.add(table, delete=False)
            self._stats.add("records_written", table.num_rows)
        rejected.sort(key=lambda r: r[0])
        for i, e in rejected:
            self._reject(records[i], e, position=positions[i] if positions else "")
        self._stats.add("records_size", sum(map(len, records)))
        return BlockResult(len(records) - len(rejected), tuple(rejected))

    def _block_events(
        self,
        table: pa.Table,
        partitions: pa.Table | None,
        good: pa.Int64Array,
        rejected: list[tuple[int, SerializationError]],
    ) -> tuple[pa.Table, pa.Int64Array]:
        """A parsed block's rows with their partition columns (strings); rows whose
        partition values no directory can hold are added to ``rejected``."""
        pnames = [k.lower() for k in self.table.partition_names]
        if not pnames:
            return table, good
        if partitions is None:  # a static partition
            return self._with_partition(table, self._static or ()), good
        keep = pa.array([True] * table.num_rows)
        for values, rows in self._place.partition_groups(partitions):
            try:
                self._place.partition_dir(values)
            except SerializationError as e:
                rejected.extend((i, e) for i in good.take(rows).to_pylist())
                keep = pc.if_else(
                    pc.is_in(pa.array(range(table.num_rows)), value_set=rows), False, keep
                )
        for name, col in zip(pnames, partitions.columns, strict=True):
            table = table.append_column(name, col.cast(pa.string()))
        return table.filter(keep), good.filter(keep)

    def _with_partition(self, data: pa.Table, partition: Sequence[str | None]) -> pa.Table:
        """``data`` with the partition columns set to ``partition`` (the static
        partition's values when the connection has one)."""
        pnames = [k.lower() for k in self.table.partition_names]
        if not pnames:
            if partition:
                raise ConfigError(f"{self.table.full_name} is not partitioned")
            return data
        values = self._static if self._static is not None else self._given_partition(partition)
        self._place.partition_dir(values)  # SerializationError for values no directory holds
        for name, v in zip(pnames, values, strict=True):
            data = data.append_column(name, pa.repeat(pa.scalar(v, pa.string()), data.num_rows))
        return data

    def _upsert_begun(self, b: TransactionBatch, txn: int) -> int:
        """The upsert txn to use, once ``txn`` holds its EXCL_WRITE lock: ``txn`` itself,
        unless an update or delete of the table committed after it opened (a writer it
        waited for): then its commit would fail the write-set check whatever it wrote, so
        it is aborted and a new txn opened (nothing was buffered yet). Returns the txn id.
        """
        for _ in range(_MAX_RESTARTS):
            if self._store.write_conflict_since(txn, self.name.db, self.name.table) is None:
                return txn
            b.abort()
            self._stats.add("aborted_transactions")
            self._finish_batch(b)
            self._batch = None
            b = self._batch = self._open_batch()
            txn = b.begin_next()
        raise TransactionError(
            f"{self.name}: {_MAX_RESTARTS} upsert txns in a row found another update of the "
            "table committed while they waited for the lock"
        )

    def _commit_changes(self, b: TransactionBatch, *, key: str | None, value: str | None) -> None:
        """Apply the txn's changes with the engine in this txn and commit it (see the
        module docstring); on any failure the txn is aborted, its files removed."""
        buf = self._changes
        assert buf is not None
        events = buf.table()
        txn, wid = b.current_txn, b.current_write_id
        start = time.monotonic()
        files: MutationFiles | None = None
        committed = False
        try:
            table = self._store.get_table(self.name.db, self.name.table)
            target = Target.open(self._store, table, txn)
            files = MutationFiles(target, wid)
            run = MutationRun(target=target, files=files, write_id=wid, txn_id=txn)
            opts = ChangeOptions(
                key=buf.key.columns, retries=0, lock_wait_s=self.options.lock_wait_s
            )
            try:
                result = ChangePlan(events, opts, target.schema)(run)
            except StorageError:
                raise
            except OSError as e:
                raise storage_error(
                    e, f"writing {self.name}", f"txn {txn} was aborted, committed data is intact"
                ) from e
            parts = sorted(p for p in files.partitions if p)
            try:
                b.commit(partitions=parts, key=key, value=value)
            except CommitStateUnknownError:
                committed = True  # recovery decides from the store; never delete its files
                raise
            except TxnAbortedError as e:
                conflict = commit_conflict(e)
                if conflict is not None and conflict is not e:
                    raise conflict from e
                raise
            committed = True
            self._last_changes = _with_run(
                result,
                write_id=wid,
                partitions=tuple(parts),
                files_written=tuple(files.paths),
                seconds=time.monotonic() - start,
            )
            self._stats.add("committed_transactions")
        finally:
            buf.clear()
            if not committed:
                if b.state is TxnState.OPEN:
                    b.abort()
                self._stats.add("aborted_transactions")
                if files is not None:
                    files.remove()
            if b.remaining == 0:
                self._finish_batch(b)


def _with_run(result: ChangeResult, **changes: Any) -> ChangeResult:
    import dataclasses

    return dataclasses.replace(result, **changes)


def _key_values(key: Mapping[str, Any] | Sequence[Any], cols: tuple[str, ...]) -> list[Any]:
    """A key's values in key-column order, from a mapping (names case-insensitive) or a
    sequence; ``ConfigError`` when it does not name exactly the key columns, and
    ``SerializationError`` for a NULL value."""
    if isinstance(key, Mapping):
        given = {str(k).lower(): v for k, v in key.items()}
        if set(given) != set(cols):
            raise ConfigError(f"a key names exactly the key columns {list(cols)}, not {list(key)}")
        out = [given[c] for c in cols]
    elif isinstance(key, (str, bytes)) or not isinstance(key, Sequence):
        if len(cols) != 1:
            raise ConfigError(f"a key of {list(cols)} is a mapping or a sequence of its values")
        out = [key]
    else:
        if len(key) != len(cols):
            raise ConfigError(f"a key has {len(cols)} values ({list(cols)}), not {len(key)}")
        out = list(key)
    if any(v is None for v in out):
        raise SerializationError(f"a NULL value in the key {list(cols)}: {out}")
    return out
