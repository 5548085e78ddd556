"""``StreamingConnection``: Hive's Streaming Ingest API v2 in Python.

A connection streams records into one full-ACID table. Transactions come in
batches (``transaction_batch_size``, Hive's default 1): the batch's txns are
opened in one round trip and given consecutive write ids, and every (partition,
bucket) gets one ``delta_<min>_<max>[_stmt]/bucket_N`` file for the whole batch.
Each commit makes its rows durable behind an intermediate ORC footer whose length
goes to the ``_flush_length`` side file (batches of more than one txn), then
commits in the metastore, optionally with a key/value stored atomically with the
commit. Aborted txns leave their rows hidden by write id. See ``docs/ingest.md``.
"""

from __future__ import annotations

import getpass
import logging
import socket
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from acid import layout
from acid.bucket_hash import bucket_number
from acid.errors import (
    AcidStreamError,
    ConfigError,
    SerializationError,
    TableNotFoundError,
    TransactionError,
    TxnAbortedError,
)
from acid.schema import HiveType, TableSchema
from acid.storage import Storage
from acid.writer import AcidFileWriter, OrcWriterOptions
from ingest.dead_letter import DeadLetterFile
from ingest.heartbeat import Heartbeater
from ingest.record_writers import BoundRecordWriter, RecordWriter
from ingest.stats import ConnectionStats, StatsCounter
from txn.catalog import DEFAULT_PARTITION_NAME, TableDef, make_partition_name, parse_partition_name
from txn.config import StoreConfig
from txn.locks import DataOperationType, LockComponent, LockRequest, LockState, LockType
from txn.store import TxnStore, open_store

__all__ = ["StreamingConnection", "StreamingOptions", "TxnStatus"]

log = logging.getLogger(__name__)

MAX_OPEN_BATCH = 1000


class TxnStatus:
    """Hive's ``TxnState`` codes for the current transaction of a batch."""

    INACTIVE = "I"
    OPEN = "O"
    COMMITTED = "C"
    ABORTED = "A"


@dataclass(frozen=True)
class StreamingOptions:
    """Connection settings, parsed once.

    Attributes:
        transaction_batch_size: txns per batch (Hive's default 1; capped at 1000).
        txn_timeout_s: the metastore's txn timeout; heartbeats go every half of it.
        heartbeat_interval_s: override the heartbeat interval.
        memory_limit_bytes: buffered record bytes that trigger an auto-flush (rows handed to
            the ORC writers and, in a multi-txn batch, an intermediate footer) without commit.
        statement_id: Hive's ``withStatementId``; -1 writes directories without ``_stmt``.
        orc: ORC writer settings.
        dead_letter_path: divert records that fail conversion to this JSON-lines file
            (with the reason) instead of raising ``SerializationError``.
        lock_wait_s: how long ``begin_transaction`` waits for the table lock.
        user, host, agent_info: recorded with txns and locks.
    """

    transaction_batch_size: int = 1
    txn_timeout_s: float = 300.0
    heartbeat_interval_s: float | None = None
    memory_limit_bytes: int = 100 * 1024 * 1024
    statement_id: int = -1
    orc: OrcWriterOptions = field(default_factory=OrcWriterOptions)
    dead_letter_path: str | None = None
    lock_wait_s: float = 60.0
    user: str = ""
    host: str = ""
    agent_info: str = ""

    def __post_init__(self) -> None:
        if self.transaction_batch_size < 1:
            raise ConfigError("transaction_batch_size must be >= 1")
        if self.txn_timeout_s <= 0:
            raise ConfigError("txn_timeout_s must be > 0")
        if self.heartbeat_interval_s is not None and self.heartbeat_interval_s <= 0:
            raise ConfigError("heartbeat_interval_s must be > 0")
        if self.memory_limit_bytes <= 0:
            raise ConfigError("memory_limit_bytes must be > 0")
        if not -1 <= self.statement_id < layout.MAX_STATEMENTS_PER_TXN:
            raise ConfigError("statement_id must be in [-1, 10000)")

    @property
    def batch_size(self) -> int:
        # Hive's openTxns silently caps a batch at hive.txn.max.open.batch.
        return min(self.transaction_batch_size, MAX_OPEN_BATCH)

    @property
    def heartbeat_interval(self) -> float:
        return self.heartbeat_interval_s or self.txn_timeout_s / 2


