"""``StreamingConnection``: Hive's Streaming Ingest API v2 in Python.

A connection streams records into one full-ACID table. Transactions come in batches
(``txns_per_batch``, Hive's default 1): the metastore side of a batch (open, write ids,
locks, heartbeats, commits, aborts) is :class:`acidstream.txn.batch.TransactionBatch`, shared with
every other writer; rows are placed (partition directory, bucket, file), buffered against the memory
limit and written by :class:`acidstream.acid.table_writer.TableWriter` (one per batch:
one ``delta_<min>_<max>[_stmt]/bucket_N`` file per (partition, bucket) for the whole
batch), shared with the sink's tasks and the compactor. What is the connection's own:
parsing records (the record writer), registering partitions, when to auto-flush, and
making each commit durable behind intermediate ORC footers whose lengths go to the
``_flush_length`` side files (batches of more than one txn). See ``docs/ingest.md``.
"""

from __future__ import annotations

import getpass
import logging
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from itertools import islice
from typing import Any, TypeVar

import pyarrow as pa

from acidstream.acid.durability import Durability, resolve_durability
from acidstream.acid.errors import (
    AcidStreamError,
    ConfigError,
    SerializationError,
    StorageError,
    TableNotFoundError,
    TransactionError,
    storage_error,
)
from acidstream.acid.placement import Placement, TableLayout
from acidstream.acid.schema import TableSchema
from acidstream.acid.table_name import TableName
from acidstream.acid.table_writer import TableWriter, WriteTarget
from acidstream.ingest.call_args import partition_values, row_tuples
from acidstream.ingest.dead_letter import DeadLetterWriter
from acidstream.ingest.footer_sync import FooterSyncer, PendingFooters
from acidstream.ingest.parse_ahead import AheadParser, ParsedBlock, parse_stream
from acidstream.ingest.record_writers import BoundRecordWriter, RecordWriter
from acidstream.ingest.static_partition import canonical_partition_values, static_partition_values
from acidstream.ingest.stats import ConnectionStats, StatsCounter
from acidstream.ingest.streaming_options import BlockResult, StreamingOptions
from acidstream.ingest.upserts import ChangeBuffer, UpsertMethods, upsert_key
from acidstream.ingest.write_many import WriteManyReplay
from acidstream.txn.batch import TransactionBatch
from acidstream.txn.catalog import TableDef
from acidstream.txn.config import StoreConfig
from acidstream.txn.heartbeat import Heartbeater
from acidstream.txn.housekeeper import Housekeeper
from acidstream.txn.locks import DataOperationType
from acidstream.txn.namespaces import resolve_write
from acidstream.txn.store import TxnState, TxnStore, open_store