@dataclass
class _Batch:
    txn_ids: list[int]
    write_ids: dict[int, int]
    index: int = -1
    state: str = TxnStatus.INACTIVE
    lost: frozenset[int] = frozenset()
    writers: dict[tuple[str, int], AcidFileWriter] = field(default_factory=dict)

    @property
    def min_write_id(self) -> int:
        return self.write_ids[self.txn_ids[0]]

    @property
    def max_write_id(self) -> int:
        return self.write_ids[self.txn_ids[-1]]

    @property
    def remaining(self) -> int:
        return len(self.txn_ids) - 1 - self.index

    @property
    def current_txn(self) -> int:
        return self.txn_ids[self.index]


class StreamingConnection:
    """Streams records into one transactional table (Hive's ``HiveStreamingConnection``).

    Use it as a context manager, or call ``close()``: closing aborts any txn of the batch
    not yet committed and finishes the files.

    Args:
        table: ``db.table`` (or ``table`` in the ``default`` database).
        record_writer: turns each record into a row (``StrictDelimitedInputWriter``...).
        metastore: metastore URL; default from ``ACIDSTREAM_METASTORE`` or the embedded store.
        warehouse: warehouse root; default from ``ACIDSTREAM_WAREHOUSE`` or ``./warehouse``.
        store: an open store to use instead of ``metastore`` (the caller closes it).
        static_partition: partition values (in key order, or by key) for a static-partition
            connection; ``None`` on a partitioned table means dynamic partitioning: the
            partition values are the trailing fields of each record.
        options: everything else.
    """

    def __init__(
        self,
        table: str,
        *,
        record_writer: RecordWriter,
        metastore: str | None = None,
        warehouse: str | None = None,
        store: TxnStore | None = None,
        static_partition: Sequence[str] | Mapping[str, str] | None = None,
        options: StreamingOptions | None = None,
    ) -> None:
        self.options = options or StreamingOptions()
        db, _, name = table.lower().rpartition(".")
        self.db, self.table_name = db or "default", name
        if store is None:
            cfg = StoreConfig.resolve(metastore=metastore, warehouse=warehouse)
            self._store = open_store(cfg.metastore_url, warehouse=cfg.warehouse)
            self._owns_store = True
        else:
            self._store = store
            self._owns_store = False
        self._stats = StatsCounter()
        self._lock = threading.RLock()
        self._closed = False
        self._batch: _Batch | None = None
        self._heartbeater: Heartbeater | None = None
        self._dead_letter: DeadLetterFile | None = None
        try:
            self.table = self._load_table()
            self._count_call()
            self.schema: TableSchema = self.table.schema
            self._storage, self._location = Storage.for_path(self._table_location())
            self._static = self._static_partition(static_partition)
            self._dynamic = self.table.is_partitioned and self._static is None
            self._writer: BoundRecordWriter = record_writer.bind(
                self.schema, partition_columns=self.table.partition_names if self._dynamic else ()
            )
            if self.options.batch_size > 1 and not self._storage.supports_flush:
                raise ConfigError(
                    "The backing filesystem only supports transaction batch sizes of 1 "
                    f"({self._storage.protocol} cannot hflush a file being written)"
                )
            self._bucket_types, self._bucket_idx = self._bucketing()
            if self.options.dead_letter_path:
                self._dead_letter = DeadLetterFile(self.options.dead_letter_path)
        except BaseException:
            if self._owns_store:
                self._store.close()
            raise
        self._known_partitions: dict[tuple[str | None, ...], str] = {}
        self._touched: set[str] = set()
        self._buffers: dict[tuple[str, int], list[tuple[Any, ...]]] = {}
        self._arrow_buffers: dict[tuple[str, int], list[pa.Table]] = {}
        self._buffered_bytes = 0
        user = self.options.user or _user()
        host = self.options.host or socket.gethostname()
        self._user, self._host = user, host
        self._agent = self.options.agent_info or f"{user}:{host}:{threading.current_thread().name}"

    # ------------------------------------------------------------------ setup
    def _count_call(self) -> None:
        self._stats.add("metastore_calls")

    def _load_table(self) -> TableDef:
        try:
            t = self._store.get_table(self.db, self.table_name)
        except TableNotFoundError as e:
            raise TableNotFoundError(
                f"Invalid table db:{self.db}, table:{self.table_name}: {e}"
            ) from e
        if not t.is_transactional or t.is_insert_only:
            raise TableNotFoundError(
                f"Invalid table db:{self.db}, table:{self.table_name}: is not an Acid table"
            )
        return t

    def _table_location(self) -> str:
        if not self.table.location:
            raise ConfigError(f"table {self.table.full_name} has no location")
        return self.table.location

    def _static_partition(
        self, values: Sequence[str] | Mapping[str, str] | None
    ) -> tuple[str | None, ...] | None:
        keys = self.table.partition_names
        if values is None or (not isinstance(values, Mapping) and len(values) == 0):
            return None
        if not keys:
            raise ConfigError(
                f"static partition values given, but {self.table.full_name} is not partitioned"
            )
        if isinstance(values, Mapping):
            missing = [k for k in keys if k not in values]
            if missing or len(values) != len(keys):
                raise ConfigError(
                    f"static partition must give exactly {list(keys)}, got {list(values)}"
                )
            return tuple(values[k] for k in keys)
        if len(values) != len(keys):
            raise ConfigError(
                f"static partition needs {len(keys)} values ({list(keys)}), got {len(values)}"
            )
        return tuple(values)

    def _bucketing(self) -> tuple[list[HiveType], list[int]]:
        if self.table.num_buckets <= 0 or not self.table.bucket_cols:
            return [], []
        names = list(self.schema.names)
        idx = [names.index(c) for c in self.table.bucket_cols]
        return [self.schema.columns[i][1] for i in idx], idx

    # ------------------------------------------------------------------ state
    def _check_usable(self) -> None:
        if self._closed:
            raise TransactionError("connection is closed")
        b = self._batch
        if b is not None and b.lost:
            raise TxnAbortedError(
                f"Transaction batch {b.txn_ids[0]}..{b.txn_ids[-1]} is closed(): txns {sorted(b.lost)} "
                "were aborted or are unknown to the metastore (heartbeat timeout?)"
            )

    def _check_open(self) -> _Batch:
        self._check_usable()
        b = self._batch
        if b is None or b.state != TxnStatus.OPEN:
            raise TransactionError("Transaction state is not OPEN. Missing begin_transaction?")
        return b

    @property
    def current_txn_id(self) -> int | None:
        b = self._batch
        return b.current_txn if b is not None and b.index >= 0 else None

    @property
    def current_write_id(self) -> int | None:
        b = self._batch
        return b.write_ids[b.current_txn] if b is not None and b.index >= 0 else None

    @property
    def state(self) -> str:
        return self._batch.state if self._batch is not None else TxnStatus.INACTIVE

    def stats(self) -> ConnectionStats:
        """Counters since the connection was opened (Hive's ``ConnectionStats``)."""
        return self._stats.snapshot()

    # ------------------------------------------------------------------ batches
    def _open_batch(self) -> _Batch:
        n = self.options.batch_size
        txns = self._store.open_txns(n, user=self._user, host=self._host, agent_info=self._agent)
        self._count_call()
        try:
            wids = self._store.allocate_write_ids(txns, self.db, self.table_name)
            self._count_call()
        except BaseException:
            for t in txns:
                self._safe_abort(t, "allocate write ids failed")
            raise
        batch = _Batch(list(txns), dict(wids))
        self._batch = batch
        self._start_heartbeat()
        return batch

    def _start_heartbeat(self) -> None:
        if self._heartbeater is not None:
            return
        # A second store connection, like Hive's separate heartbeat metastore client.
        hb_store = open_store(self._store.url)
        self._heartbeater = Heartbeater(
            hb_store,
            interval_s=self.options.heartbeat_interval,
            txn_range=self._heartbeat_range,
            on_lost=self._lost,
            count=lambda: self._stats.add("metastore_calls"),
        )
        self._heartbeater.start()

    def _heartbeat_range(self) -> tuple[int, int] | None:
        b = self._batch
        if b is None or b.lost:
            return None
        # Only the txns not yet committed or aborted: the open one and those after it.
        first = max(b.index if b.state == TxnStatus.OPEN else b.index + 1, 0)
        if first >= len(b.txn_ids):
            return None
        return b.txn_ids[first], b.txn_ids[-1]

    def _lost(self, txns: frozenset[int]) -> None:
        b = self._batch
        if b is not None:
            b.lost = b.lost | frozenset(t for t in txns if t in b.write_ids)
            if b.lost:
                log.error(
                    "txns %s were aborted or are unknown: the batch is closed", sorted(b.lost)
                )

    def heartbeat(self) -> None:
        """Heartbeat the batch now (the background thread does this every interval)."""
        if self._heartbeater is not None:
            self._heartbeater.beat_once()

    # ------------------------------------------------------------------ API
    def begin_transaction(self) -> int:
        """Start the next txn of the batch (opening a new batch when needed) and take the
        streaming lock (SHARED_READ, op INSERT). Returns the txn id."""
        with self._lock:
            self._check_usable()
            b = self._batch
            if b is not None and b.state == TxnStatus.OPEN:
                raise TransactionError("a transaction is already open: commit or abort it first")
            if b is None or b.remaining <= 0:
                if b is not None:
                    self._finish_batch(b)
                b = self._open_batch()
            b.index += 1
            txn = b.current_txn
            part = None if self._static is None else self._partition_name(self._static)
            req = LockRequest(
                components=(
                    LockComponent(
                        LockType.SHARED_READ,
                        self.db,
                        self.table_name,
                        part,
                        operation=DataOperationType.INSERT,
                        is_transactional=True,
                        is_dynamic_partition_write=self._dynamic,
                    ),
                ),
                txn_id=txn,
                user=self._user,
                host=self._host,
                agent_info=self._agent,
            )
            resp = self._store.lock(req, wait_s=self.options.lock_wait_s)
            self._count_call()
            if resp.state != LockState.ACQUIRED:
                raise TransactionError(
                    f"Unable to acquire lock on {self.db}.{self.table_name} for txn {txn} "
                    f"(state {resp.state.name}, blocked by {resp.blocked_by})"
                )
            b.state = TxnStatus.OPEN
            self._touched = set()
            return txn

    def write(self, record: bytes) -> None:
        """Write one record into the open txn.

        A record that cannot be converted raises ``SerializationError`` (or goes to the
        dead-letter file); the txn and the batch stay usable.
        """
        with self._lock:
            self._check_open()
            self._write_one(record)
            if self._buffered_bytes >= self.options.memory_limit_bytes:
                self._auto_flush()

    def write_many(self, records: Iterable[bytes]) -> int:
        """Write many records; returns how many were written (bad ones excluded when a
        dead-letter file is configured; otherwise the first bad one raises)."""
        n = 0
        with self._lock:
            self._check_open()
            limit = self.options.memory_limit_bytes
            for record in records:
                if self._write_one(record):
                    n += 1
                if self._buffered_bytes >= limit:
                    self._auto_flush()
        return n

    def _write_one(self, record: bytes) -> bool:
        try:
            row, part_values = self._writer.encode(record)
        except SerializationError as e:
            self._stats.add("bad_records")
            if self._dead_letter is not None:
                self._dead_letter.add(record, str(e), source=f"{self.db}.{self.table_name}")
                return False
            raise
        if self._static is not None:
            pv: tuple[str | None, ...] = self._static
        elif self._dynamic:
            pv = tuple(part_values)
        else:
            pv = ()
        part = self._partition_dir(pv)
        bucket = self._bucket_of(row)
        key = (part, bucket)
        buf = self._buffers.get(key)
        if buf is None:
            buf = self._buffers[key] = []
        buf.append(row)
        self._buffered_bytes += len(record)
        self._stats.add("records_written")
        self._stats.add("records_size", len(record))
        return True

    def write_rows(
        self, rows: Iterable[Sequence[Any]], *, partition: Sequence[str | None] = ()
    ) -> int:
        """Write already-typed rows (tuples in table column order) into the open txn."""
        with self._lock:
            self._check_open()
            pv = self._static if self._static is not None else tuple(partition)
            part = self._partition_dir(pv)
            if not self._bucket_idx:
                # Unbucketed: the rows go to bucket 0 as they are, no per-row work.
                buf = self._buffers.setdefault((part, 0), [])
                before = len(buf)
                buf.extend(tuple(r) if not isinstance(r, tuple) else r for r in rows)
                n = len(buf) - before
            else:
                n = 0
                for row in rows:
                    key = (part, self._bucket_of(row))
                    self._buffers.setdefault(key, []).append(tuple(row))
                    n += 1
            self._stats.add("records_written", n)
            return n

    def write_arrow(
        self, data: pa.Table | pa.RecordBatch, *, partition: Sequence[str | None] = ()
    ) -> int:
        """Write Arrow rows (columns in table order, matched by position) into the open txn.

        The columnar path: a single-txn file is written by pyarrow without converting rows
        to Python objects. Bucketed tables route row by row.
        """
        with self._lock:
            self._check_open()
            if data.num_columns != len(self.schema.columns):
                raise ConfigError(
                    f"expected {len(self.schema.columns)} columns, got {data.num_columns}"
                )
            if self._bucket_idx:
                cols = [data.column(i).to_pylist() for i in range(data.num_columns)]
                return self.write_rows(zip(*cols, strict=True), partition=partition)
            pv = self._static if self._static is not None else tuple(partition)
            part = self._partition_dir(pv)
            table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
            self._arrow_buffers.setdefault((part, 0), []).append(table)
            self._buffered_bytes += table.nbytes
            self._stats.add("records_written", table.num_rows)
            self._stats.add("records_size", table.nbytes)
            if self._buffered_bytes >= self.options.memory_limit_bytes:
                self._auto_flush()
            return int(table.num_rows)

    def _partition_name(self, values: Sequence[str | None]) -> str:
        return make_partition_name(self.table.partition_names, list(values))

    def _partition_dir(self, values: tuple[str | None, ...]) -> str:
        if not self.table.is_partitioned:
            return ""
        if len(values) != len(self.table.partition_keys):
            raise SerializationError(
                f"record gives {len(values)} partition values, the table has {len(self.table.partition_keys)}"
            )
        name = self._known_partitions.get(values)
        if name is None:
            vals = [v if v not in (None, "") else None for v in values]
            info = self._store.add_partition(self.db, self.table_name, vals)
            self._count_call()
            if not info.exists:
                self._stats.add("created_partitions")
            self._stats.add("total_partitions")
            name = info.name
            self._known_partitions[values] = name
        self._touched.add(name)
        return name

    def _bucket_of(self, row: Sequence[Any]) -> int:
        if not self._bucket_idx:
            return 0
        return bucket_number(
            [row[i] for i in self._bucket_idx],
            self._bucket_types,
            self.table.num_buckets,
            bucketing_version=self.table.bucketing_version,
        )

    # ------------------------------------------------------------------ files
    def _writer_for(self, b: _Batch, part: str, bucket: int) -> AcidFileWriter:
        w = b.writers.get((part, bucket))
        if w is None:
            multi = len(b.txn_ids) > 1
            base = self._location if not part else self._storage.join(self._location, part)
            d = layout.delta_dir_name(
                b.min_write_id, b.max_write_id, statement_id=self.options.statement_id
            )
            path = self._storage.join(base, d, layout.bucket_file_name(bucket))
            w = AcidFileWriter(
                self._storage,
                path,
                self.schema,
                kind="insert",
                bucket_id=bucket,
                statement_id=self.options.statement_id,
                streaming=multi,
                side_file=multi,
                options=self.options.orc,
                # Columnar engine (about 2x pyorc); a batch's file gets a stitched footer per txn.
                engine="arrow",
            )
            b.writers[(part, bucket)] = w
        return w

    def _drain(self, b: _Batch) -> None:
        """Hand every buffered row of the current txn to its file."""
        wid = b.write_ids[b.current_txn]
        for (part, bucket), rows in self._buffers.items():
            if rows:
                self._writer_for(b, part, bucket).insert(wid, rows)
        for (part, bucket), tables in self._arrow_buffers.items():
            w = self._writer_for(b, part, bucket)
            for t in tables:
                w.insert_arrow(wid, t)
        self._buffers.clear()
        self._arrow_buffers.clear()
        self._buffered_bytes = 0

    def _auto_flush(self) -> None:
        b = self._batch
        assert b is not None
        self._drain(b)
        for w in b.writers.values():
            if w.streaming:
                w.flush()
        self._stats.add("auto_flushes")

    def commit_transaction(
        self,
        *,
        partitions: Iterable[str | Sequence[str]] | None = None,
        key: str | None = None,
        value: str | None = None,
    ) -> None:
        """Commit the open txn: make its rows durable (intermediate footers, side-file
        lengths; final footers on the batch's last txn), register partitions, and commit in
        the metastore with ``key``/``value`` stored atomically when given.

        ``partitions`` are extra partitions to create (names ``a=1/b=2`` or value lists).
        """
        if (key is None) != (value is None):
            raise ConfigError("key and value must be given together")
        with self._lock:
            b = self._check_open()
            txn = b.current_txn
            wid = b.write_ids[txn]
            for p in partitions or ():
                values = _partition_values(p, self.table.partition_names)
                self._partition_dir(tuple(values))
            self._drain(b)
            last = b.remaining == 0
            for w in b.writers.values():
                if last:
                    w.close()
                else:
                    w.flush()
            if self._dynamic and self._touched:
                self._store.add_dynamic_partitions(
                    txn,
                    wid,
                    self.db,
                    self.table_name,
                    sorted(self._touched),
                    DataOperationType.INSERT,
                )
                self._count_call()
            try:
                self._store.commit_txn(txn, key=key, value=value, db=self.db, table=self.table_name)
                self._count_call()
            except TxnAbortedError as e:
                b.state = TxnStatus.ABORTED
                self._stats.add("aborted_transactions")
                raise TxnAbortedError(
                    f"Aborted transaction cannot be committed: txn {txn}: {e}"
                ) from e
            b.state = TxnStatus.COMMITTED
            self._stats.add("committed_transactions")
            if last:
                b.writers.clear()

    def abort_transaction(self) -> None:
        """Abort the open txn. Its buffered rows are dropped; rows already in a batch file
        (auto-flush) stay there, hidden by their write id."""
        with self._lock:
            b = self._batch
            if b is None or b.state != TxnStatus.OPEN:
                raise TransactionError("Transaction state is not OPEN. Missing begin_transaction?")
            self._buffers.clear()
            self._arrow_buffers.clear()
            self._buffered_bytes = 0
            self._store.abort_txn(b.current_txn, reason="rollback by the client")
            self._count_call()
            b.state = TxnStatus.ABORTED
            self._stats.add("aborted_transactions")
            if b.remaining == 0:
                self._finish_batch(b)

    def _finish_batch(self, b: _Batch) -> None:
        """Close the batch's files and abort its txns that were never committed."""
        for w in list(b.writers.values()):
            try:
                w.close()
            except (OSError, AcidStreamError) as e:
                log.error("closing %s failed: %s", w.path, e)
        b.writers.clear()
        start = b.index + 1 if b.state != TxnStatus.OPEN else b.index
        for t in b.txn_ids[max(start, 0) :]:
            self._safe_abort(t, "streaming connection closed with the txn unused")
            self._stats.add("aborted_transactions")
        if b.state == TxnStatus.OPEN:
            b.state = TxnStatus.ABORTED
        b.index = len(b.txn_ids) - 1

    def _safe_abort(self, txn: int, reason: str) -> None:
        try:
            self._store.abort_txn(txn, reason=reason)
        except AcidStreamError as e:
            log.warning("abort of txn %s failed: %s", txn, e)

    def close(self) -> None:
        """Abort every txn of the batch not yet committed, finish the files, stop
        heartbeating and close the metastore connection. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._batch is not None:
                    self._buffers.clear()
                    self._finish_batch(self._batch)
            finally:
                if self._heartbeater is not None:
                    self._heartbeater.stop()
                if self._dead_letter is not None:
                    self._dead_letter.close()
                if self._owns_store:
                    self._store.close()

    def __enter__(self) -> StreamingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _partition_values(p: str | Sequence[str], keys: Sequence[str]) -> list[str | None]:
    if not isinstance(p, str):
        return list(p)
    kv = dict(parse_partition_name(p))
    if set(kv) != set(keys):
        raise ConfigError(f"partition {p!r} must name exactly {list(keys)}")
    return [None if kv[k] == DEFAULT_PARTITION_NAME else kv[k] for k in keys]


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