__all__ = ["BlockResult", "StreamingConnection", "StreamingOptions"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class StreamingConnection(WriteManyReplay, UpsertMethods):
    """Streams records into one transactional table (Hive's ``HiveStreamingConnection``);
    with ``options.mode="upsert"``, applies upserts and deletes to a keyed table instead
    (:mod:`acidstream.ingest.upserts`).

    Use it as a context manager, or call ``close()``: closing aborts any txn of the batch
    not yet committed and finishes the files.

    Args:
        table: ``db.table`` (or ``table`` in the ``default`` database).
        record_writer: turns each record into a row (``StrictDelimitedInputWriter``...).
        metastore: metastore URL; default from ``ACIDSTREAM_METASTORE`` or the embedded store.
        warehouse: warehouse root; default from ``ACIDSTREAM_WAREHOUSE`` or ``./warehouse``.
        store: an open store to use instead of ``metastore`` (the caller closes it).
        storage_options: the warehouse filesystem's options (endpoint, credentials) when
            the connection opens its own store; a given ``store`` brings its own.
        static_partition: partition values (in key order, or by key) for a static-partition
            connection; ``None`` on a partitioned table means dynamic partitioning: the
            partition values are the trailing fields of each record.
        options: everything else.
        durability: ``"fsync"`` or ``"flush"``, overriding ``options.durability`` and the
            table property ``acidstream.durability`` (``docs/durability.md``).
    """

    def __init__(
        self,
        table: str,
        *,
        record_writer: RecordWriter,
        metastore: str | None = None,
        warehouse: str | None = None,
        store: TxnStore | None = None,
        storage_options: Mapping[str, Any] | None = None,
        static_partition: Sequence[str | None] | Mapping[str, str | None] | None = None,
        options: StreamingOptions | None = None,
        durability: str | None = None,
    ) -> None:
        self.options = options or StreamingOptions()
        self.name = TableName.parse(table)
        self.db, self.table_name = self.name.db, self.name.table
        if store is None:
            cfg = StoreConfig.resolve(
                metastore=metastore, warehouse=warehouse, storage_options=storage_options
            )
            self._store = cfg.open()
            self._owns_store = True
        else:
            self._store = store
            self._owns_store = False
        self._stats = StatsCounter()
        self._lock = threading.RLock()
        self._closed = False
        self._batch: TransactionBatch | None = None
        # The batch's buffered writer (None between batches).
        self._out: TableWriter | None = None
        self._heartbeater: Heartbeater | None = None
        self._syncer = FooterSyncer()  # makes footers durable (commit)
        self._housekeeper: Housekeeper | None = None
        self._given: dict[tuple[str | None, ...], tuple[str | None, ...]] = {}
        self._dead_letter: DeadLetterWriter | None = None
        self._changes: ChangeBuffer | None = None  # an upsert connection's open txn
        self._last_changes = None
        try:
            self.name = resolve_write(self._store, table, namespace=self.options.namespace)
            self.db, self.table_name = self.name.db, self.name.table
            self.table = self._load_table()
            self._count_call()
            if self.options.mode == "upsert":
                self._changes = ChangeBuffer(self.table, upsert_key(self.table))
            self.schema: TableSchema = self.table.schema
            # The table's ORC properties (orc.compress...) win over the options', as in Hive.
            self._orc = self.options.orc.for_table(self.table.parameters)
            # ... while the writer's durability wins over the table's (a writer may accept
            # to lose its last commits to a power cut; the table states the default).
            self.durability: Durability = resolve_durability(
                durability if durability is not None else self.options.durability,
                self.table.parameters,
                full_name=self.table.full_name,
            )
            layout = self._layout()
            self._place = Placement(layout, storage=self._store.storage(layout.location)[0])
            self._static = self._static_partition(static_partition)
            if self._static is not None:
                try:
                    self._place.partition_dir(self._static)
                except SerializationError as e:  # e.g. the list-bucketing default dir name
                    raise ConfigError(f"static partition {list(self._static)}: {e}") from e
            self._dynamic = self.table.is_partitioned and self._static is None
            self._writer: BoundRecordWriter = record_writer.bind(
                self.schema, partition_columns=self.table.partition_keys if self._dynamic else ()
            )
            if self.options.txns_per_batch > 1 and not self._place.storage.supports_flush:
                raise ConfigError(
                    "The backing filesystem only supports transaction batch sizes of 1 "
                    f"({self._place.storage.protocol} cannot hflush a file being written)"
                )
            if self.options.dead_letter_path:
                self._dead_letter = DeadLetterWriter(
                    self.options.dead_letter_path,
                    source=str(self.name),
                    storage_options=self._store.storage_options,
                )
        except BaseException:
            if self._owns_store:
                self._store.close()
            raise
        self._registered: set[str] = set()  # partitions known to exist in the catalog
        self._touched: set[str] = set()  # partitions the open txn wrote
        # The open txn wrote a block parsed ahead: a parse may be running on another
        # thread (how its commit syncs: ``commit_transaction``).
        self._parsed_ahead = False
        self._user = self.options.user or _user()
        self._host = self.options.host or socket.gethostname()
        self._agent = (
            self.options.agent_info
            or f"{self._user}:{self._host}:{threading.current_thread().name}"
        )

    # ------------------------------------------------------------------ setup
    def _count_call(self) -> None:
        self._stats.add("metastore_calls")

    def _layout(self) -> TableLayout:
        """The table's placement. Partitions are not listed (opening costs the same for a
        table of 30,000 partitions as for one): a partition keeps the list bucketing it
        was created with, which :meth:`_partition` learns from the catalog the first time
        the connection writes to it, before any row is placed there."""
        return TableLayout.of(self.table)

    @property
    def layout(self) -> TableLayout:
        """How this connection places rows (partition, bucket, list-bucketing directory)."""
        return self._place.table

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

    def _static_partition(
        self, values: Sequence[str | None] | Mapping[str, str | None] | None
    ) -> tuple[str | None, ...] | None:
        """The static partition's values, converted and checked as a record's partition
        fields are (:mod:`acidstream.ingest.static_partition`); ``None``: dynamic (or unpartitioned)."""
        if values is None or (
            not isinstance(values, (Mapping, str, bytes))
            and isinstance(values, Sequence)
            and len(values) == 0
        ):
            return None
        if not self.table.partition_names:
            raise ConfigError(
                f"static partition values given, but {self.table.full_name} is not partitioned"
            )
        return static_partition_values(self.table.partition_keys, values, self.table.full_name)

    def _given_partition(self, values: Sequence[str | None]) -> tuple[str | None, ...]:
        """Partition values a caller passed to ``write_rows``/``write_arrow``, converted as
        a static partition's are (remembered: callers repeat the same few)."""
        if not self.table.is_partitioned:
            return tuple(values)
        key = tuple(values)
        out = self._given.get(key)
        if out is None:
            out = canonical_partition_values(self.table.partition_keys, key, self.table.full_name)
            self._given[key] = out
        return out

    # ------------------------------------------------------------------ state
    def _check_usable(self) -> None:
        if self._closed:
            raise TransactionError("connection is closed")
        if self._batch is not None:
            self._batch.check_alive()

    def _check_open(self, *, changes: bool = False) -> TransactionBatch:
        self._check_usable()
        if (self._changes is not None) != changes:
            raise ConfigError(
                f"the connection to {self.name} is opened for "
                + ("upserts: use upsert()/delete()" if changes is False else "appends: use write()")
            )
        b = self._batch
        if b is None or b.state is not TxnState.OPEN:
            raise TransactionError("Transaction state is not OPEN. Missing begin_transaction?")
        return b

    @property
    def current_txn_id(self) -> int | None:
        b = self._batch
        return b.current_txn if b is not None and b.index >= 0 else None

    @property
    def current_write_id(self) -> int | None:
        b = self._batch
        return b.current_write_id if b is not None and b.index >= 0 else None

    @property
    def state(self) -> TxnState | None:
        """The current txn's state (``None`` before the first ``begin_transaction``)."""
        return self._batch.state if self._batch is not None else None

    def stats(self) -> ConnectionStats:
        """Counters since the connection was opened (Hive's ``ConnectionStats``)."""
        return self._stats.snapshot()

    def heartbeat(self) -> None:
        """Heartbeat the batch now (the background thread does this every interval)."""
        if self._batch is not None:
            self._batch.heartbeat()

    # ------------------------------------------------------------------ batches
    def _open_batch(self) -> TransactionBatch:
        if self._heartbeater is None:
            # One thread and one extra store connection (Hive's separate heartbeat client)
            # for every batch of the connection.
            self._heartbeater = Heartbeater(
                open_store(self._store.url, clock=self._store.clock),
                interval_s=self.options.heartbeat_interval_s,
                txn_range=lambda: None,
                on_lost=lambda _: None,
                count=self._count_call,
            )
            self._heartbeater.start()
        if self._housekeeper is None and self.options.housekeeping_interval_s is not None:
            self._housekeeper = Housekeeper(
                self._store.url,
                interval_s=self.options.housekeeping_interval_s,
                clock=self._store.clock,
            )
            self._housekeeper.start()
        part = None if self._static is None else self._place.partition_dir(self._static)
        upserts = self._changes is not None  # EXCL_WRITE on the whole table (upserts.py)
        return TransactionBatch(
            self._store,
            self.name,
            size=self.options.txns_per_batch,
            heartbeat_interval_s=self.options.heartbeat_interval_s,
            lock_wait_s=self.options.lock_wait_s,
            partition=None if upserts else part,
            dynamic=self.table.is_partitioned if upserts else self._dynamic,
            operation=DataOperationType.UPDATE if upserts else DataOperationType.INSERT,
            exclusive=upserts,
            user=self._user,
            host=self._host,
            agent_info=self._agent,
            on_call=self._count_call,
            heartbeater=self._heartbeater,
            durability=self.durability,
            lock_first=True,  # begin_transaction begins its first txn at once
        )

    def begin_transaction(self) -> int:
        """Start the next txn of the batch (opening a new batch when needed) and take the
        streaming lock (SHARED_READ, op INSERT). Returns the txn id."""
        with self._lock:
            self._check_usable()
            b = self._batch
            if b is not None and b.state is TxnState.OPEN:
                raise TransactionError("a transaction is already open: commit or abort it first")
            if b is None or b.remaining <= 0:
                if b is not None:
                    self._finish_batch(b)
                self._batch = None
                b = self._batch = self._open_batch()
                if self._changes is None:  # (upserts write through the engine at commit)
                    self._out = TableWriter(
                        self._place,
                        target=WriteTarget(
                            min_write_id=b.min_write_id,
                            max_write_id=b.max_write_id,
                            statement_id=self.options.statement_id,
                        ),
                        options=self._orc,
                        streaming=b.size > 1,
                        memory_limit_bytes=self.options.memory_limit_bytes,
                        durability=self.durability,
                    )
            txn = b.begin_next()
            if self._changes is not None:
                txn = self._upsert_begun(b, txn)
            self._touched = set()
            self._parsed_ahead = False
            return txn

    # ------------------------------------------------------------------ writing
    def write(self, record: bytes) -> None:
        """Write one record into the open txn.

        A record that cannot be converted raises ``SerializationError`` (or goes to the
        dead-letter directory); the txn and the batch stay usable.
        """
        with self._lock:
            self._check_open()
            try:
                self._write_one(record)
            except SerializationError as e:
                if not self._reject(record, e):
                    raise
            self._maybe_auto_flush()

    def write_many(self, records: Iterable[bytes]) -> int:
        """Write many records; returns how many were written (bad ones excluded when a
        dead-letter directory is configured; otherwise the first bad one raises and the
        records before it are written).

        The records are parsed a chunk at a time by the record writer's bulk path
        (``encode_block``), with the outcome of calling :meth:`write` on each in turn: the
        same records rejected with the same errors, dead letters in record order,
        partitions created in the order records first name them, auto-flushes after the
        same records, the same counters, and the same records buffered when a call
        raises. An iterator is read up to a chunk (``_MANY_CHUNK_RECORDS`` records or
        ``_MANY_CHUNK_BYTES``) ahead of the record that raises.
        """
        n = 0
        with self._lock:
            self._check_open()
            if isinstance(records, (list, tuple)):
                start = 0
                while start < len(records):
                    chunk, start = _sequence_chunk(records, start)
                    n += self._write_many_chunk(chunk)
                return n
            it = iter(records)
            while True:
                chunk, more, failure = _next_chunk(it)
                n += self._write_many_chunk(chunk)
                if failure is not None:
                    # The records drawn before the iterable failed are written, as
                    # write() on each would have left them; then its error.
                    raise failure
                if not more:
                    return n

    def _write_many_chunk(self, records: Sequence[bytes]) -> int:
        """``write_many`` of one chunk: the records up to a non-bytes one, which can only
        be the last (``_next_chunk``) and is refused after them as ``write`` refuses it."""
        if records and not isinstance(records[-1], (bytes, bytearray)):
            self._write_many_block(records[:-1])
            e = SerializationError(_not_bytes(records[-1]))
            self._reject(records[-1], e)  # counted; never a dead letter
            raise e
        return self._write_many_block(records)

    def write_block(
        self, block: Sequence[bytes] | ParsedBlock, *, positions: Sequence[str] | None = None
    ) -> BlockResult:
        """Write a block of records (a chunk of an input file, an HTTP body, a micro-batch)
        into the open txn, parsed in one columnar pass (the record writer's bulk path),
        or a block :meth:`parse_ahead` already parsed.

        A bad record never fails the block: it goes to the dead-letter directory when one
        is configured (with its ``positions`` entry), and every rejected record is
        returned with its index and error, the same error ``write`` would raise.
        """
        if isinstance(block, ParsedBlock):
            if block.writer is not self._writer:
                raise ConfigError("a block parsed by another connection's record writer")
            records, enc, nbytes = block.records, block.encoded, block.nbytes
        else:
            records, enc, nbytes = block, None, -1
            bad = next((r for r in records if not isinstance(r, (bytes, bytearray))), b"")
            if not isinstance(bad, (bytes, bytearray)):
                raise SerializationError(_not_bytes(bad) + " (nothing of the block is written)")
        with self._lock:
            self._check_open()
            if enc is None:
                enc = self._writer.encode_block(records)
            else:
                self._parsed_ahead = True
            rejected = list(enc.rejected)
            table = enc.table
            if table.num_rows:
                for part, rows in self._block_partitions(
                    table, enc.partitions, rejected, enc.good_indices
                ):
                    self._buffers().add_arrow(part, rows, nbytes=0)
                    self._stats.add("records_written", rows.num_rows)
            rejected.sort(key=lambda r: r[0])
            for i, e in rejected:
                self._reject(records[i], e, position=positions[i] if positions else "")
            bad_bytes = sum(len(records[i]) for i, _ in rejected)
            if nbytes < 0:
                nbytes = enc.nbytes if enc.nbytes >= 0 else sum(map(len, records))
            self._stats.add("records_size", nbytes - bad_bytes)
            # Buffered record bytes, as write() counts them (Table.nbytes costs more here).
            self._buffers().count_bytes(nbytes - bad_bytes)
            self._maybe_auto_flush()
        return BlockResult(len(records) - len(rejected), tuple(rejected))

    def encode_buffered(self) -> None:
        """Hand the open txn's buffered rows to its ORC writers now (no footer, no
        commit), so the commit has less left to do: for a writer that waits between
        writes, such as the HTTP server during its group-commit window. A storage
        failure aborts the txn, as at commit."""
        with self._lock:
            b = self._check_open()
            self._storage_step(b, lambda: self._drain(b))

    def parse_ahead(self, blocks: Iterable[Sequence[bytes]]) -> Iterator[ParsedBlock]:
        """Each of ``blocks`` parsed for :meth:`write_block`, the next one on a background
        thread while the caller writes and commits this one (``acidstream.ingest.parse_ahead``):
        ``for b in conn.parse_ahead(blocks): begin; write_block(b); commit``. Parsing
        touches no txn state, so what is written, rejected and committed is exactly
        what ``write_block(records)`` would do; it only overlaps in time."""
        return parse_stream(self._writer, blocks)

    def ahead_parser(self) -> AheadParser:
        """A parser of the block the caller expects to write next (``acidstream.ingest.parse_ahead``),
        for writers whose next block depends on how this one went; close it when done."""
        return AheadParser(self._writer)

    def _block_partitions(
        self,
        table: pa.Table,
        partitions: pa.Table | None,
        rejected: list[tuple[int, SerializationError]],
        good: pa.Int64Array,
    ) -> list[tuple[str, pa.Table]]:
        """Split a block's rows by partition directory. Rows whose partition values no
        directory can hold are added to ``rejected`` (by record index)."""
        if self._static is not None or not self._dynamic or partitions is None:
            pv = self._static if self._static is not None else ()
            return [(self._partition(pv), table)]
        out: list[tuple[str, pa.Table]] = []
        for values, rows in self._place.partition_groups(partitions):
            try:
                part = self._partition(values)
            except SerializationError as e:
                rejected.extend((i, e) for i in good.take(rows).to_pylist())
                continue
            out.append((part, table.take(rows)))
        return out

    def reject(self, record: bytes, error: SerializationError, *, position: str = "") -> bool:
        """Count a record the caller found bad before writing it (e.g. over a size limit)
        and send it to the dead letters when configured (then True)."""
        with self._lock:
            return self._reject(record, error, position=position)

    def _reject(self, record: bytes, error: SerializationError, *, position: str = "") -> bool:
        """Count a bad record; send it to the dead letters if configured (then True)."""
        self._stats.add("bad_records")
        if self._dead_letter is None or not isinstance(record, (bytes, bytearray)):
            # A non-bytes "record" (None...) is a caller's bug with nothing to replay: it
            # is counted and raised, never written to the dead letters.
            return False
        self._dead_letter.add(record, str(error), position=position)
        return True

    def _write_one(self, record: bytes) -> None:
        """Convert, place and buffer one record; ``SerializationError`` if it is bad."""
        if not isinstance(record, (bytes, bytearray)):
            raise SerializationError(_not_bytes(record))
        row, part_values = self._writer.encode(record)
        pv: Sequence[str | None]
        if self._static is not None:
            pv = self._static
        elif self._dynamic:
            pv = part_values
        else:
            pv = ()
        part = self._partition(pv)
        self._buffers().add_row(part, row, nbytes=len(record))
        self._stats.add("records_written")
        self._stats.add("records_size", len(record))

    def write_rows(
        self, rows: Iterable[Sequence[Any]], *, partition: Sequence[str | None] = ()
    ) -> int:
        """Write already-typed rows (tuples in table column order) into the open txn.

        The rows are converted to the table's Arrow types here, in one pass, so the
        call is all or nothing: a row that is not a sequence of the table's column count,
        or a value that does not fit its column, raises ``SerializationError`` and no row
        of the call is buffered; nothing of it can fail at commit. The buffered rows count
        towards ``memory_limit_bytes``.
        """
        with self._lock:
            self._check_open()
            new = row_tuples(rows, len(self.schema.columns))
            table = self._place.rows_to_table(new)
            part = self._partition(
                self._static if self._static is not None else self._given_partition(partition)
            )
            self._buffers().add_arrow(part, table)
            self._stats.add("records_written", table.num_rows)
            self._stats.add("records_size", table.nbytes)
            self._maybe_auto_flush()
            return int(table.num_rows)

    def write_arrow(
        self, data: pa.Table | pa.RecordBatch, *, partition: Sequence[str | None] = ()
    ) -> int:
        """Write Arrow rows (columns in table order, matched by position) into the open txn.

        The columnar path: rows are never turned into Python objects (bucketed tables
        compute each row's bucket, then keep the columns).
        """
        with self._lock:
            self._check_open()
            if data.num_columns != len(self.schema.columns):
                raise ConfigError(
                    f"expected {len(self.schema.columns)} columns, got {data.num_columns}"
                )
            part = self._partition(
                self._static if self._static is not None else self._given_partition(partition)
            )
            table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
            self._buffers().add_arrow(part, table)
            self._stats.add("records_written", table.num_rows)
            self._stats.add("records_size", table.nbytes)
            self._maybe_auto_flush()
            return int(table.num_rows)

    def _partition(self, values: Sequence[str | None]) -> str:
        """The partition directory of these values, registered in the catalog once
        (Hive's ``createPartitionIfNotExists``) and remembered for the commit."""
        if not self.table.is_partitioned:
            return ""
        name = self._place.partition_dir(values)
        if name not in self._registered:
            info = self._store.add_partition(
                self.db, self.table_name, [None if v in (None, "") else v for v in values]
            )
            self._count_call()
            # The partition's own list bucketing, copied from the table at its creation.
            self._place.note_partition(name, info.skewed)
            if not info.exists:
                self._stats.add("created_partitions")
            self._stats.add("total_partitions")
            self._registered.add(name)
        self._touched.add(name)
        return name

    # ------------------------------------------------------------------ files
    def _buffers(self) -> TableWriter:
        """The open batch's writer (its buffers and files)."""
        out = self._out
        assert out is not None  # set with the batch, which the caller found open
        return out

    def _drain(self, b: TransactionBatch) -> None:
        """Hand every buffered row of the current txn to its file."""
        self._buffers().drain(b.current_write_id)

    def _drop_buffers(self) -> None:
        if self._changes is not None:
            self._changes.clear()
        if self._out is not None:
            self._out.drop_buffers()

    def _maybe_auto_flush(self) -> None:
        if not self._buffers().over_limit:
            return
        b = self._check_open()
        self._storage_step(b, lambda: self._buffers().flush(b.current_write_id))
        self._stats.add("auto_flushes")

    def _storage_step(self, b: TransactionBatch, step: Callable[[], T]) -> T:
        """Run a step that writes files. A storage failure (full disk, I/O error...) aborts
        the open txn and ends the batch: its files are left as they are, readable at their
        last committed length (the side file keeps pointing at it); the error is typed."""
        try:
            return step()
        except OSError as e:
            txn = b.current_txn
            self._fail_batch(b, f"writing the table's files failed: {e}")
            raise storage_error(
                e, f"writing {self.name}", f"txn {txn} was aborted, committed data is intact"
            ) from e

    def _fail_batch(self, b: TransactionBatch, reason: str) -> None:
        if self._out is not None:
            self._out.abandon()
        b.abort_remaining(reason)
        self._stats.add("aborted_transactions")

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
            b = self._check_open(changes=self._changes is not None)
            for p in partitions or ():
                self._partition(partition_values(p, self.table.partition_names))
            if self._changes is not None:
                return self._commit_changes(b, key=key, value=value)
            last = b.remaining == 0

            out = self._buffers()

            def write_footers() -> PendingFooters | None:
                if last:  # final footers, synced while the commit's statements run
                    out.drain(b.current_write_id)
                    return self._syncer.start_final(out.end_files(), out.finish_ended)
                footers = out.write_footers(b.current_write_id)
                if not footers:
                    return None
                # The embedded metastore's statements take microseconds: with a parse
                # running ahead the writing thread syncs the files itself (a thread
                # hand-off would contend with the parse for the interpreter lock);
                # otherwise the statements run while the sync thread waits for the disk.
                inline = self._store.database.serialises_writers and self._parsed_ahead
                return self._syncer.start(footers, inline=inline)

            # The files' fdatasyncs, then, inside the commit's DB transaction and before
            # its COMMIT, the side files get the new lengths (durably, after the data),
            # or, the batch's last txn, the files are closed and their side files deleted.
            synced = self._storage_step(b, write_footers)
            try:
                b.commit(
                    partitions=sorted(self._touched), key=key, value=value,
                    durable=None if synced is None else partial(self._synced, b, synced),
                )  # fmt: skip
                if synced is not None:
                    self._synced(b, synced)  # (a commit found done did not wait)
            except StorageError:
                if b.state is TxnState.OPEN:
                    self._fail_batch(b, "making the table's files durable failed")
                raise
            except AcidStreamError:
                if b.state is TxnState.ABORTED:
                    self._stats.add("aborted_transactions")
                raise
            finally:
                if synced is not None:
                    synced.wait()  # the files are the writer's again
                    if last and self._out is out:
                        # A commit that failed before its COMMIT: files whole and durable
                        # are closed as before (a txn not committed is hidden); files whose
                        # sync failed are cut back to their last footer (or deleted).
                        if synced.data.exception() is None:
                            out.finish_ended()
                        else:
                            out.abandon()
            self._stats.add("committed_transactions")

    def _synced(self, b: TransactionBatch, synced: PendingFooters) -> None:
        """Wait for the files' sync, then record each new footer in its side file (once);
        a storage failure becomes a typed error."""
        try:
            synced.record()
        except OSError as e:
            raise storage_error(
                e,
                f"writing {self.name}",
                f"txn {b.current_txn} was aborted, committed data is intact",
            ) from e

    def abort_transaction(self) -> None:
        """Abort the open txn. Its buffered rows are dropped; rows already in a batch file
        (auto-flush) stay there, hidden by their write id."""
        with self._lock:
            b = self._batch
            if b is None or b.state is not TxnState.OPEN:
                raise TransactionError("Transaction state is not OPEN. Missing begin_transaction?")
            self._drop_buffers()
            b.abort()
            self._stats.add("aborted_transactions")
            if b.remaining == 0:
                self._finish_batch(b)

    def _finish_batch(self, b: TransactionBatch) -> None:
        """Close the batch's files and abort its txns that were never committed."""
        if self._out is not None:
            # A file whose final footer cannot be written keeps its side file (it points
            # at the last committed footer) instead of deleting it.
            self._out.finish()
            self._out = None
        aborted = b.close()
        self._stats.add("aborted_transactions", len(aborted))

    def close(self) -> None:
        """Abort every txn of the batch not yet committed, finish the files, stop
        heartbeating and close the metastore connection. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._batch is not None:
                    self._drop_buffers()
                    self._finish_batch(self._batch)
            finally:
                self._syncer.shutdown()
                if self._heartbeater is not None:
                    self._heartbeater.stop()
                if self._housekeeper is not None:
                    self._housekeeper.stop()
                if self._dead_letter is not None:
                    self._dead_letter.close()
                if self._owns_store:
                    self._store.close()

    def __enter__(self) -> StreamingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# write_many's chunks: as many records as one encode_block parses well (the bulk path's
# per-call cost spread thin), few enough bytes to keep the parsed copy small.
_MANY_CHUNK_RECORDS = 10_000
_MANY_CHUNK_BYTES = 8 * 1024 * 1024
_MANY_PIECE = 1_000  # records drawn from the iterator at a time
_BYTES_TYPES = {bytes, bytearray}


def _next_chunk(it: Iterator[Any]) -> tuple[list[Any], bool, Exception | None]:
    """The next chunk of ``write_many``'s records: up to ``_MANY_CHUNK_RECORDS`` records
    or about ``_MANY_CHUNK_BYTES``, ending at the first record that is not bytes. Returns
    the chunk, whether more may follow, and the error the iterator raised (then no more).

    The records are drawn in pieces by C loops (``islice``, ``map``): a Python loop per
    record cost a fifth of ``write_many``'s time."""
    chunk: list[Any] = []
    size, want = 0, _MANY_PIECE
    try:
        while True:
            want = min(want, _MANY_CHUNK_RECORDS - len(chunk))
            piece: list[Any] = []
            try:
                piece.extend(islice(it, want))  # on an error, what was drawn stays in it
            finally:
                chunk += piece
            if not set(map(type, piece)) <= _BYTES_TYPES:  # (or subclasses of them)
                bad = _first_not_bytes(chunk, len(chunk) - len(piece))
                if bad is not None:
                    return chunk[: bad + 1], False, None
            size += sum(map(len, piece))
            if len(piece) < want:  # the iterator is exhausted
                return chunk, False, None
            if len(chunk) >= _MANY_CHUNK_RECORDS or size >= _MANY_CHUNK_BYTES:
                return chunk, True, None
            # Records this large: draw about as many as the bytes left allow.
            if size:
                left = (_MANY_CHUNK_BYTES - size) * len(chunk) // size
                want = max(1, min(_MANY_PIECE, left + 1))
    except Exception as e:
        # The records drawn before the error, up to a non-bytes one among them.
        bad = _first_not_bytes(chunk, 0)
        return (chunk, False, e) if bad is None else (chunk[: bad + 1], False, None)


def _sequence_chunk(records: Sequence[Any], start: int) -> tuple[Sequence[Any], int]:
    """The next chunk of a list or tuple of ``write_many``'s records from ``start``, cut as
    :func:`_next_chunk` cuts (records, bytes, a record that is not bytes ends it), by slicing
    instead of drawing: returns the chunk and where the next one begins (past the end after
    a record that is not bytes: the chunk's write refuses it and raises)."""
    chunk = records[start : start + _MANY_CHUNK_RECORDS]
    if not set(map(type, chunk)) <= _BYTES_TYPES:  # (or subclasses of them)
        bad = _first_not_bytes(chunk, 0)
        if bad is not None:
            return chunk[: bad + 1], len(records)
    if sum(map(len, chunk)) >= _MANY_CHUNK_BYTES:
        # Records this large: up to the one that reaches the byte limit.
        size = 0
        for i, record in enumerate(chunk):
            size += len(record)
            if size >= _MANY_CHUNK_BYTES:
                chunk = chunk[: i + 1]
                break
    return chunk, start + len(chunk)


def _first_not_bytes(records: Sequence[Any], start: int) -> int | None:
    """The index of the first record from ``start`` on that is not bytes, if any."""
    return next(
        (i for i in range(start, len(records)) if not isinstance(records[i], (bytes, bytearray))),
        None,
    )


def _not_bytes(record: object) -> str:
    return f"a record is bytes, not {type(record).__name__}"


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
